// Runs the CUDA kernels of the direct GPU convolutions (src/conv/kernels/naive.cuh, register.cuh)
// on the host, unchanged: every CUDA thread of a block is a ucontext fiber, __syncthreads a
// switch back to a scheduler that releases the block once all its threads wait, shared memory a
// per-block buffer (filled with NaN bits first, so a read of a pixel
// that staging did not write shows up in the result), and the few intrinsics the kernels use are
// defined here with their CUDA semantics (FP16 fma: exact in double, one rounding; see below).
// Blocks run one after another, which is one legal CUDA schedule. This lets a machine without a
// GPU execute the very index arithmetic, staging, packing and tap order of the kernels.
//
// Include only this header (after gtest and the standard headers), and only where the CUDA
// toolkit headers are available (__has_include(<cuda_fp16.h>)).
#pragma once

#include <ucontext.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include "halfscope/core/half.hpp"

// CUDA's host_defines.h gives these attribute meanings for host compilers; here they are nothing.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __constant__
#define __shared__ static  // blocks run one at a time, so a static is the block's variable
#define __launch_bounds__(...)

namespace halfscope::emu {

/// One CUDA thread: a ucontext fiber. A block's threads run in one OS thread, switching at
/// __syncthreads, so a barrier costs a context switch, not an OS-thread wake-up.
struct Fiber {
  ucontext_t ctx{};
  std::vector<char> stack;
  uint3 idx{0, 0, 0};
  bool done = false, waiting = false;
};
inline ucontext_t scheduler;
inline std::vector<Fiber> fibers;
inline std::size_t current = 0;
inline uint3 thread_idx{0, 0, 0};  // of the running fiber
inline uint3 block_idx{0, 0, 0};
inline dim3 block_dim, grid_dim;
inline int or_pending = 0, or_result = 0;
inline uint4* dynamic_smem = nullptr;
inline std::function<void()> fiber_body;

inline void fiber_entry() {
  fiber_body();
  fibers[current].done = true;  // returning resumes uc_link, the scheduler
}

inline void barrier_wait() {
  fibers[current].waiting = true;
  swapcontext(&fibers[current].ctx, &scheduler);
}

}  // namespace halfscope::emu

#define threadIdx (::halfscope::emu::thread_idx)
#define blockIdx (::halfscope::emu::block_idx)
#define blockDim (::halfscope::emu::block_dim)
#define gridDim (::halfscope::emu::grid_dim)
#define HS_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::halfscope::emu::dynamic_smem)

inline void __syncthreads() {
  halfscope::emu::barrier_wait();
}
inline int __syncthreads_or(int p) {
  if (p) halfscope::emu::or_pending = 1;
  halfscope::emu::barrier_wait();
  return halfscope::emu::or_result;
}
template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
T max(T a, T b) {
  return a < b ? b : a;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline int __ffsll(long long x) {
  return __builtin_ffsll(x);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const std::uint64_t v = (static_cast<std::uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int b = 0; b < 4; ++b)
    r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * b)) & 7))) & 0xffu) << (8 * b);
  return r;
}
inline float __uint_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}
inline unsigned __float_as_uint(float f) {
  return std::bit_cast<unsigned>(f);
}
inline double __longlong_as_double(long long u) {
  return std::bit_cast<double>(u);
}
inline long long __double_as_longlong(double d) {
  return std::bit_cast<long long>(d);
}
inline double __hiloint2double(int hi, int lo) {
  return std::bit_cast<double>((static_cast<std::uint64_t>(static_cast<unsigned>(hi)) << 32) |
                               static_cast<unsigned>(lo));
}
inline int __double2loint(double d) {
  return static_cast<int>(std::bit_cast<std::uint64_t>(d) & 0xffffffffu);
}
inline int __double2hiint(double d) {
  return static_cast<int>(std::bit_cast<std::uint64_t>(d) >> 32);
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fmaf(a, b, c);
}

// FP16 fma: a*b + c exact in double for the operands the tests use (at most 2*11 + 11 bits over a
// span well inside 53), then one correct rounding to FP16 (rounding to odd in float first makes the
// second rounding exact): what the hardware's fused HFMA computes. The integer conversions of
// half.hpp, not _Float16: GCC turns _Float16 <-> double into libgcc's soft-float calls, which
// raise the FP exception flags by real operations and cost 50-230 ns per fma (the emulated FP16
// tests spent most of their time there); these take 15.
inline unsigned short emu_hfma_bits(unsigned short a, unsigned short b, unsigned short c) {
  using namespace halfscope;
  const double r = std::fma(static_cast<double>(half_bits_to_float_soft(a)),
                            static_cast<double>(half_bits_to_float_soft(b)),
                            static_cast<double>(half_bits_to_float_soft(c)));
  return float_to_half_bits_rne_soft(double_to_float_round_to_odd(r));
}
inline __half __hfma(__half a, __half b, __half c) {
  return __ushort_as_half(
      emu_hfma_bits(__half_as_ushort(a), __half_as_ushort(b), __half_as_ushort(c)));
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  unsigned ua, ub, uc;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  std::memcpy(&uc, &c, 4);
  const unsigned lo = emu_hfma_bits(ua & 0xffffu, ub & 0xffffu, uc & 0xffffu);
  const unsigned hi = emu_hfma_bits(ua >> 16, ub >> 16, uc >> 16);
  const unsigned r = lo | (hi << 16);
  __half2 out;
  std::memcpy(static_cast<void*>(&out), &r, 4);
  return out;
}

// The kernels as nvcc compiles them; GCC cannot see that a staged chunk is only read where it was
// loaded (the `fast` bit mask), so its maybe-uninitialized warning is off for them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "conv/kernels/naive.cuh"
#include "conv/kernels/register.cuh"
#pragma GCC diagnostic pop

namespace halfscope::emu {

/// Runs kernel(args) on a grid x block, blocks in order, each with `smem_bytes` of dynamic
/// shared memory poisoned with NaN bits (0xffff in every 16-bit half). Throws std::logic_error
/// when a barrier is reached by only some of a block's threads (undefined behaviour in CUDA).
// swapcontext returns like setjmp; the scheduler's locals are not modified between its own
// swaps, so GCC's clobbered warning does not apply.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wclobbered"
template <class... Args>
void launch(void (*kernel)(Args...), dim3 grid, dim3 block, std::size_t smem_bytes,
            std::type_identity_t<Args>... args) {
  constexpr std::size_t kStack = 256 * 1024;
  grid_dim = grid;
  block_dim = block;
  std::vector<uint4> smem(smem_bytes / 16 + 1);
  const std::size_t n = static_cast<std::size_t>(block.x) * block.y;
  fibers.resize(n);
  for (auto& f : fibers) f.stack.resize(kStack);
  fiber_body = [&] { kernel(args...); };
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      std::memset(smem.data(), 0xff, smem.size() * sizeof(uint4));
      dynamic_smem = smem.data();
      block_idx = {bx, by, 0};
      or_pending = or_result = 0;
      for (std::size_t i = 0; i < n; ++i) {
        Fiber& f = fibers[i];
        f.idx = {static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x), 0};
        f.done = f.waiting = false;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &scheduler;
        makecontext(&f.ctx, fiber_entry, 0);
      }
      for (;;) {
        for (std::size_t i = 0; i < n; ++i) {
          if (fibers[i].done || fibers[i].waiting) continue;
          current = i;
          thread_idx = fibers[i].idx;
          swapcontext(&scheduler, &fibers[i].ctx);
        }
        std::size_t waiting = 0, done = 0;
        for (const auto& f : fibers) {
          waiting += f.waiting;
          done += f.done;
        }
        if (done == n) break;
        if (waiting != n)
          throw std::logic_error("emulated block: a barrier not reached by every thread");
        or_result = or_pending;
        or_pending = 0;
        for (auto& f : fibers) f.waiting = false;
      }
    }
}
#pragma GCC diagnostic pop

}  // namespace halfscope::emu
