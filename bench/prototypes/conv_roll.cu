// Standalone prototype of the rolling convolution kernel (src/conv/kernels/register_roll.cuh):
// FP16 storage, odd kernels of width 3-7, `same` mode, zero boundary. A block of T threads owns a
// strip of 8 T columns and BH output rows; input rows stream into a ring of D shared-memory rows
// through cp.async, P rows ahead of the one in use; each thread owns 8 columns. SEP: a rank-one
// kernel (row sums once per input row, kept in a register ring, then the column taps); else the
// direct KW x KW sum over the ring's rows. FLOAT: FP32 arithmetic (mixed), else packed FP16.
// Times each variant with CUDA events against cudaMemcpy of the same bytes and a 1 GiB copy (the
// ceiling), and checks 12 rows against an FP64 sum with a derived bound. Not built by CMake; on
// a GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/prototypes/conv_roll.cu -o conv_roll
//   ./conv_roll [N [BH ...]]   (N x N image, default 8192; BH > 0 rows per block, 0: one full
//                               wave at the occupancy limit, -k: k waves; default 128 0)
// docs/performance.md (2D convolution, 2026-11-23, the rolling kernel) tells what it found.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common.cuh"

struct Taps {
  float row[7], col[7], k[49];
  __half2 row2[7], col2[7], k2[49];
};

__device__ __forceinline__ void cpa16(void* dst, const void* src, int bytes) {
  unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <class T2>
__device__ __forceinline__ T2 bitc(unsigned w) {
  T2 t;
  memcpy(&t, &w, 4);
  return t;
}

// Loads input row y (block-local: image row y) into slot buffer s (zero boundary).
template <int T>
__device__ __forceinline__ void load_row(__half* s, const __half* img, long long H, long long W,
                                         long long y, long long colbase) {
  const bool rin = y >= 0 && y < H;
  for (int c = threadIdx.x; c < T + 2; c += T) {
    const long long x = colbase - 8 + 8 * c;
    const bool in = rin && x >= 0 && x + 8 <= W;
    const __half* src = in ? img + y * W + x : img;
    cpa16(s + 8 * c, src, in ? 16 : 0);
  }
}

// 12 words: pixels [-8, 16) relative to the thread's first output column.
__device__ __forceinline__ void read_window(const __half* s, unsigned (&w)[12]) {
  const uint4* p = reinterpret_cast<const uint4*>(s + 8 * threadIdx.x);
  uint4 a = p[0], b = p[1], c = p[2];
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
  w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  w[8] = c.x, w[9] = c.y, w[10] = c.z, w[11] = c.w;
}

// Row sums (half): rs[m] pairs of outputs 2m, 2m+1: sum_v r[v] x[j + R - v].
template <int KW>
__device__ __forceinline__ void rowsum_half(const unsigned (&w)[12], const __half2* r2,
                                            __half2 (&rs)[4]) {
  constexpr int R = KW / 2;
  __half2 even[12], odd[11];
#pragma unroll
  for (int m = 0; m < 12; ++m) even[m] = bitc<__half2>(w[m]);
#pragma unroll
  for (int m = 0; m < 11; ++m) odd[m] = bitc<__half2>(__byte_perm(w[m], w[m + 1], 0x5432));
  auto pair = [&](int s) { return (s & 1) ? odd[s >> 1] : even[s >> 1]; };
#pragma unroll
  for (int m = 0; m < 4; ++m) rs[m] = __hmul2(r2[KW - 1], pair(8 + 2 * m + R - (KW - 1)));
#pragma unroll
  for (int v = KW - 2; v >= 0; --v)
#pragma unroll
    for (int m = 0; m < 4; ++m) rs[m] = __hfma2(r2[v], pair(8 + 2 * m + R - v), rs[m]);
}

// The 24 FP16 pixels of a window as floats.
__device__ __forceinline__ void widen(const unsigned (&w)[12], float (&x)[24]) {
#pragma unroll
  for (int m = 0; m < 12; ++m) {
    const float2 f = __half22float2(bitc<__half2>(w[m]));
    x[2 * m] = f.x;
    x[2 * m + 1] = f.y;
  }
}

template <int KW>
__device__ __forceinline__ void rowsum_float(const unsigned (&w)[12], const float* r,
                                             float (&rs)[8]) {
  constexpr int R = KW / 2;
  float x[24];
  widen(w, x);
#pragma unroll
  for (int p = 0; p < 8; ++p) rs[p] = r[KW - 1] * x[8 + p + R - (KW - 1)];
#pragma unroll
  for (int v = KW - 2; v >= 0; --v)
#pragma unroll
    for (int p = 0; p < 8; ++p) rs[p] = fmaf(r[v], x[8 + p + R - v], rs[p]);
}

__device__ __forceinline__ void store8(__half* out, long long W, long long i, long long j,
                                       const __half2 (&v)[4]) {
  if (j + 8 <= W) {
    uint4 u;
    memcpy(&u, v, 16);
    *reinterpret_cast<uint4*>(out + i * W + j) = u;
  }
}

// SEP: rank-one; FLOAT: float arithmetic (mixed). P rows ahead, ring of D rows.
template <int KW, bool SEP, bool FLOAT, int P, int D, int T, int MINB>
__global__ void __launch_bounds__(T, MINB)
    roll_kernel(const __half* __restrict__ img, __half* __restrict__ out, long long H, long long W,
                int BH, const Taps taps) {
  constexpr int R = KW / 2;
  constexpr int ROWW = 8 * T + 16;
  static_assert(SEP ? D >= P + 1 : D >= P + 2 * R + 1, "ring");
  extern __shared__ __align__(16) __half sm[];
  const long long colbase = static_cast<long long>(blockIdx.x) * 8 * T;
  const long long i0 = static_cast<long long>(blockIdx.y) * BH;
  if (i0 >= H) return;
  const int ny = static_cast<int>(BH < H - i0 ? BH : H - i0) + 2 * R;
  const long long ybase = i0 - R;
  const long long j = colbase + 8 * threadIdx.x;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (k < ny) load_row<T>(sm + (k % D) * ROWW, img, H, W, ybase + k, colbase);
    commit();
  }
  using RS = std::conditional_t<FLOAT, float[8], __half2[4]>;
  RS ring[SEP ? KW : 1];
  for (int k0 = 0; k0 < ny; k0 += KW) {
#pragma unroll
    for (int s = 0; s < KW; ++s) {
      const int k = k0 + s;
      if (k >= ny) break;
      wait_group<P - 1>();
      __syncthreads();
      if (k + P < ny) load_row<T>(sm + ((k + P) % D) * ROWW, img, H, W, ybase + k + P, colbase);
      commit();
      if constexpr (SEP) {
        unsigned w[12];
        read_window(sm + (k % D) * ROWW, w);
        if constexpr (FLOAT)
          rowsum_float<KW>(w, taps.row, ring[s]);
        else
          rowsum_half<KW>(w, taps.row2, ring[s]);
        if (k >= 2 * R) {
          __half2 o[4];
          if constexpr (FLOAT) {
            float acc[8];
#pragma unroll
            for (int p = 0; p < 8; ++p) acc[p] = taps.col[2 * R] * ring[(s - 2 * R + KW) % KW][p];
#pragma unroll
            for (int u = 2 * R - 1; u >= 0; --u)
#pragma unroll
              for (int p = 0; p < 8; ++p)
                acc[p] = fmaf(taps.col[u], ring[(s - u + KW) % KW][p], acc[p]);
#pragma unroll
            for (int m = 0; m < 4; ++m) o[m] = __floats2half2_rn(acc[2 * m], acc[2 * m + 1]);
          } else {
#pragma unroll
            for (int m = 0; m < 4; ++m)
              o[m] = __hmul2(taps.col2[2 * R], ring[(s - 2 * R + KW) % KW][m]);
#pragma unroll
            for (int u = 2 * R - 1; u >= 0; --u)
#pragma unroll
              for (int m = 0; m < 4; ++m)
                o[m] = __hfma2(taps.col2[u], ring[(s - u + KW) % KW][m], o[m]);
          }
          if (j < W) store8(out, W, i0 + k - 2 * R, j, o);
        }
      } else {
        if (k >= 2 * R) {
          __half2 o[4];
          if constexpr (FLOAT) {
            float acc[8] = {};
#pragma unroll
            for (int u = 2 * R; u >= 0; --u) {
              unsigned w[12];
              read_window(sm + ((k - u) % D) * ROWW, w);
              float x[24];
              widen(w, x);
#pragma unroll
              for (int v = KW - 1; v >= 0; --v)
#pragma unroll
                for (int p = 0; p < 8; ++p)
                  acc[p] = fmaf(taps.k[u * KW + v], x[8 + p + R - v], acc[p]);
            }
#pragma unroll
            for (int m = 0; m < 4; ++m) o[m] = __floats2half2_rn(acc[2 * m], acc[2 * m + 1]);
          } else {
#pragma unroll
            for (int m = 0; m < 4; ++m) o[m] = __half2half2(__ushort_as_half(0));
#pragma unroll
            for (int u = 2 * R; u >= 0; --u) {
              unsigned w[12];
              read_window(sm + ((k - u) % D) * ROWW, w);
              __half2 even[12], odd[11];
#pragma unroll
              for (int m = 0; m < 12; ++m) even[m] = bitc<__half2>(w[m]);
#pragma unroll
              for (int m = 0; m < 11; ++m)
                odd[m] = bitc<__half2>(__byte_perm(w[m], w[m + 1], 0x5432));
              auto pair = [&](int q) { return (q & 1) ? odd[q >> 1] : even[q >> 1]; };
#pragma unroll
              for (int v = KW - 1; v >= 0; --v)
#pragma unroll
                for (int m = 0; m < 4; ++m)
                  o[m] = __hfma2(taps.k2[u * KW + v], pair(8 + 2 * m + R - v), o[m]);
            }
          }
          if (j < W) store8(out, W, i0 + k - 2 * R, j, o);
        }
      }
    }
  }
}

// Reference (double) for row i, all columns, true convolution 'same', zero boundary.
double ref_pixel(const std::vector<float>& x, long long H, long long W, const Taps& t, int KW,
                 long long i, long long jj) {
  const int R = KW / 2;
  double s = 0;
  for (int u = 0; u < KW; ++u)
    for (int v = 0; v < KW; ++v) {
      long long y = i + R - u, xx = jj + R - v;
      if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
      s += double(t.k[u * KW + v]) * x[y * W + xx];
    }
  return s;
}

template <int KW, bool SEP, bool FLOAT, int P, int D, int T = 128, int MINB = 1>
void run_case(const __half* din, __half* dout, long long H, long long W, const Taps& taps, int BH,
              const std::vector<float>& hx, double copy_ms, const char* label) {
  auto* kern = &roll_kernel<KW, SEP, FLOAT, P, D, T, MINB>;
  const int smem = D * (8 * T + 16) * 2;
  const KernelFit fit = fit_kernel(kern, T, smem);
  if (BH <= 0) {  // one full wave
    const long long strips = (W + 8 * T - 1) / (8 * T);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const long long total = 1LL * prop.multiProcessorCount * fit.per_sm * (BH == 0 ? 1 : -BH);
    BH = static_cast<int>((H * strips + total - 1) / total);
  }
  dim3 grid((W + 8 * T - 1) / (8 * T), (H + BH - 1) / BH);
  const std::vector<float> ms =
      times_ms([&] { kern<<<grid, T, smem>>>(din, dout, H, W, BH, taps); }, 20, 3);
  const double med = ms[ms.size() / 2];
  // check rows: first 4, a middle one, last 4, and block edges
  std::vector<__half> row(W);
  double maxrel = 0;
  double bound_ratio = 0;
  const long long rows[] = {0, 1, 2, 3, BH - 1, BH, BH + 1, H / 2, H - 4, H - 3, H - 2, H - 1};
  for (long long i : rows) {
    CK(cudaMemcpy(row.data(), dout + i * W, W * 2, cudaMemcpyDeviceToHost));
    for (long long jj = 0; jj < W; jj += (jj < 16 || jj > W - 16) ? 1 : 7) {
      const double r = ref_pixel(hx, H, W, taps, KW, i, jj);
      double absum = 0;
      for (int u = 0; u < KW; ++u)
        for (int v = 0; v < KW; ++v) {
          long long y = i + KW / 2 - u, xx = jj + KW / 2 - v;
          if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
          absum += std::abs(double(taps.k[u * KW + v]) * hx[y * W + xx]);
        }
      const double g = __half2float(row[jj]);
      const double uc = FLOAT ? 6e-8 : 4.9e-4;
      const double bound = (2 * KW + 4) * uc * absum + 2 * 4.9e-4 * std::abs(r) + 1e-7;
      bound_ratio = std::max(bound_ratio, std::abs(g - r) / bound);
      maxrel = std::max(maxrel, std::abs(g - r) / (absum + 1e-30));
    }
  }
  const double bytes = 2.0 * H * W * 2;
  printf(
      "%5lld %-6s KW=%d T=%d P=%d D=%2d MINB=%d regs=%3d occ=%2d BH=%4d: %.4f ms  %.0f GB/s  "
      "%.1f%% of same-size copy  err/bound %.3f  %s\n",
      H, label, KW, T, P, D, MINB, fit.attr.numRegs, fit.per_sm, BH, med, bytes / med / 1e6,
      100 * copy_ms / med, bound_ratio, bound_ratio <= 1 ? "ok" : "FAIL");
}

int main(int argc, char** argv) {
  const long long H = argc > 1 ? atoll(argv[1]) : 8192, W = H;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::vector<float> hx(H * W);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> U(-1, 1);
  std::vector<__half> hh(H * W);
  for (long long i = 0; i < H * W; ++i) {
    hh[i] = __float2half(U(gen));
    hx[i] = __half2float(hh[i]);
  }
  __half *din, *dout;
  CK(cudaMalloc(&din, H * W * 2));
  CK(cudaMalloc(&dout, H * W * 2));
  CK(cudaMemcpy(din, hh.data(), H * W * 2, cudaMemcpyHostToDevice));
  // Copy ceilings: same bytes, and 1 GiB.
  auto time_copy = [&](void* d, const void* s, size_t n) {
    const std::vector<float> ms =
        times_ms([&] { CK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice)); }, 20, 3);
    return double(ms[ms.size() / 2]);
  };
  const double copy_ms = time_copy(dout, din, H * W * 2);
  void *g1, *g2;
  CK(cudaMalloc(&g1, 1ull << 30));
  CK(cudaMalloc(&g2, 1ull << 30));
  CK(cudaMemset(g1, 0, 1ull << 30));
  const double gib_ms = time_copy(g2, g1, 1ull << 30);
  printf("copy of %lld MB: %.4f ms (%.0f GB/s); 1 GiB copy %.0f GB/s (ceiling)\n", H * W * 2 >> 20,
         copy_ms, 4.0 * H * W / copy_ms / 1e6, 2.0 * (1ull << 30) / gib_ms / 1e6);
  CK(cudaFree(g1));
  CK(cudaFree(g2));
  const double ceiling_ms_equiv = 4.0 * H * W / (2.0 * (1ull << 30) / gib_ms);  // ms at ceiling
  printf("same bytes at the 1 GiB ceiling: %.4f ms; 70%% of it: %.4f ms\n", ceiling_ms_equiv,
         ceiling_ms_equiv / 0.7);

  Taps taps{};
  auto make = [&](int KW) {
    Taps t{};
    double sg = KW / 6.0;
    double sum = 0;
    std::vector<double> g(KW);
    for (int v = 0; v < KW; ++v) {
      double d = (v - (KW - 1) / 2.0) / std::max(sg, 0.5);
      g[v] = std::exp(-d * d / 2);
      sum += g[v];
    }
    for (int v = 0; v < KW; ++v) {
      t.row[v] = float(g[v] / sum);
      t.col[v] = float(g[v] / sum);
      t.row2[v] = __float2half2_rn(t.row[v]);
      t.col2[v] = __float2half2_rn(t.col[v]);
    }
    for (int u = 0; u < KW; ++u)
      for (int v = 0; v < KW; ++v) {
        // the kernel the rank-one arithmetic represents: products of the half taps for half
        t.k[u * KW + v] = t.row[v] * t.col[u];
        t.k2[u * KW + v] = __float2half2_rn(t.k[u * KW + v]);
      }
    return t;
  };
  std::vector<int> bands;
  for (int a = 2; a < argc; ++a) bands.push_back(atoi(argv[a]));
  if (bands.empty()) bands = {128, 0};
  for (int BH : bands) {
    taps = make(3);
    run_case<3, true, false, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<3, true, true, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-m");
    run_case<3, false, false, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "dir-h");
    taps = make(5);
    run_case<5, true, false, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<5, true, false, 3, 4>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<5, true, false, 6, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<5, true, false, 4, 8, 256>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<5, true, true, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-m");
    run_case<5, false, false, 4, 16>(din, dout, H, W, taps, BH, hx, copy_ms, "dir-h");
    taps = make(7);
    run_case<7, true, false, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<7, true, false, 3, 4>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<7, true, false, 6, 8, 128, 6>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-h");
    run_case<7, true, true, 4, 8>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-m");
    run_case<7, true, true, 4, 8, 128, 4>(din, dout, H, W, taps, BH, hx, copy_ms, "sep-m");
    run_case<7, false, false, 4, 16>(din, dout, H, W, taps, BH, hx, copy_ms, "dir-h");
    run_case<7, false, true, 4, 16>(din, dout, H, W, taps, BH, hx, copy_ms, "dir-m");
  }
  printf("done\n");
  return 0;
}
