// Shared by the standalone prototypes in this folder: the CUDA error check and the split
// precision's power-of-two scales (the library's versions live in src/conv/kernels).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// Exponent e such that 2^e times a value whose bits are `bits` lies in [2^14, 2^15).
__host__ __device__ inline int split_exponent(std::uint32_t bits) {
  const int e = 141 - static_cast<int>(bits >> 23);
  return e < -126 ? -126 : (e > 126 ? 126 : e);
}
__host__ __device__ inline float pow2(int e) {
  const std::uint32_t b = static_cast<std::uint32_t>(e + 127) << 23;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

// Two floats rounded to FP16 (RNE) in one 32-bit word, `lo` in the low half.
__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// A kernel opted into `smem` bytes of dynamic shared memory, with what decides its occupancy:
// resident blocks per SM at `threads` threads, and its registers and local memory (attr).
struct KernelFit {
  int per_sm;
  cudaFuncAttributes attr;
};
template <class Kernel>
KernelFit fit_kernel(Kernel kernel, int threads, int smem) {
  KernelFit f{};
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.per_sm, kernel, threads, smem));
  CK(cudaFuncGetAttributes(&f.attr, kernel));
  return f;
}

// Times `launch` with CUDA events: `warmups` untimed calls, then `repeats` samples; the sorted
// samples in ms.
template <class F>
std::vector<float> times_ms(F launch, int repeats, int warmups = 1) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int w = 0; w < warmups; ++w) launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < repeats; ++r) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t;
}
