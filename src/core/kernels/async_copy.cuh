// Device helpers: asynchronous global -> shared copies (cp.async, sm_80 and later), shared by the
// matched-filtering tensor kernels and the convolution's rolling kernel.
#pragma once

#include <cstdint>

namespace halfscope::kernels {

/// 4-byte asynchronous copy global -> shared; `bytes` 0 fills the destination with zero.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int bytes) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
/// 16-byte asynchronous copy global -> shared (both 16-byte aligned), through L2 only.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
/// cp_async16 that copies `bytes` (0 or 16) and fills the rest of the 16 with zero: `src` must
/// still be a valid, aligned address when `bytes` is 0.
__device__ __forceinline__ void cp_async16_fill(void* dst, const void* src, int bytes) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

}  // namespace halfscope::kernels
