// Standalone prototype: what wgmma delivers on this GPU as a function of the instruction's N, with
// A from shared memory (SS) or from registers (RS), beside mma.sync m16n8k16, before a conv or
// matched-filter kernel is designed around one N (docs/conv-tensor.md, docs/mfilter-tensor.md).
// First checks one m64nNk16 product of each form against the CPU (descriptor layout: core
// matrices of 8 rows x 16 bytes, `lbo` along K, `sbo` along M / N; accumulator layout), then
// times chains of products into one accumulator per warpgroup, 1 block per SM with 1-4
// warpgroups, CUDA events, median of 5. On a GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/prototypes/wgmma_rate.cu -o wr
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common.cuh"
#include "wgmma.cuh"

// Byte offset of (row, k) in a K-major tile of 16 columns with lbo = rows * 16, sbo = 128.
__host__ __device__ inline int kmajor(int row, int k, int rows) {
  return (k / 8) * rows * 16 + row * 16 + (k % 8) * 2;
}

// One product D (64 x N) = A (64 x 16) B^T (B stored N x 16), both K-major in shared memory.
template <int N, bool RS>
__global__ void check_kernel(const __half* a, const __half* b, float* d) {
  __shared__ __align__(128) unsigned char sa[64 * 32], sb[256 * 32];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
  for (int i = t; i < 64 * 16; i += 128)
    *reinterpret_cast<__half*>(sa + kmajor(i / 16, i % 16, 64)) = a[i];
  for (int i = t; i < N * 16; i += 128)
    *reinterpret_cast<__half*>(sb + kmajor(i / 16, i % 16, N)) = b[i];
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float acc[N / 2];
  for (int i = 0; i < N / 2; ++i) acc[i] = -1.0f;  // overwritten: accumulate = 0
  const std::uint64_t db = wg::desc(sb, N * 16, 128);
  wg::fence();
  if constexpr (RS) {
    // mma.sync A layout of the warp's rows 16 warp + [0, 16): {(g, 2q), (g + 8, 2q), (g, 2q + 8),
    // (g + 8, 2q + 8)}, each two consecutive k.
    std::uint32_t f[4];
    const int r = 16 * warp + g;
    const int rr[4] = {r, r + 8, r, r + 8}, kk[4] = {2 * q, 2 * q, 2 * q + 8, 2 * q + 8};
    for (int i = 0; i < 4; ++i) {
      __half2 h = __halves2half2(a[rr[i] * 16 + kk[i]], a[rr[i] * 16 + kk[i] + 1]);
      f[i] = *reinterpret_cast<std::uint32_t*>(&h);
    }
    wg::rs<N>(acc, f, db, 0);
  } else {
    wg::ss<N>(acc, wg::desc(sa, 64 * 16, 128), db, 0);
  }
  wg::commit();
  wg::wait<0>();
  wg::touch(acc);
  // d[4 j + {0, 1}]: row 16 warp + g, cols 8 j + 2 q + {0, 1}; d[4 j + {2, 3}]: row + 8.
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e)
      d[(16 * warp + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2] = acc[4 * j + e];
}

template <int N, bool RS>
bool check() {
  std::vector<__half> a(64 * 16), b(N * 16);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) af[i] = static_cast<float>((i * 7 + 3) % 17) - 8.0f;
  for (size_t i = 0; i < b.size(); ++i) bf[i] = static_cast<float>((i * 5 + 1) % 13) - 6.0f;
  for (size_t i = 0; i < a.size(); ++i) a[i] = __float2half(af[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = __float2half(bf[i]);
  __half *da, *db;
  float* dd;
  CK(cudaMalloc(&da, a.size() * 2));
  CK(cudaMalloc(&db, b.size() * 2));
  CK(cudaMalloc(&dd, 64 * N * 4));
  CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  check_kernel<N, RS><<<1, 128>>>(da, db, dd);
  CK(cudaGetLastError());
  std::vector<float> d(64 * N);
  CK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0;
      for (int k = 0; k < 16; ++k) s += af[m * 16 + k] * bf[n * 16 + k];
      if (s != d[m * N + n]) ++bad;
    }
  printf("check %s n%-3d: %s (%d wrong of %d)\n", RS ? "RS" : "SS", N, bad ? "FAIL" : "ok", bad,
         64 * N);
  CK(cudaFree(da));
  CK(cudaFree(db));
  CK(cudaFree(dd));
  return bad == 0;
}

// Each warpgroup: `iters` groups of kChain products into its accumulator, at most one group in
// flight behind the newest (CUTLASS's mainloop habit). B slices rotate over 4 K-steps.
constexpr int kChain = 8;
template <int N, bool RS>
__global__ void rate_kernel(int iters, float* sink) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int wgi = threadIdx.x / 128;
  unsigned char* sa = sm + wgi * 4 * 64 * 32;  // 4 A slices per warpgroup
  unsigned char* sb = sm + 4 * 4 * 64 * 32;    // 4 B slices shared
  for (int i = threadIdx.x; i < (4 * 4 * 64 * 32 + 4 * N * 32) / 4; i += blockDim.x)
    reinterpret_cast<std::uint32_t*>(sm)[i] = 0x3c003c00u * ((i & 7) == 1);
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float acc[N / 2];
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  std::uint32_t f[4] = {0x3c003c00u, 0u, 0u, 0x3c00u};
  for (int it = 0; it < iters; ++it) {
    wg::fence();
#pragma unroll
    for (int c = 0; c < kChain; ++c) {
      const std::uint64_t db = wg::desc(sb + (c % 4) * N * 32, N * 16, 128);
      if constexpr (RS)
        wg::rs<N>(acc, f, db, 1);
      else
        wg::ss<N>(acc, wg::desc(sa + (c % 4) * 64 * 32, 64 * 16, 128), db, 1);
    }
    wg::commit();
    wg::wait<1>();
  }
  wg::wait<0>();
  wg::touch(acc);
  float s = 0;
  for (int i = 0; i < N / 2; ++i) s += acc[i];
  if (s == 12345.0f) sink[threadIdx.x] = s;
}

// mma.sync m16n8k16 with 8 independent accumulators per warp.
__global__ void mma_sync_kernel(int iters, float* sink) {
  float d[8][4] = {};
  const std::uint32_t a0 = 0x3c003c00u + threadIdx.x, b0 = 0x3c00u;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, "
          "{%5,%5}, {%0,%1,%2,%3};\n"
          : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
          : "r"(a0), "r"(b0));
  }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  if (s == 12345.0f) sink[threadIdx.x] = s;
}

template <class F>
float median_ms(F launch) {
  const std::vector<float> t = times_ms(launch, 5);
  return t[t.size() / 2];
}

int sms;
float* sink;

template <int N, bool RS>
void rate() {
  printf("%s n%-3d", RS ? "RS" : "SS", N);
  const int smem = 4 * 4 * 64 * 32 + 4 * N * 32;
  CK(cudaFuncSetAttribute(rate_kernel<N, RS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int wgs = 1; wgs <= 4; ++wgs) {
    int blocks = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, rate_kernel<N, RS>, 128 * wgs, smem));
    if (blocks < 1) {
      printf("  %d WG: n/a   ", wgs);
      continue;
    }
    const int iters = std::max(64, 40000 / N);
    const float ms = median_ms([&] { rate_kernel<N, RS><<<sms, 128 * wgs, smem>>>(iters, sink); });
    const double flop = 2.0 * 64 * N * 16 * kChain * double(iters) * wgs * sms;
    printf("  %d WG: %6.1f TF", wgs, flop / ms / 1e9);
  }
  printf("\n");
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  sms = p.multiProcessorCount;
  printf("%s, %d SMs\n", p.name, sms);
  CK(cudaMalloc(&sink, 4096 * 4));
  bool ok = check<8, false>() & check<16, false>() & check<64, false>() & check<256, false>() &
            check<8, true>() & check<16, true>() & check<64, true>() & check<256, true>();
  for (int w = 1; w <= 4; w *= 2) {
    const int iters = 20000;
    const float ms = median_ms([&] { mma_sync_kernel<<<sms * 4, 128 * w>>>(iters, sink); });
    const double flop = 2.0 * 16 * 8 * 16 * 8 * double(iters) * 4 * w * 4 * sms;
    printf("mma.sync m16n8k16, %2d warps/SM: %6.1f TF\n", 16 * w, flop / ms / 1e9);
  }
  rate<8, false>();
  rate<16, false>();
  rate<32, false>();
  rate<64, false>();
  rate<128, false>();
  rate<256, false>();
  rate<8, true>();
  rate<16, true>();
  rate<32, true>();
  rate<64, true>();
  rate<128, true>();
  rate<256, true>();
  return ok ? 0 : 1;
}
