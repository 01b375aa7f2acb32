// Device helpers for Hopper's asynchronous tensor-core path (sm_90a only): wgmma with both
// operands in shared memory, its descriptors, and the TMA bulk copies with the mbarriers they
// complete on. Only the network kernel (network_sm90a.cu) includes this: it is the one file
// compiled for sm_90a (src/CMakeLists.txt).
#pragma once

#include <cstdint>

#include "mfilter/kernels/tensor_operand.cuh"

namespace halfscope::mfilter::tensor::wg {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/// Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma (and
/// gives ptxas a definition before the first one, without which it serializes them: C7519).
template <int R>
__device__ __forceinline__ void touch(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// Shared-memory matrix descriptor without swizzle: core matrices of 8 rows x 16 bytes; lbo =
/// bytes between core matrices along K, sbo = bytes between 8-row groups along M or N.
__device__ __forceinline__ std::uint64_t descriptor(const void* smem, std::uint32_t lbo,
                                                    std::uint32_t sbo) {
  const std::uint32_t a = shared_address(smem);
  return static_cast<std::uint64_t>((a & 0x3ffff) >> 4) |
         (static_cast<std::uint64_t>((lbo & 0x3ffff) >> 4) << 16) |
         (static_cast<std::uint64_t>((sbo & 0x3ffff) >> 4) << 32);
}

// The m64n128k16 instruction with B MN-major for one operand type (f16 or bf16).
#define HS_WGMMA_M64N128K16_TB(TYPE)                                                               \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\n"                                                                         \
      "setp.ne.b32 p, %66, 0;\n"                                                                   \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                                 \
      " "                                                                                          \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])                                                                                \
      : "l"(a), "l"(b), "r"(accumulate))

/// d (64 x 128, FP32, the m64nNk16 accumulator layout) = or += A (64 x 16, K-major) x B (16 x 128,
/// MN-major: imm-trans-b = 1), FP16 operands (Mixed) or BF16 (BF16); `accumulate` 0 overwrites.
template <Operand O>
__device__ __forceinline__ void mma_m64n128k16_tb(float (&d)[64], std::uint64_t a, std::uint64_t b,
                                                  int accumulate) {
  static_assert(O != Operand::Split, "split takes three products of its parts");
  if constexpr (O == Operand::BF16)
    HS_WGMMA_M64N128K16_TB("bf16");
  else
    HS_WGMMA_M64N128K16_TB("f16");
}
#undef HS_WGMMA_M64N128K16_TB

/// Arms mbarrier `bar` (count 1) for `bytes` more bytes of asynchronous copies (this thread's
/// arrival included).
__device__ __forceinline__ void expect_bytes(std::uint64_t* bar, int bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}
/// TMA bulk copy global -> shared of `bytes` (a multiple of 16; both addresses 16-byte aligned)
/// completing on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, int bytes,
                                          std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar))
      : "memory");
}
/// An mbarrier whose phases complete after `count` arrivals (and the bytes they expect).
__device__ __forceinline__ void barrier_init(std::uint64_t* bar, unsigned count = 1) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count));
}
/// One arrival on `bar` (release: this thread's earlier shared-memory writes are visible to the
/// threads its phase's completion lets go).
__device__ __forceinline__ void arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
/// Named barrier `id` (1..15) among `threads` threads (a multiple of 32) of the block.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Moves this warpgroup's registers per thread to N (a multiple of 8 in 24..256): producers give
/// theirs back so the consumer warpgroup can hold its accumulators.
template <int N>
__device__ __forceinline__ void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
/// Makes the barriers' initialization visible to the asynchronous (TMA) proxy.
__device__ __forceinline__ void barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void barrier_wait(std::uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra "
      "W;\n}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}
/// Orders this thread's generic-proxy shared-memory writes before later wgmma reads of them.
__device__ __forceinline__ void proxy_fence() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace halfscope::mfilter::tensor::wg
