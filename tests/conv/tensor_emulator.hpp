// A CPU emulation of the GPU's warp-level operations, so the tensor-core convolution's block code
// (src/conv/kernels/tensor_block.hpp, the very source the GPU compiles) runs and is checked on
// machines without a GPU. The 128 threads of a block are cooperative fibers (ucontext); a warp
// collective (ldmatrix, mma.sync, __reduce_max_sync) completes when its 32 lanes have arrived, and
// is computed from the PTX ISA's fragment layouts:
//   ldmatrix .m8n8 (.x2/.x4): lanes 8i..8i+7 give the row addresses of matrix i; lane L receives
//     elements 2 (L % 4) and 2 (L % 4) + 1 of row L / 4 of each matrix, in that matrix's register.
//   mma m16n8k16 .row.col: A a0..a7 at row g (+8 for a2, a3, a6, a7), column 2t + (i & 1) (+8 for
//     i >= 4); B b0..b3 at row 2t + (i & 1) (+8 for i >= 2), column g; C/D c0..c3 at row g (+8 for
//     c2, c3), column 2t + (i & 1); g = lane / 4, t = lane % 4.
// The MMA's FP32 accumulation follows the truncating model of Fasi et al. (truncating_sum), so the
// derived error bounds are exercised against it. Every collective checks that all 32 lanes
// call the same operation (divergence is a bug) and that ldmatrix rows are 16-byte aligned and
// inside shared memory. Shared memory starts filled with NaN bytes, so reading a slot that was
// never written shows in the output.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "conv/kernels/tensor_block.hpp"
#include "halfscope/core/half.hpp"

namespace halfscope::conv::testing {

using kernels::TensorFrag;
using kernels::TensorPrecision;

/// Runs one block's threads as fibers and implements the collectives among them.
class BlockEmulator {
 public:
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "tensor emulator: %s\n", what);
    std::abort();
  }
  static constexpr int kThreads = kernels::kTensorThreads;

  explicit BlockEmulator(std::size_t smem_bytes) : smem_(smem_bytes) {
    for (auto& s : stacks_) s.resize(kStackBytes);
  }
  BlockEmulator(const BlockEmulator&) = delete;
  BlockEmulator& operator=(const BlockEmulator&) = delete;

  /// Runs body(thread) for every thread of block `block` to completion.
  void run(std::int64_t block, std::function<void(int)> body) {
    block_ = block;
    body_ = std::move(body);
    std::memset(smem_.data(), 0xff, smem_.size());
    for (int t = 0; t < kThreads; ++t) {
      done_[t] = false;
      getcontext(&ctx_[t]);
      ctx_[t].uc_stack.ss_sp = stacks_[t].data();
      ctx_[t].uc_stack.ss_size = stacks_[t].size();
      ctx_[t].uc_link = nullptr;
      makecontext(&ctx_[t], &BlockEmulator::trampoline, 0);
    }
    current_ = 0;
    running() = this;
    swapcontext(&main_, &ctx_[0]);
    running() = nullptr;
  }

  [[nodiscard]] int thread() const { return current_; }
  [[nodiscard]] std::int64_t block() const { return block_; }
  unsigned char* shared() { return smem_.data(); }

  /// __syncthreads().
  void sync_block() {
    const unsigned gen = block_gen_;
    if (++block_arrived_ == kThreads) {
      block_arrived_ = 0;
      ++block_gen_;
      return;
    }
    while (block_gen_ == gen) yield();
  }

  /// __syncthreads_or(v).
  bool sync_block_or(bool v) {
    block_or_ = block_or_ || v;
    const unsigned gen = block_gen_;
    if (++block_arrived_ == kThreads) {
      block_or_result_ = block_or_;
      block_or_ = false;
      block_arrived_ = 0;
      ++block_gen_;
      return block_or_result_;
    }
    while (block_gen_ == gen) yield();
    return block_or_result_;
  }

  /// What one lane hands to a warp collective and what it gets back.
  struct Lane {
    const std::uint16_t* row = nullptr;
    std::uint32_t a[4] = {}, b[2] = {}, value = 0, result[4] = {};
    float c[4] = {}, d[4] = {};
  };
  enum class Op { None, Ldsm2, Ldsm4, MmaF16, MmaBf16, Max };

  /// Posts this lane's `in`, waits for the warp, returns the lane's result.
  Lane collective(Op op, const Lane& in) {
    Warp& w = warps_[current_ / 32];
    const int lane = current_ % 32;
    if (w.arrived == 0) w.op = op;
    if (w.op != op) fail("lanes of one warp called different collectives (divergence)");
    w.lanes[lane] = in;
    if (++w.arrived == 32) {
      compute(w);
      w.arrived = 0;
      ++w.gen;
    } else {
      const unsigned gen = w.gen;
      while (w.gen == gen) yield();
    }
    return w.lanes[lane];
  }

 private:
  static constexpr std::size_t kStackBytes = 64 * 1024;
  struct Warp {
    int arrived = 0;
    unsigned gen = 0;
    Op op = Op::None;
    std::array<Lane, 32> lanes;
  };

  static BlockEmulator*& running() {
    static BlockEmulator* e = nullptr;
    return e;
  }
  static void trampoline() {
    BlockEmulator* e = running();
    e->body_(e->current_);
    e->done_[e->current_] = true;
    e->yield();
  }
  /// Switches to the next unfinished thread; back to run() when all have finished.
  void yield() {
    int next = current_;
    for (int k = 0; k < kThreads; ++k) {
      next = (next + 1) % kThreads;
      if (!done_[next]) break;
    }
    if (done_[next]) {
      swapcontext(&ctx_[current_], &main_);
      return;
    }
    if (next == current_) fail("a thread waits on a collective no other thread can reach");
    const int prev = current_;
    current_ = next;
    swapcontext(&ctx_[prev], &ctx_[next]);
  }

  std::uint32_t row_word(const std::uint16_t* row, int pair) const {
    const auto* base = reinterpret_cast<const std::uint16_t*>(smem_.data());
    const std::ptrdiff_t off = row - base;
    if (off < 0 || (off + 8) * 2 > static_cast<std::ptrdiff_t>(smem_.size()) || off % 8 != 0)
      fail("ldmatrix row address outside shared memory or not 16-byte aligned");
    return static_cast<std::uint32_t>(row[2 * pair]) |
           (static_cast<std::uint32_t>(row[2 * pair + 1]) << 16);
  }

  /// The tensor core's FP32 accumulation as modelled by Fasi et al. (2021) for Volta..Hopper:
  /// every addend is aligned to the largest one and truncated to its 24-bit grid, the sum is
  /// normalised toward zero. (A pessimistic model: hardware may keep extra alignment bits.)
  static float truncating_sum(const double (&terms)[17]) {
    double plain = 0;  // inf and NaN propagate as IEEE says (0 * inf in a product is NaN)
    for (double x : terms) plain += x;
    if (!std::isfinite(plain)) return static_cast<float>(plain);
    int emax = INT_MIN;
    for (double x : terms)
      if (x != 0) emax = std::max(emax, std::ilogb(x));
    if (emax == INT_MIN) return 0.0f;
    const double ulp = std::ldexp(1.0, emax - 23);
    double s = 0;  // exact: 17 multiples of ulp below 2^(emax + 6)
    for (double x : terms) s += std::trunc(x / ulp) * ulp;
    float f = static_cast<float>(s);
    if (std::fabs(static_cast<double>(f)) > std::fabs(s)) f = std::nextafter(f, 0.0f);
    return f;
  }

  void compute(Warp& w) const {
    auto& L = w.lanes;
    switch (w.op) {
      case Op::Ldsm2:
      case Op::Ldsm4: {
        const int mats = w.op == Op::Ldsm4 ? 4 : 2;
        std::array<Lane, 32> out = L;
        for (int l = 0; l < 32; ++l)
          for (int i = 0; i < mats; ++i) out[l].result[i] = row_word(L[8 * i + l / 4].row, l % 4);
        L = out;
        break;
      }
      case Op::MmaF16:
      case Op::MmaBf16: {
        const bool bf = w.op == Op::MmaBf16;
        const auto val = [bf](std::uint32_t reg, int half) {
          const auto bits = static_cast<std::uint16_t>(half ? reg >> 16 : reg & 0xffffu);
          return static_cast<double>(bf ? bf16_bits_to_float(bits) : half_bits_to_float_soft(bits));
        };
        double A[16][16], B[16][8], C[16][8];
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          for (int i = 0; i < 8; ++i)
            A[g + ((i & 2) ? 8 : 0)][2 * t + (i & 1) + (i >= 4 ? 8 : 0)] =
                val(L[l].a[i / 2], i & 1);
          for (int i = 0; i < 4; ++i)
            B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = val(L[l].b[i / 2], i & 1);
          for (int i = 0; i < 4; ++i) C[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = L[l].c[i];
        }
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          for (int i = 0; i < 4; ++i) {
            const int m = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
            double terms[17];
            for (int k = 0; k < 16; ++k) terms[k] = A[m][k] * B[k][n];  // exact
            terms[16] = C[m][n];
            L[l].d[i] = truncating_sum(terms);
          }
        }
        break;
      }
      case Op::Max: {
        std::uint32_t m = 0;
        for (const Lane& x : L) m = x.value > m ? x.value : m;
        for (Lane& x : L) x.result[0] = m;
        break;
      }
      case Op::None:
        break;
    }
  }

  std::vector<unsigned char> smem_;
  std::array<std::vector<char>, kThreads> stacks_;
  std::array<ucontext_t, kThreads> ctx_{};
  std::array<bool, kThreads> done_{};
  ucontext_t main_{};
  std::function<void(int)> body_;
  std::int64_t block_ = 0;
  int current_ = 0;
  int block_arrived_ = 0;
  unsigned block_gen_ = 0;
  bool block_or_ = false, block_or_result_ = false;
  std::array<Warp, kThreads / 32> warps_{};
};

/// The `Ops` of TensorBlock on the emulator (one per thread).
struct EmulatedOps {
  BlockEmulator& emu;

  [[nodiscard]] int thread_index() const { return emu.thread(); }
  [[nodiscard]] std::int64_t block_index() const { return emu.block(); }
  [[nodiscard]] unsigned char* shared() const { return emu.shared(); }
  void sync_block() const { emu.sync_block(); }
  [[nodiscard]] bool sync_block_or(bool v) const { return emu.sync_block_or(v); }
  void atomic_add(unsigned int* p, unsigned int v) const { *p += v; }
  [[nodiscard]] std::uint32_t warp_max(std::uint32_t v) const {
    BlockEmulator::Lane in;
    in.value = v;
    return emu.collective(BlockEmulator::Op::Max, in).result[0];
  }
  void ldsm_x4(const std::uint16_t* p, std::uint32_t (&r)[4]) const {
    BlockEmulator::Lane in;
    in.row = p;
    const auto out = emu.collective(BlockEmulator::Op::Ldsm4, in);
    for (int i = 0; i < 4; ++i) r[i] = out.result[i];
  }
  void ldsm_x2(const std::uint16_t* p, std::uint32_t& r0, std::uint32_t& r1) const {
    BlockEmulator::Lane in;
    in.row = p;
    const auto out = emu.collective(BlockEmulator::Op::Ldsm2, in);
    r0 = out.result[0];
    r1 = out.result[1];
  }
  template <bool kBf16>
  void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) const {
    BlockEmulator::Lane in;
    for (int i = 0; i < 4; ++i) in.a[i] = a[i];
    in.b[0] = b0;
    in.b[1] = b1;
    for (int i = 0; i < 4; ++i) in.c[i] = d[i];
    const auto out =
        emu.collective(kBf16 ? BlockEmulator::Op::MmaBf16 : BlockEmulator::Op::MmaF16, in);
    for (int i = 0; i < 4; ++i) d[i] = out.d[i];
  }
  [[nodiscard]] TensorFrag load_frag(const TensorFrag* p) const { return *p; }
  [[nodiscard]] float load(const float* p) const { return *p; }
  [[nodiscard]] std::uint16_t load(const std::uint16_t* p) const { return *p; }
  [[nodiscard]] std::uint16_t to_half(float x) const { return float_to_half_bits_rne_soft(x); }
  [[nodiscard]] std::uint16_t to_bf16(float x) const { return float_to_bf16_bits_rne(x); }
  [[nodiscard]] float from_half(std::uint16_t b) const { return half_bits_to_float_soft(b); }
  [[nodiscard]] std::uint32_t pack_half2(float lo, float hi) const {
    return static_cast<std::uint32_t>(to_half(lo)) |
           (static_cast<std::uint32_t>(to_half(hi)) << 16);
  }
  template <class T>
  [[nodiscard]] bool aligned4(const T* p) const {
    return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(T)) == 0;
  }
  /// The GPU reads these four floats as one float4: the address must be 16-byte aligned.
  void load4(const float* p, float (&v)[4]) const {
    const auto offset = reinterpret_cast<const unsigned char*>(p) - emu.shared();
    if (offset % 16 != 0) BlockEmulator::fail("shared float4 read not 16-byte aligned");
    for (int j = 0; j < 4; ++j) v[j] = p[j];
  }
  template <class T>
  void store4(T* p, const T (&v)[4]) const {
    if (!aligned4(p)) BlockEmulator::fail("vector store not aligned");
    for (int j = 0; j < 4; ++j) p[j] = v[j];
  }
};

/// The host twin of tensor_table_kernel (tensor.cuh): same toeplitz_column and split_exponent,
/// half.hpp's conversions. `kernel` holds storage bits (f16 / bf16) or floats (split).
struct HostTable {
  std::vector<TensorFrag> hi, lo;
  std::vector<float> inv_scale;
  unsigned int kernel_nonfinite = 0;  // mixed / bf16: a tap is inf or NaN
};
template <TensorPrecision P, class K>
HostTable build_host_table(const K* kernel, int krows, int kcols, const kernels::TensorPlan& plan) {
  const std::int64_t n = static_cast<std::int64_t>(plan.nchunks) * krows * plan.nq * 32;
  HostTable t;
  t.hi.assign(static_cast<std::size_t>(n), TensorFrag{});
  t.lo = t.hi;
  t.inv_scale.assign(static_cast<std::size_t>(krows), 1.0f);
  for (int u = 0; u < krows; ++u) {
    float scale = 1.0f;
    if constexpr (P == TensorPrecision::Split) {
      std::uint32_t m = 0;  // over the whole kernel, as the device's table kernel
      for (std::int64_t v = 0; v < static_cast<std::int64_t>(krows) * kcols; ++v) {
        std::uint32_t b = 0;
        std::memcpy(&b, &kernel[v], 4);
        m = std::max(m, kernels::finite_abs_bits(b));
      }
      const int e = kernels::split_exponent(m);
      scale = kernels::pow2(e);
      t.inv_scale[static_cast<std::size_t>(u)] = kernels::pow2(-e);
    }
    for (int c = 0; c < plan.nchunks; ++c)
      for (int q = 0; q < plan.nq; ++q)
        for (int lane = 0; lane < 32; ++lane) {
          TensorFrag h{}, l{};
          for (int j = 0; j < 8; ++j) {
            const int v = kernels::toeplitz_column(lane, j, q, plan.nq, c * plan.chunk_width,
                                                   plan.chunk_width, kcols);
            std::uint32_t hb = 0, lb = 0;
            if (v >= 0) {
              const K k = kernel[static_cast<std::int64_t>(u) * kcols + v];
              if constexpr (P == TensorPrecision::Split) {
                const float x = static_cast<float>(k) * scale;
                hb = float_to_half_bits_rne_soft(x);
                lb = float_to_half_bits_rne_soft(
                    (x - half_bits_to_float_soft(static_cast<std::uint16_t>(hb))) * 2048.0f);
              } else {
                hb = static_cast<std::uint32_t>(k);
                const std::uint32_t exp = P == TensorPrecision::Mixed ? 0x7c00u : 0x7f80u;
                if ((hb & exp) == exp) t.kernel_nonfinite = 1;
              }
            }
            h.r[j >> 1] |= hb << (16 * (j & 1));
            l.r[j >> 1] |= lb << (16 * (j & 1));
          }
          const auto at =
              static_cast<std::size_t>(kernels::table_index(c, u, q, lane, krows, plan.nq));
          t.hi[at] = h;
          t.lo[at] = l;
        }
  }
  return t;
}

/// Runs every block of the convolution described by `p` (whose table pointers are filled here)
/// on the emulator, for Q = plan.nq. Returns the overflow count (mixed / bf16).
template <TensorPrecision P, int Q>
unsigned int emulate_tensor_conv_q(kernels::TensorParams p, const HostTable& table,
                                   std::int64_t blocks) {
  using Block = kernels::TensorBlock<P, Q, EmulatedOps>;
  unsigned int overflow = 0;
  p.table_hi = table.hi.data();
  p.table_lo = table.lo.data();
  p.kernel_inv_scale = table.inv_scale.data();
  p.overflow = &overflow;
  p.kernel_nonfinite = &table.kernel_nonfinite;
  BlockEmulator emu(kernels::TensorTile<P, Q>::kSmemBytes);
  for (std::int64_t b = 0; b < blocks; ++b)
    emu.run(b, [&](int) {
      EmulatedOps ops{emu};
      Block block(p, ops);
      block.run();
    });
  return overflow;
}

}  // namespace halfscope::conv::testing
