// Device helpers shared by the FFT and GEMM convolution kernels: conversions between the storage
// types (double, float, __half, __nv_bfloat16) and the compute types, each rounding exactly once
// to nearest even; finiteness tests; vector packs for 16-byte accesses; the block-wide count of
// non-finite outputs that turns an FP16 overflow into a NumericalError instead of a silent inf.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace halfscope::conv::kernels::storage {

/// V consecutive elements moved as one aligned access (16 bytes, or 32 as two 16-byte halves).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// Loads / stores a 16- or 32-byte pack through uint4 words. Copying a Pack of a type with a
/// user-provided copy (__half2) directly makes nvcc split it into 4-byte accesses; the bytes moved
/// through uint4 (memcpy is only a register rename) always give LDG.E.128 / STG.E.128.
template <class P>
__device__ inline P load_pack(const P* p) {
  static_assert(sizeof(P) % 16 == 0 && alignof(P) >= 16);
  uint4 raw[sizeof(P) / 16];
#pragma unroll
  for (unsigned k = 0; k < sizeof(P) / 16; ++k) raw[k] = reinterpret_cast<const uint4*>(p)[k];
  P out;
  memcpy(&out, raw, sizeof(P));
  return out;
}
template <class P>
__device__ inline void store_pack(P* p, const P& value) {
  static_assert(sizeof(P) % 16 == 0 && alignof(P) >= 16);
  uint4 raw[sizeof(P) / 16];
  memcpy(raw, &value, sizeof(P));
#pragma unroll
  for (unsigned k = 0; k < sizeof(P) / 16; ++k) reinterpret_cast<uint4*>(p)[k] = raw[k];
}

/// Storage -> compute and compute -> storage conversions. Widening is exact; narrowing rounds to
/// nearest even once (an FP16 result beyond 65504 becomes inf, which count_nonfinite catches).
template <class To, class From>
__device__ inline To convert(From x);
template <>
__device__ inline double convert<double, double>(double x) {
  return x;
}
template <>
__device__ inline float convert<float, float>(float x) {
  return x;
}
template <>
__device__ inline float convert<float, __half>(__half x) {
  return __half2float(x);
}
template <>
__device__ inline float convert<float, __nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ inline __half convert<__half, float>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 convert<__nv_bfloat16, float>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half convert<__half, __half>(__half x) {
  return x;
}

__device__ inline bool is_finite(double x) {
  return isfinite(x);
}
__device__ inline bool is_finite(float x) {
  return isfinite(x);
}
__device__ inline bool is_finite(__half x) {
  return !__hisinf(x) && !__hisnan(x);
}
__device__ inline bool is_finite(__nv_bfloat16 x) {
  return isfinite(__bfloat162float(x));
}

/// Adds the warp's `bad` counts to *total with one atomic per warp that saw any. Every lane of
/// the warp must call it (it is called after the grid-stride loops, where all lanes converge).
__device__ inline void commit_nonfinite(unsigned int bad, unsigned long long* total) {
  const unsigned int warp_bad = __reduce_add_sync(0xffffffffu, bad);
  if ((threadIdx.x % 32u) == 0 && warp_bad != 0) atomicAdd(total, warp_bad);
}

}  // namespace halfscope::conv::kernels::storage
