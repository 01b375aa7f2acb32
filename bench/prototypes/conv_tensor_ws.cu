// Standalone prototype: the tensor method's `split` convolution (src/conv/kernels/tensor_block.hpp)
// with warp specialization, to see whether overlapping the row splitting with the MMAs is what
// stands between widths 15-21 and issue #3's 2x over the FP32 register method
// (docs/conv-tensor.md, "Where the split kernel's time goes").
//
// Fixed case: a KW x KW Gaussian kernel (KW odd, <= 33), `same`, zero boundary (the image is
// padded on the host, so no bounds checks), 128 x 32 output tiles, the library's fragment
// layouts, scales, chains and table; only the chained path (rows of a warp sharing one
// exponent, as uniform data do; other data are reported as invalid). A persistent block walks
// down tile columns: its 4 consumer warps only run MMAs and the epilogue, its PROD producer warps
// load (float4, kBatch rows' loads in flight at once), scale and split input rows into a ring of
// 4 slots of 32 rows, up to 2 slots ahead. Named barriers: FULL[s] (producers arrive, consumers
// wait), EMPTY[s] (consumers arrive, producers wait). Variants: kPrefetch (next kernel row's A
// fragments during this row's MMAs), kOrder (MMAs in three passes), and two limits that give
// wrong results: no fills after the first 4 slots, no MMAs. Checks every (N/48)-th row against an
// FP64 sum; times CUDA events, median of 20. Not built by CMake; on a GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 [-DKW=21] bench/prototypes/conv_tensor_ws.cu -o ws
//   ./ws [N]   (N x N output, N a multiple of 128; default 4096)
// docs/conv-tensor.md ("A warp-specialized prototype") has what it found.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common.cuh"

#ifndef KW
#define KW 15  // kernel width and height (odd, <= 33): -DKW=21
#endif
constexpr int Q = (KW + 30) / 16, W = 16 * Q - 15, C0 = KW / 2;
constexpr int PT = KW - 1 - C0, PL = W - 1 - C0;  // zero rows on top, columns on the left
constexpr int BC = 128, BR = 32, WC = 4, WR = 2, CONS = 4;
constexpr int WIDTH = BC + 16 * (Q - 1), PITCH = WIDTH + 8;  // halves; 19 x 16 bytes
constexpr int SLOTS = 4, RING = 32 * SLOTS, STEPS = WC + Q - 1;
constexpr int EP = BC + 4;
// hi and lo planes, each ring row's exponent code, the epilogue tile.
constexpr int SMEM_EXP = 2 * RING * PITCH * 2, SMEM_EP = SMEM_EXP + RING * 4;
constexpr int SMEM = SMEM_EP + BR * EP * 4;
constexpr std::uint32_t kAny = 0, kBias = 1024;
static_assert(KW - 1 + BR <= 64, "a tile's rows fit two slots");

struct Frag {
  std::uint32_t r[4];
};

__device__ __forceinline__ std::uint32_t finite_abs(float x) {
  const std::uint32_t a = __float_as_uint(x) & 0x7fffffffu;
  return a < 0x7f800000u ? a : 0u;
}
__device__ __forceinline__ void bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void ldsm4(const __half* p, std::uint32_t (&r)[4]) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm2(const __half* p, std::uint32_t& r0, std::uint32_t& r1) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(a));
}
__device__ __forceinline__ void mma(float (&d)[4], const Frag& a, std::uint32_t b0,
                                    std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b0), "r"(b1));
}

struct Params {
  const float* img;         // padded: tile (tr, tc) reads rows [32 tr, +64), cols [128 tc, + WIDTH)
  float* out;               // n x n
  const Frag *thi, *tlo;    // [u][q][lane]
  unsigned int* unchained;  // warps that would have needed the per-row flush
  int n, wp, tiles_y, tiles, ek;
};

template <int PROD>
struct Ws {
  static constexpr int kThreads = 32 * (CONS + PROD), kBarCount = 128 + 32 * PROD;
  static __device__ int full(int s) { return 1 + s; }
  static __device__ int empty(int s) { return 5 + s; }
};

// Producer: splits padded rows [32 j, 32 j + 32) of tile column tc into ring slot s.
template <int PROD, int kBatch>
__device__ void fill(const Params& p, unsigned char* sm, int pw, int lane, int j, int tc, int s) {
  __half* hi = reinterpret_cast<__half*>(sm);
  __half* lo = hi + RING * PITCH;
  // Only the exponent codes: the chained path undoes the scales with one factor per group.
  std::uint32_t* re = reinterpret_cast<std::uint32_t*>(sm + SMEM_EXP);
  // Rows in batches of kBatch: all their loads first, so one global latency covers the batch.
  static_assert((32 / PROD) % kBatch == 0);
  for (int r0 = pw; r0 < 32; r0 += PROD * kBatch) {
    float4 a[kBatch], b[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const float* row = p.img + static_cast<std::int64_t>(32 * j + r0 + PROD * i) * p.wp + BC * tc;
      a[i] = __ldg(reinterpret_cast<const float4*>(row) + lane);
      b[i] = make_float4(0, 0, 0, 0);
      if (lane < (WIDTH - BC) / 4) b[i] = __ldg(reinterpret_cast<const float4*>(row + BC) + lane);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int rr = r0 + PROD * i;
      std::uint32_t m = max(max(finite_abs(a[i].x), finite_abs(a[i].y)),
                            max(finite_abs(a[i].z), finite_abs(a[i].w)));
      m = max(m, max(max(finite_abs(b[i].x), finite_abs(b[i].y)),
                     max(finite_abs(b[i].z), finite_abs(b[i].w))));
      m = __reduce_max_sync(0xffffffffu, m);
      const int e = split_exponent(m);
      const float sc = pow2(e);
      const int slot = 32 * s + rr;
      const auto split4 = [&](float4 v, int col) {
        const float x0 = v.x * sc, x1 = v.y * sc, x2 = v.z * sc, x3 = v.w * sc;
        const std::uint32_t h01 = pack(x0, x1), h23 = pack(x2, x3);
        const __half2 f01 = *reinterpret_cast<const __half2*>(&h01);
        const __half2 f23 = *reinterpret_cast<const __half2*>(&h23);
        const std::uint32_t l01 =
            pack((x0 - __low2float(f01)) * 2048.0f, (x1 - __high2float(f01)) * 2048.0f);
        const std::uint32_t l23 =
            pack((x2 - __low2float(f23)) * 2048.0f, (x3 - __high2float(f23)) * 2048.0f);
        *reinterpret_cast<uint2*>(hi + slot * PITCH + col) = make_uint2(h01, h23);
        *reinterpret_cast<uint2*>(lo + slot * PITCH + col) = make_uint2(l01, l23);
      };
      split4(a[i], 4 * lane);
      if (lane < (WIDTH - BC) / 4) split4(b[i], BC + 4 * lane);
      if (lane == 0) re[slot] = m == 0 ? kAny : static_cast<std::uint32_t>(e + kBias);
    }
  }
}

// kPrefetch: the next kernel row's A fragments load during this row's MMAs. kOrder: every input
// slice of an 8-row fragment first, then the hi*hi, hi*lo, lo*hi MMAs in three passes.
// kSkip (limits, wrong results): 1 = producers fill each slot only once, 2 = consumers skip
// the MMAs.
template <int PROD, int kBatch, bool kPrefetch, bool kOrder, int kSkip = 0>
__global__ void __launch_bounds__(Ws<PROD>::kThreads, 2) conv_ws(const Params p) {
  extern __shared__ __align__(16) unsigned char sm[];
  using S = Ws<PROD>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int begin = static_cast<int>(static_cast<std::int64_t>(blockIdx.x) * p.tiles / gridDim.x);
  const int end = static_cast<int>(static_cast<std::int64_t>(blockIdx.x + 1) * p.tiles / gridDim.x);
  int total = 0;  // slots this block fills: 2 for a tile opening a column run, else 1
  for (int t = begin; t < end; ++t) total += (t == begin || t % p.tiles_y == 0) ? 2 : 1;

  if (warp >= CONS) {  // producer
    int k = 0;
    for (int t = begin; t < end; ++t) {
      const int tr = t % p.tiles_y, tc = t / p.tiles_y;
      const bool first = t == begin || tr == 0;
      for (int j = first ? tr : tr + 1; j <= tr + 1; ++j, ++k) {
        if (k >= SLOTS) bar_sync(S::empty(k % SLOTS), S::kBarCount);
        if (kSkip != 1 || k < SLOTS) fill<PROD, kBatch>(p, sm, warp - CONS, lane, j, tc, k % SLOTS);
        bar_arrive(S::full(k % SLOTS), S::kBarCount);
      }
    }
    return;
  }

  const __half* hi = reinterpret_cast<const __half*>(sm);
  const __half* lo = hi + RING * PITCH;
  const std::uint32_t* re = reinterpret_cast<const std::uint32_t*>(sm + SMEM_EXP);
  float* ep = reinterpret_cast<float*>(sm + SMEM_EP);
  const int wcol0 = (warp & 1) * 64, wrow0 = (warp >> 1) * 16, g = lane >> 2, tq = lane & 3;
  int k = 0;
  for (int t = begin; t < end; ++t) {
    const int tr = t % p.tiles_y, tc = t / p.tiles_y;
    const bool first = t == begin || tr == 0;
    const int c0 = first ? k : k - 1;
    if (first) bar_sync(S::full(c0 % SLOTS), S::kBarCount);
    bar_sync(S::full((c0 + 1) % SLOTS), S::kBarCount);
    k = c0 + 2;
    const int ring0 = 32 * (c0 % SLOTS);
    float acc[WC][WR][4] = {};
    for (int ua = 0; ua < KW; ua += 16) {
      const int ub = ua + 16 < KW ? ua + 16 : KW;
      // Chain when the rows this warp reads for kernel rows [ua, ub) share one exponent.
      const int first = wrow0 + KW - ub, count = 8 * WR + (ub - ua) - 1;
      const std::uint32_t code = lane < count ? re[(ring0 + first + lane) & (RING - 1)] : kAny;
      std::uint32_t common = __reduce_max_sync(0xffffffffu, code);
      const bool mixed_exp =
          __reduce_max_sync(0xffffffffu, code != kAny && code != common ? 1u : 0u) != 0;
      const int tsum =
          (common == kAny ? 0 : static_cast<int>(common) - static_cast<int>(kBias)) + p.ek;
      // The prototype has only the chained path (the library falls back to a per-row flush): a
      // warp whose rows do not share an exponent is counted, and the run reported as invalid.
      if ((mixed_exp || tsum < -127 || tsum > 126 - 11) && lane == 0) atomicAdd(p.unchained, 1u);
      const float s = pow2(-tsum);
      float tcs[WR][WC][4] = {};
      Frag nh[Q], nl[Q];
      const auto load_row = [&](int u, Frag(&h)[Q], Frag(&l)[Q]) {
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          const uint4 x = __ldg(reinterpret_cast<const uint4*>(p.thi + (u * Q + q) * 32 + lane));
          const uint4 y = __ldg(reinterpret_cast<const uint4*>(p.tlo + (u * Q + q) * 32 + lane));
          h[q] = Frag{{x.x, x.y, x.z, x.w}};
          l[q] = Frag{{y.x, y.y, y.z, y.w}};
        }
      };
      if (kPrefetch) load_row(ua, nh, nl);
      for (int u = ua; u < (kSkip == 2 ? ua : ub); ++u) {
        Frag ah[Q], al[Q];
        if (kPrefetch) {
#pragma unroll
          for (int q = 0; q < Q; ++q) ah[q] = nh[q], al[q] = nl[q];
          if (u + 1 < ub) load_row(u + 1, nh, nl);
        } else {
          load_row(u, ah, al);
        }
#pragma unroll
        for (int rf = 0; rf < WR; ++rf) {
          const int rbase = ring0 + wrow0 + rf * 8 + KW - 1 - u;
          const int off = ((rbase + (lane & 7)) & (RING - 1)) * PITCH + wcol0 + 8 * (lane >> 3);
          float th[WC][4] = {};
          float(&tcr)[WC][4] = tcs[rf];
          if (kOrder) {
            std::uint32_t bh[STEPS + 1][2], bl[STEPS + 1][2];
#pragma unroll
            for (int sp = 0; sp < STEPS; sp += 2) {
              if (sp + 1 < STEPS) {
                std::uint32_t x[4], y[4];
                ldsm4(hi + off + 16 * sp, x);
                ldsm4(lo + off + 16 * sp, y);
                bh[sp][0] = x[0], bh[sp][1] = x[1], bh[sp + 1][0] = x[2], bh[sp + 1][1] = x[3];
                bl[sp][0] = y[0], bl[sp][1] = y[1], bl[sp + 1][0] = y[2], bl[sp + 1][1] = y[3];
              } else {
                ldsm2(hi + off + 16 * sp, bh[sp][0], bh[sp][1]);
                ldsm2(lo + off + 16 * sp, bl[sp][0], bl[sp][1]);
              }
            }
#pragma unroll
            for (int q = 0; q < Q; ++q)
#pragma unroll
              for (int cf = 0; cf < WC; ++cf) mma(th[cf], ah[q], bh[cf + q][0], bh[cf + q][1]);
#pragma unroll
            for (int q = 0; q < Q; ++q)
#pragma unroll
              for (int cf = 0; cf < WC; ++cf) mma(tcr[cf], ah[q], bl[cf + q][0], bl[cf + q][1]);
#pragma unroll
            for (int q = 0; q < Q; ++q)
#pragma unroll
              for (int cf = 0; cf < WC; ++cf) mma(tcr[cf], al[q], bh[cf + q][0], bh[cf + q][1]);
          } else
#pragma unroll
            for (int sp = 0; sp < STEPS; sp += 2) {
              std::uint32_t bh[4] = {0, 0, 0, 0}, bl[4] = {0, 0, 0, 0};
              if (sp + 1 < STEPS) {
                ldsm4(hi + off + 16 * sp, bh);
                ldsm4(lo + off + 16 * sp, bl);
              } else {
                ldsm2(hi + off + 16 * sp, bh[0], bh[1]);
                ldsm2(lo + off + 16 * sp, bl[0], bl[1]);
              }
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int step = sp + h;
                if (step >= STEPS) continue;
#pragma unroll
                for (int q = 0; q < Q; ++q) {
                  const int cf = step - q;
                  if (cf < 0 || cf >= WC) continue;
                  mma(th[cf], ah[q], bh[2 * h], bh[2 * h + 1]);
                  mma(tcr[cf], ah[q], bl[2 * h], bl[2 * h + 1]);
                  mma(tcr[cf], al[q], bh[2 * h], bh[2 * h + 1]);
                }
              }
            }
#pragma unroll
          for (int cf = 0; cf < WC; ++cf)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[cf][rf][e] = fmaf(th[cf][e], s, acc[cf][rf][e]);
        }
      }
      const float sc = s * 0x1p-11f;
#pragma unroll
      for (int rf = 0; rf < WR; ++rf)
#pragma unroll
        for (int cf = 0; cf < WC; ++cf)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[cf][rf][e] = fmaf(tcs[rf][cf][e], sc, acc[cf][rf][e]);
    }
    // Release the slots no later tile reads, then the epilogue (consumers only: barrier 9).
    const bool last_in_run = t + 1 == end || (t + 1) % p.tiles_y == 0;
    if (c0 + SLOTS < total) bar_arrive(S::empty(c0 % SLOTS), S::kBarCount);
    if (last_in_run && c0 + 1 + SLOTS < total) bar_arrive(S::empty((c0 + 1) % SLOTS), S::kBarCount);
    bar_sync(9, 128);
#pragma unroll
    for (int cf = 0; cf < WC; ++cf)
#pragma unroll
      for (int rf = 0; rf < WR; ++rf)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ep[(wrow0 + rf * 8 + 2 * tq + (e & 1)) * EP + wcol0 + cf * 16 + g + 8 * (e >> 1)] =
              acc[cf][rf][e];
    bar_sync(9, 128);
#pragma unroll
    for (int it = 0; it < BR * BC / 4 / 128; ++it) {
      const int i = threadIdx.x + 128 * it, row = i / (BC / 4), col = 4 * (i % (BC / 4));
      const float4 v = *reinterpret_cast<const float4*>(ep + row * EP + col);
      *reinterpret_cast<float4*>(p.out + static_cast<std::int64_t>(BR * tr + row) * p.n + BC * tc +
                                 col) = v;
    }
  }
}

static float half_bits_to_float(std::uint16_t h) {
  __half x;
  memcpy(&x, &h, 2);
  return __half2float(x);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  if (n % BC != 0) {
    printf("N must be a multiple of %d\n", BC);
    return 2;
  }
  // Padded image: PT zero rows on top, PL zero columns on the left (so tile column tc reads
  // columns [128 tc, + WIDTH) and tile row tr rows [32 tr, +64)).
  const int wp = n + WIDTH - BC + 4, hp = n + 64;
  std::vector<float> img(static_cast<std::size_t>(n) * n),
      pad(static_cast<std::size_t>(hp) * wp, 0.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  for (auto& x : img) x = uni(rng);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x)
      pad[static_cast<std::size_t>(y + PT) * wp + x + PL] =
          img[static_cast<std::size_t>(y) * n + x];
  std::vector<float> ker(KW * KW);
  double sum = 0;
  for (int u = 0; u < KW; ++u)
    for (int v = 0; v < KW; ++v) {
      const double r2 = (u - C0) * (u - C0) + (v - C0) * (v - C0);
      ker[u * KW + v] = static_cast<float>(std::exp(-r2 / (2 * 2.5 * 2.5)));
      sum += ker[u * KW + v];
    }
  for (auto& k : ker) k = static_cast<float>(k / sum);
  // Table (tensor_table_kernel): one scale for the kernel, hi / lo (x 2^11) in fragment order.
  std::uint32_t kmax = 0;
  for (float k : ker) {
    std::uint32_t b;
    memcpy(&b, &k, 4);
    kmax = std::max(kmax, b & 0x7fffffffu);
  }
  const int ek = split_exponent(kmax);
  std::vector<Frag> thi(KW * Q * 32), tlo(KW * Q * 32);
  for (int u = 0; u < KW; ++u)
    for (int q = 0; q < Q; ++q)
      for (int lane = 0; lane < 32; ++lane) {
        Frag h{}, l{};
        for (int j = 0; j < 8; ++j) {
          const int g = lane >> 2, t = lane & 3, reg = j >> 1;
          const int m = g + 8 * (reg & 1), kk = 2 * t + (j & 1) + 8 * (reg >> 1);
          const int v = (16 * Q - 15) - 1 + m - kk - 16 * q;
          std::uint16_t hb = 0, lb = 0;
          if (v >= 0 && v < KW) {
            const float x = ker[u * KW + v] * pow2(ek);
            const __half xh = __float2half_rn(x);
            memcpy(&hb, &xh, 2);
            const __half xl = __float2half_rn((x - half_bits_to_float(hb)) * 2048.0f);
            memcpy(&lb, &xl, 2);
          }
          h.r[reg] |= static_cast<std::uint32_t>(hb) << (16 * (j & 1));
          l.r[reg] |= static_cast<std::uint32_t>(lb) << (16 * (j & 1));
        }
        thi[(u * Q + q) * 32 + lane] = h;
        tlo[(u * Q + q) * 32 + lane] = l;
      }
  float *d_pad, *d_out;
  Frag *d_hi, *d_lo;
  CK(cudaMalloc(&d_pad, pad.size() * 4));
  CK(cudaMalloc(&d_out, static_cast<std::size_t>(n) * n * 4));
  CK(cudaMalloc(&d_hi, thi.size() * sizeof(Frag)));
  CK(cudaMalloc(&d_lo, tlo.size() * sizeof(Frag)));
  CK(cudaMemcpy(d_pad, pad.data(), pad.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_hi, thi.data(), thi.size() * sizeof(Frag), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_lo, tlo.data(), tlo.size() * sizeof(Frag), cudaMemcpyHostToDevice));
  unsigned int* d_unchained;
  CK(cudaMalloc(&d_unchained, 4));
  CK(cudaMemset(d_unchained, 0, 4));
  Params p{d_pad, d_out, d_hi, d_lo, d_unchained, n, wp, n / BR, (n / BR) * (n / BC), ek};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d x %d, width %d, split, tiles %d\n", prop.name, n, n, KW, p.tiles);

  const auto run = [&](auto kernel, int threads, const char* name) {
    const int per_sm = fit_kernel(kernel, threads, SMEM).per_sm;
    const int grid = std::min(p.tiles, per_sm * prop.multiProcessorCount);
    CK(cudaMemset(d_out, 0xff, static_cast<std::size_t>(n) * n * 4));
    kernel<<<grid, threads, SMEM>>>(p);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> out(static_cast<std::size_t>(n) * n);
    CK(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
    double mre = 0, maxrel = 0;
    long cnt = 0, bad = 0;
    for (int i = 0; i < n; i += std::max(1, n / 48))
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int u = 0; u < KW; ++u)
          for (int v = 0; v < KW; ++v) {
            const int y = i + C0 - u, x = j + C0 - v;
            if (y >= 0 && y < n && x >= 0 && x < n)
              ref +=
                  static_cast<double>(ker[u * KW + v]) * img[static_cast<std::size_t>(y) * n + x];
          }
        const double got = out[static_cast<std::size_t>(i) * n + j];
        const double rel = std::fabs(got - ref) / std::max(std::fabs(ref), 1e-30);
        if (!(rel < 1e-5)) ++bad;
        mre += rel;
        maxrel = std::max(maxrel, rel);
        ++cnt;
      }
    const std::vector<float> ms = times_ms([&] { kernel<<<grid, threads, SMEM>>>(p); }, 20, 3);
    unsigned int unchained = 0;
    CK(cudaMemcpy(&unchained, d_unchained, 4, cudaMemcpyDeviceToHost));
    printf(
        "%-18s grid %4d (%d per SM)  median %.4f ms  min %.4f  MRE %.2e  max rel %.2e  bad %ld of "
        "%ld%s\n",
        name, grid, per_sm, ms[ms.size() / 2], ms[0], mre / cnt, maxrel, bad, cnt,
        unchained ? "  INVALID: warps without a common exponent" : "");
  };
  run(conv_ws<1, 16, true, false>, Ws<1>::kThreads, "prod 1 x16 pf");
  run(conv_ws<2, 16, false, false>, Ws<2>::kThreads, "prod 2 x16");
  run(conv_ws<2, 16, true, false>, Ws<2>::kThreads, "prod 2 x16 pf");
  run(conv_ws<2, 16, false, true>, Ws<2>::kThreads, "prod 2 x16 ord");
  run(conv_ws<2, 16, true, false, 1>, Ws<2>::kThreads, "  no fills");
  run(conv_ws<2, 16, true, false, 2>, Ws<2>::kThreads, "  no MMAs");
  return 0;
}
