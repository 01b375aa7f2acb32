// Standalone prototype of the streaming register kernel (src/conv/kernels/register_stream.cuh):
// 8 outputs x Q rows per thread, the whole window loaded as raw words before any use, FP32
// arithmetic (single, mixed) or packed FP16 (half), `same` mode, zero boundary, correlation
// orientation. Times each variant with CUDA events against cudaMemcpy and a copy kernel of the
// same bytes and checks 4000 outputs against an FP64 sum. Not built by CMake; on a GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/prototypes/conv_stream.cu -o conv_stream && ./conv_stream
// docs/performance.md (2D convolution, 2026-11-22) compares the library's kernel with it.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common.cuh"

__constant__ float ck[64];
__constant__ __half2 ckh[64];

// Window words per row: FP32 16 words = columns x-4 .. x+11; FP16 8 words = x-4 .. x+11.
template <class T>
struct Win {
  static constexpr int words = sizeof(T) == 4 ? 16 : 8;
};

template <class T>
__device__ inline void load_row(const T* row, unsigned (&w)[Win<T>::words]) {
  if constexpr (sizeof(T) == 4) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(row - 4));
    const uint4 b = __ldg(reinterpret_cast<const uint4*>(row));
    const uint4 c = __ldg(reinterpret_cast<const uint4*>(row + 4));
    const uint4 d = __ldg(reinterpret_cast<const uint4*>(row + 8));
    const unsigned t[16] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w,
                            c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
#pragma unroll
    for (int e = 0; e < 16; ++e) w[e] = t[e];
  } else {
    const uint2 a = __ldg(reinterpret_cast<const uint2*>(row - 4));
    const uint4 b = __ldg(reinterpret_cast<const uint4*>(row));
    const uint2 d = __ldg(reinterpret_cast<const uint2*>(row + 8));
    const unsigned t[8] = {a.x, a.y, b.x, b.y, b.z, b.w, d.x, d.y};
#pragma unroll
    for (int e = 0; e < 8; ++e) w[e] = t[e];
  }
}
template <class T>
__device__ inline void load_row_bounded(const T* in, long long yy, long long x, int H, int W,
                                        unsigned (&w)[Win<T>::words]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const long long xx = x - 4 + e;
      w[e] = (yy >= 0 && yy < H && xx >= 0 && xx < W) ? __float_as_uint(in[yy * W + xx]) : 0u;
    }
  } else {
    const unsigned short* p = reinterpret_cast<const unsigned short*>(in);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      unsigned lo = 0, hi = 0;
      const long long x0 = x - 4 + 2 * e;
      if (yy >= 0 && yy < H && x0 >= 0 && x0 < W) lo = p[yy * W + x0];
      if (yy >= 0 && yy < H && x0 + 1 >= 0 && x0 + 1 < W) hi = p[yy * W + x0 + 1];
      w[e] = lo | (hi << 16);
    }
  }
}

// Thread: 8 columns x Q rows. AH: half2 arithmetic (FP16 storage only).
template <class T, bool AH, int KW, int Q, int MINB>
__global__ void __launch_bounds__(128, MINB)
    s2_kernel(const T* __restrict__ in, T* __restrict__ out, int H, int W) {
  constexpr int R = KW / 2, NW = Win<T>::words, RW = Q + KW - 1;
  const long long x = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  const long long y0 = static_cast<long long>(blockIdx.y) * Q;
  if (x >= W) return;
  unsigned win[RW][NW];
  const bool inner = x >= 4 && x + 12 <= W && y0 >= R && y0 + Q + R <= H;
  if (inner) {
#pragma unroll
    for (int r = 0; r < RW; ++r) load_row<T>(in + (y0 - R + r) * W + x, win[r]);
  } else {
#pragma unroll
    for (int r = 0; r < RW; ++r) load_row_bounded<T>(in, y0 - R + r, x, H, W, win[r]);
  }
  if constexpr (!AH) {
    float acc[Q][8];
#pragma unroll
    for (int q = 0; q < Q; ++q)
#pragma unroll
      for (int p = 0; p < 8; ++p) acc[q][p] = 0.f;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      float f[16];
      if constexpr (sizeof(T) == 4) {
#pragma unroll
        for (int e = 0; e < 16; ++e) f[e] = __uint_as_float(win[r][e]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&win[r][e]));
          f[2 * e] = t.x;
          f[2 * e + 1] = t.y;
        }
      }
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int u = r - q;
        if (u < 0 || u >= KW) continue;
#pragma unroll
        for (int v = 0; v < KW; ++v)
#pragma unroll
          for (int p = 0; p < 8; ++p) acc[q][p] = fmaf(ck[u * KW + v], f[4 + p + v - R], acc[q][p]);
      }
    }
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      if (y0 + q >= H) break;
      T* o = out + (y0 + q) * W + x;
      if constexpr (sizeof(T) == 4) {
        reinterpret_cast<float4*>(o)[0] = make_float4(acc[q][0], acc[q][1], acc[q][2], acc[q][3]);
        reinterpret_cast<float4*>(o)[1] = make_float4(acc[q][4], acc[q][5], acc[q][6], acc[q][7]);
      } else {
        __half2 h[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) h[e] = __floats2half2_rn(acc[q][2 * e], acc[q][2 * e + 1]);
        *reinterpret_cast<uint4*>(o) = *reinterpret_cast<uint4*>(h);
      }
    }
  } else {
    __half2 acc[Q][4];
#pragma unroll
    for (int q = 0; q < Q; ++q)
#pragma unroll
      for (int m = 0; m < 4; ++m) acc[q][m] = __float2half2_rn(0.f);
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      __half2 ev[8], od[7];
#pragma unroll
      for (int e = 0; e < 8; ++e) ev[e] = *reinterpret_cast<const __half2*>(&win[r][e]);
#pragma unroll
      for (int e = 0; e < 7; ++e) {
        const unsigned t = __byte_perm(win[r][e], win[r][e + 1], 0x5432);
        od[e] = *reinterpret_cast<const __half2*>(&t);
      }
#pragma unroll
      for (int q = 0; q < Q; ++q) {
        const int u = r - q;
        if (u < 0 || u >= KW) continue;
#pragma unroll
        for (int v = 0; v < KW; ++v)
#pragma unroll
          for (int m = 0; m < 4; ++m) {
            const int s = 4 + 2 * m + v - R;
            acc[q][m] = __hfma2(ckh[u * KW + v], (s & 1) ? od[s >> 1] : ev[s >> 1], acc[q][m]);
          }
      }
    }
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      if (y0 + q >= H) break;
      *reinterpret_cast<uint4*>(out + (y0 + q) * W + x) = *reinterpret_cast<uint4*>(acc[q]);
    }
  }
}

template <class T>
__global__ void copy_kernel(const T* __restrict__ in, T* __restrict__ out, long long n) {
  const long long nv = n * sizeof(T) / 16;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nv;
       i += (long long)gridDim.x * blockDim.x)
    reinterpret_cast<uint4*>(out)[i] = __ldg(reinterpret_cast<const uint4*>(in) + i);
}

template <class F>
float timeit(F f, int reps = 30) {
  const std::vector<float> t = times_ms(f, reps, 3);
  return t[t.size() / 2];
}

template <class T>
double check(const std::vector<float>& img, const std::vector<float>& k, int KW, const T* dout,
             int H, int W) {
  std::vector<T> o((size_t)H * W);
  CK(cudaMemcpy(o.data(), dout, o.size() * sizeof(T), cudaMemcpyDeviceToHost));
  const int R = KW / 2;
  double maxerr = 0, maxref = 0;
  for (int s = 0; s < 4000; ++s) {
    int i = (s * 7919) % H, j = (s * 104729) % W;
    if (s < 8) {
      i = (s & 1) ? H - 1 : 0;
      j = (s & 2) ? W - 1 : (s & 4) ? 3 : 0;
    }
    double ref = 0;
    for (int u = 0; u < KW; ++u)
      for (int v = 0; v < KW; ++v) {
        int yy = i + u - R, xx = j + v - R;
        if (yy >= 0 && yy < H && xx >= 0 && xx < W)
          ref += (double)k[u * KW + v] * img[(size_t)yy * W + xx];
      }
    double got;
    if constexpr (sizeof(T) == 4)
      got = o[(size_t)i * W + j];
    else
      got = __half2float(o[(size_t)i * W + j]);
    maxerr = std::max(maxerr, std::fabs(got - ref));
    maxref = std::max(maxref, std::fabs(ref));
  }
  return maxerr / maxref;
}

template <class T, bool AH, int KW, int Q, int MINB>
void run(const std::vector<float>& img, const T* din, T* dout, int H, int W, double copy_ms,
         int tx = 128) {
  std::vector<float> k(KW * KW);
  double s = 0;
  for (int i = 0; i < KW * KW; ++i) {
    k[i] = 1.0f + 0.1f * i;
    s += k[i];
  }
  for (auto& v : k) v /= s;
  std::vector<__half2> kh(KW * KW);
  for (int i = 0; i < KW * KW; ++i) {
    kh[i] = __float2half2_rn(k[i]);
    k[i] = __half2float(__float2half(k[i]));
  }
  if (AH)
    CK(cudaMemcpyToSymbol(ckh, kh.data(), KW * KW * 4));
  else
    CK(cudaMemcpyToSymbol(ck, k.data(), KW * KW * 4));
  CK(cudaMemset(dout, 0, (size_t)H * W * sizeof(T)));
  dim3 grid((W / 8 + tx - 1) / tx, (H + Q - 1) / Q);
  float ms = timeit([&] { s2_kernel<T, AH, KW, Q, MINB><<<grid, tx>>>(din, dout, H, W); });
  double bytes = 2.0 * H * W * sizeof(T);
  printf("%-6s %5d KW%d Q%-2d B%d tx%-3d %8.1f us  %6.0f GB/s  %5.1f%% of copy  relerr %.1e\n",
         sizeof(T) == 4 ? "single"
         : AH           ? "half"
                        : "mixed",
         W, KW, Q, MINB, tx, ms * 1e3, bytes / ms / 1e6, 100 * copy_ms / ms,
         check(img, k, KW, dout, H, W));
}

template <class T>
void suite(int N) {
  const int H = N, W = N;
  const size_t n = (size_t)H * W;
  std::vector<float> img(n);
  for (size_t i = 0; i < n; ++i) img[i] = (float)((i * 2654435761u) % 1000) / 1000.f;
  std::vector<T> hi(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (sizeof(T) == 4)
      hi[i] = img[i];
    else {
      hi[i] = __float2half(img[i]);
      img[i] = __half2float(hi[i]);
    }
  }
  T *din, *dout;
  CK(cudaMalloc(&din, n * sizeof(T)));
  CK(cudaMalloc(&dout, n * sizeof(T)));
  CK(cudaMemcpy(din, hi.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float mc =
      timeit([&] { CK(cudaMemcpyAsync(dout, din, n * sizeof(T), cudaMemcpyDeviceToDevice)); });
  float kc = timeit([&] { copy_kernel<T><<<sms * 16, 256>>>(din, dout, n); });
  double copy = std::min(mc, kc);
  printf("== %s %dx%d: memcpy %.1f us (%.0f GB/s), copy kernel %.1f us (%.0f GB/s)\n",
         sizeof(T) == 4 ? "FP32" : "FP16", N, N, mc * 1e3, 2.0 * n * sizeof(T) / mc / 1e6, kc * 1e3,
         2.0 * n * sizeof(T) / kc / 1e6);
  if constexpr (sizeof(T) == 4) {
    run<T, false, 3, 4, 4>(img, din, dout, H, W, copy);
    run<T, false, 3, 4, 4>(img, din, dout, H, W, copy, 64);
    run<T, false, 3, 2, 6>(img, din, dout, H, W, copy);
    run<T, false, 5, 2, 4>(img, din, dout, H, W, copy);
    run<T, false, 5, 4, 3>(img, din, dout, H, W, copy);
    run<T, false, 7, 2, 3>(img, din, dout, H, W, copy);
    run<T, false, 7, 4, 2>(img, din, dout, H, W, copy);
  } else {
    run<T, false, 3, 4, 4>(img, din, dout, H, W, copy);
    run<T, false, 3, 8, 3>(img, din, dout, H, W, copy);
    run<T, true, 3, 4, 4>(img, din, dout, H, W, copy);
    run<T, true, 3, 8, 4>(img, din, dout, H, W, copy);
    run<T, false, 5, 4, 3>(img, din, dout, H, W, copy);
    run<T, false, 5, 8, 2>(img, din, dout, H, W, copy);
    run<T, true, 5, 4, 4>(img, din, dout, H, W, copy);
    run<T, true, 5, 8, 3>(img, din, dout, H, W, copy);
    run<T, false, 7, 4, 3>(img, din, dout, H, W, copy);
    run<T, false, 7, 8, 2>(img, din, dout, H, W, copy);
    run<T, true, 7, 4, 3>(img, din, dout, H, W, copy);
    run<T, true, 7, 8, 2>(img, din, dout, H, W, copy);
  }
  CK(cudaFree(din));
  CK(cudaFree(dout));
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s\n", p.name);
  suite<float>(4096);
  suite<__half>(4096);
  suite<float>(8192);
  suite<__half>(8192);
}
