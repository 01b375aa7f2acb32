// Standalone prototype: the matched filter's network stack (issue #4, case (b)) on wgmma with both
// operands in shared memory and the stack in registers across channels (docs/mfilter-tensor.md).
//
// Formulation. A block owns 64 templates (wgmma M) x NW output times (wgmma N) and walks every
// channel c, adding w * CC into its registers; the stack goes to memory once. Per channel:
//   D(j, n) = sum_k' A'(j, k') S_c(t0 + base_c + n + k'),   A'(j, k') = T_jc(k' - d_jc)
// with d_jc = moveout(j, c) - base_c, base_c the group's smallest moveout on c: each template is
// shifted inside a longer K' = roundup16(K + spread), so all 64 rows share one window start per
// column and D(j, n) is the numerator of CC at window start t0 + n + moveout(j, c). MMA work grows
// by K' / K (1.44 for the benchmark's moveouts of 0..100 at K = 256), the cost the library's
// kernel pays as a narrower output tile.
// B (K' x NW, the Hankel matrix of the data) is MN-major: core matrix C[m] (8 K-rows x 8
// N-elements) holds S[8m + kr + i], and block (k-group b, n-group a) is C[a + b], so both
// descriptor strides are one core matrix (128 bytes): 16 bytes of shared memory per sample, no
// register fragments, one descriptor add per k-step. A is K-major, prepared once on the host.
// Epilogue: acc(j, n) += D(j, n) * f_jc * inv|S|(t0 + n + moveout(j, c)), f_jc = w_jc 2^-(e_j +
// e_c) / |T_jc| (e_j the template's power-of-two scale, e_c the data tile's), clamped to |w_jc|.
// Channel c + 1's operands arrive by TMA bulk copies (one thread, one mbarrier per buffer) while
// channel c computes; two blocks per SM overlap one block's epilogue with the other's products.
// -DNOEPI (diagnostic, wrong results) leaves out the epilogue's gathers and factors.
//
// Mixed precision (FP16 operands, FP32 accumulation), short normalization, step 1, every window
// inside the data. Checks sampled times x every template against FP64, CUDA events, median of 5.
// On a GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/prototypes/mf_network.cu \
//        -o mfn && ./mfn [samples]
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
#include "wgmma.cuh"

#ifndef NW
#define NW 128  // output times per block (wgmma N)
#endif
#ifndef PEEL
#define PEEL 1  // the first k-step's product (accumulate 0) outside the loop
#endif
#ifndef CLAMP
#define CLAMP 1  // w CC clamped to |w| as the library does
#endif
#ifndef MINB
#define MINB 2
#endif
constexpr int MT = 64;                       // templates per block (wgmma M)
constexpr int K = 256;                       // template length
constexpr int KPMAX = 368;                   // longest shifted template (spread <= 112)
constexpr int NCM = KPMAX / 8 + NW / 8 - 1;  // core matrices of B
constexpr int SPAN = NW + KPMAX;             // data samples per tile
constexpr int ISPAN = NW + (KPMAX - K);      // inverse norms per tile
constexpr int A_BYTES = MT * KPMAX * 2;
constexpr int SM_A = 0, SM_B = SM_A + 2 * A_BYTES, SM_X = SM_B + NCM * 128;
constexpr int XS = SPAN + 4, IS = ISPAN + 4;  // staged from the 16-byte boundary before them
constexpr int SM_I = SM_X + 2 * XS * 4, SM_F = SM_I + 2 * IS * 4;
constexpr int SM_M = SM_F + 2 * MT * 8, SM_R = SM_M + 2 * MT * 4, SM_BAR = SM_R + 16;
constexpr int SMEM = SM_BAR + 16;
static_assert(SPAN % 4 == 0 && ISPAN % 4 == 0, "16-byte pieces");

struct Params {
  const float* x;     // C x L data
  const float* inv;   // C x L inverse window norms (0 for flat windows)
  const __half* a;    // (group, channel): KPMAX x 64 FP16 in K-major core-matrix order
  const float2* f;    // (group, channel, 64): w 2^-e_j / |T| and |w|
  const int* dj;      // (group, channel, 64) shifts moveout - base
  const int* base;    // (group, channel) smallest moveout
  const int* ksteps;  // (group, channel) K' / 16
  float* out;         // T x lout
  int c, l, lout;
};

__device__ __forceinline__ std::uint32_t saddr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bulk(void* dst, const void* src, int bytes, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(saddr(dst)),
      "l"(src), "r"(bytes), "r"(saddr(bar))
      : "memory");
}
__device__ __forceinline__ void bar_wait(std::uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra "
      "W;\n}\n" ::"r"(saddr(bar)),
      "r"(parity)
      : "memory");
}

// Index of the first sample (and inverse norm) of channel c's span for this block and group g.
__device__ __forceinline__ std::int64_t span_at(const Params& p, int g, int c, int t0) {
  return static_cast<std::int64_t>(c) * p.l + t0 + p.base[g * p.c + c];
}

// Channel c's operands for this block into buffer b: TMA bulk copies by one thread, completing
// on the buffer's mbarrier; the data and inverse norms start stage_offset() floats in.
__device__ __forceinline__ void stage(const Params& p, unsigned char* sm, int g, int c, int b,
                                      int t0) {
  if (threadIdx.x != 0) return;
  const int gc = g * p.c + c, ks = p.ksteps[gc];
  auto* bar = reinterpret_cast<std::uint64_t*>(sm + SM_BAR) + b;
  const float* x = p.x + span_at(p, g, c, t0);
  const float* iv = p.inv + span_at(p, g, c, t0);
  const auto* x16 =
      reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(x) & ~std::uintptr_t{15});
  const auto* i16 =
      reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(iv) & ~std::uintptr_t{15});
  const int bytes = ks * 2048 + XS * 4 + IS * 4 + 3 * MT * 4;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(saddr(bar)),
               "r"(bytes)
               : "memory");
  bulk(sm + SM_A + b * A_BYTES,
       reinterpret_cast<const unsigned char*>(p.a) + static_cast<std::int64_t>(gc) * A_BYTES,
       ks * 2048, bar);
  bulk(sm + SM_X + b * XS * 4, x16, XS * 4, bar);
  bulk(sm + SM_I + b * IS * 4, i16, IS * 4, bar);
  bulk(sm + SM_F + b * MT * 8, p.f + static_cast<std::int64_t>(gc) * MT, MT * 8, bar);
  bulk(sm + SM_M + b * MT * 4, p.dj + static_cast<std::int64_t>(gc) * MT, MT * 4, bar);
}
__device__ __forceinline__ int stage_offset(const Params& p, int g, int c, int t0) {
  const float* x = p.x + span_at(p, g, c, t0);
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(x) & 15) / 4);
}

__global__ void __launch_bounds__(128, MINB) mf_network(const Params p) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int t0 = blockIdx.x * NW, grp = blockIdx.y;
  float acc[NW / 2], d[NW / 2];
#pragma unroll
  for (int i = 0; i < NW / 2; ++i) acc[i] = 0.0f, d[i] = 0.0f;
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(
          saddr(reinterpret_cast<std::uint64_t*>(sm + SM_BAR) + i)));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  stage(p, sm, grp, 0, 0, t0);
  const std::uint64_t db0 = wg::desc(sm + SM_B, 128, 128);
  for (int c = 0; c < p.c; ++c) {
    const int b = c & 1;
    __syncthreads();  // channel c - 1's epilogue is done with buffer b ^ 1
    if (c + 1 < p.c) stage(p, sm, grp, c + 1, b ^ 1, t0);
    bar_wait(reinterpret_cast<std::uint64_t*>(sm + SM_BAR) + b, (c >> 1) & 1);
    // x and inv share their offset from the 16-byte boundary (same channel row and index).
    const int off = stage_offset(p, grp, c, t0);
    // The data tile's power-of-two scale.
    const float* xs = reinterpret_cast<const float*>(sm + SM_X) + b * XS + off;
    std::uint32_t m = 0;
    for (int i = threadIdx.x; i < SPAN; i += 128) m = max(m, __float_as_uint(xs[i]) & 0x7fffffffu);
    m = __reduce_max_sync(0xffffffffu, m);
    auto* red = reinterpret_cast<std::uint32_t*>(sm + SM_R);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = max(max(red[0], red[1]), max(red[2], red[3]));
    const int e = split_exponent(m);
    const float sc = pow2(e);
    // B: core matrix row (cm, kr) = S[8 cm + kr + i], i < 8, 16 bytes.
    for (int r = threadIdx.x; r < NCM * 8; r += 128) {
      const float* s = xs + r;  // 8 cm + kr == r
      uint4 v;
      v.x = pack(s[0] * sc, s[1] * sc), v.y = pack(s[2] * sc, s[3] * sc);
      v.z = pack(s[4] * sc, s[5] * sc), v.w = pack(s[6] * sc, s[7] * sc);
      *reinterpret_cast<uint4*>(sm + SM_B + 16 * r) = v;
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int ks = p.ksteps[grp * p.c + c];
    const std::uint64_t da0 = wg::desc(sm + SM_A + b * A_BYTES, 1024, 128);
    wg::touch(d);
    wg::fence();
    if constexpr (PEEL) wg::ss_tb<NW>(d, da0, db0, 0);
    for (int s = PEEL; s < ks; ++s) {
      // k-step s: A slice at 2048 s bytes, B's core matrices from C[2 s].
      wg::ss_tb<NW>(d, da0 + (2048 * s >> 4), db0 + (256 * s >> 4), PEEL ? 1 : s > 0);
    }
    wg::commit();
    wg::wait<0>();
    wg::touch(d);
    const float pe = pow2(-e);
    const int* ms = reinterpret_cast<const int*>(sm + SM_M) + b * MT;
    const float2* fs = reinterpret_cast<const float2*>(sm + SM_F) + b * MT;
    const int j0 = 16 * warp + g;
    const float2 fw0 = fs[j0], fw1 = fs[j0 + 8];
    const float f0 = fw0.x * pe, f1 = fw1.x * pe;
    // This thread's rows read inverse norms from window start n + shift (n = 8 t + 2 q).
    const float* iv = reinterpret_cast<const float*>(sm + SM_I) + b * IS + off + 2 * q;
    const float *s0 = iv + ms[j0], *s1 = iv + ms[j0 + 8];
#ifdef NOEPI  // diagnostic: no gathers (wrong results; what the epilogue costs)
#pragma unroll
    for (int i = 0; i < NW / 2; ++i) acc[i] += d[i];
    continue;
#endif
    // acc += w CC clamped to |w| (CC in [-1, 1] up to the FP16 operands' rounding).
    const auto add = [](float& a, float v, float wa) { a += CLAMP ? fminf(fmaxf(v, -wa), wa) : v; };
#pragma unroll
    for (int t = 0; t < NW / 8; ++t) {
      // Scalar loads: an aligned pair from a second, shifted copy of the tile was no faster.
      const float2 v0 = make_float2(s0[8 * t], s0[8 * t + 1]);
      const float2 v1 = make_float2(s1[8 * t], s1[8 * t + 1]);
      add(acc[4 * t + 0], d[4 * t + 0] * f0 * v0.x, fw0.y);
      add(acc[4 * t + 1], d[4 * t + 1] * f0 * v0.y, fw0.y);
      add(acc[4 * t + 2], d[4 * t + 2] * f1 * v1.x, fw1.y);
      add(acc[4 * t + 3], d[4 * t + 3] * f1 * v1.y, fw1.y);
    }
  }
  const int j0 = grp * MT + 16 * warp + g;
  float* o0 = p.out + static_cast<std::int64_t>(j0) * p.lout + t0 + 2 * q;
  float* o1 = o0 + 8 * static_cast<std::int64_t>(p.lout);
#pragma unroll
  for (int t = 0; t < NW / 8; ++t) {
    *reinterpret_cast<float2*>(o0 + 8 * t) = make_float2(acc[4 * t], acc[4 * t + 1]);
    *reinterpret_cast<float2*>(o1 + 8 * t) = make_float2(acc[4 * t + 2], acc[4 * t + 3]);
  }
}

int main(int argc, char** argv) {
  const int lout = argc > 1 ? atoi(argv[1]) : 432000, T = 1000, TP = 1024, C = 30;
  const int l = lout + KPMAX + NW + 16, groups = TP / MT;
  if (lout % NW != 0) {
    printf("samples must be a multiple of %d\n", NW);
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f), wdist(0.5f, 1.0f);
  std::uniform_int_distribution<int> mvdist(0, 100);
  std::vector<float> x(static_cast<size_t>(C) * l), tm(static_cast<size_t>(T) * C * K), w(T * C);
  std::vector<int> mv(T * C);
  for (auto& v : x) v = uni(rng);
  for (auto& v : tm) v = uni(rng);
  for (int i = 0; i < T * C; ++i) w[i] = wdist(rng), mv[i] = mvdist(rng);
  // Inverse window norms from FP64 prefix sums (enough for data of +-1; the library computes them
  // on the device with drift-bounded running sums). The check below recomputes every window.
  std::vector<float> inv(static_cast<size_t>(C) * l, 0.0f);
  for (int c = 0; c < C; ++c) {
    const float* xc = &x[static_cast<size_t>(c) * l];
    std::vector<double> pre(l + 1, 0.0);
    for (int i = 0; i < l; ++i) pre[i + 1] = pre[i] + static_cast<double>(xc[i]) * xc[i];
    for (int s = 0; s + K <= l; ++s) {
      const double e2 = pre[s + K] - pre[s];
      inv[static_cast<size_t>(c) * l + s] = e2 > 0 ? static_cast<float>(1.0 / std::sqrt(e2)) : 0.0f;
    }
  }
  // Operands per (group, channel).
  std::vector<__half> a(static_cast<size_t>(groups) * C * MT * KPMAX, __float2half(0.0f));
  std::vector<float2> f(static_cast<size_t>(groups) * C * MT, make_float2(0.0f, 0.0f));
  std::vector<int> dj(static_cast<size_t>(groups) * C * MT, 0), base(groups * C),
      ksteps(groups * C);
  double flop_done = 0;
  for (int gi = 0; gi < groups; ++gi)
    for (int c = 0; c < C; ++c) {
      const int gc = gi * C + c;
      int lo = 1 << 30, hi = 0;
      for (int j = gi * MT; j < std::min(T, (gi + 1) * MT); ++j)
        lo = std::min(lo, mv[j * C + c]), hi = std::max(hi, mv[j * C + c]);
      if (lo > hi) lo = hi = 0;
      base[gc] = lo;
      ksteps[gc] = (K + hi - lo + 15) / 16;
      flop_done += 2.0 * MT * NW * 16 * ksteps[gc];
      for (int r = 0; r < MT; ++r) {
        const int j = gi * MT + r;
        if (j >= T) continue;
        const float* tj = &tm[(static_cast<size_t>(j) * C + c) * K];
        double e2 = 0;
        float mx = 0;
        for (int k = 0; k < K; ++k)
          e2 += static_cast<double>(tj[k]) * tj[k], mx = std::max(mx, std::fabs(tj[k]));
        std::uint32_t mb;
        memcpy(&mb, &mx, 4);
        const int ej = split_exponent(mb);
        const int sh = mv[j * C + c] - lo;
        dj[static_cast<size_t>(gc) * MT + r] = sh;
        f[static_cast<size_t>(gc) * MT + r] =
            make_float2(static_cast<float>(w[j * C + c] * std::ldexp(1.0, -ej) / std::sqrt(e2)),
                        std::fabs(w[j * C + c]));
        for (int k = 0; k < K; ++k) {
          const int kp = k + sh;
          a[static_cast<size_t>(gc) * MT * KPMAX + (kp / 8) * MT * 8 + r * 8 + kp % 8] =
              __float2half_rn(tj[k] * pow2(ej));
        }
      }
    }
  float *dx, *dinv, *dout;
  float2* df;
  __half* da;
  int *ddj, *dbase, *dks;
  CK(cudaMalloc(&dx, x.size() * 4));
  CK(cudaMalloc(&dinv, inv.size() * 4));
  CK(cudaMalloc(&da, a.size() * 2));
  CK(cudaMalloc(&df, f.size() * 8));
  CK(cudaMalloc(&ddj, dj.size() * 4));
  CK(cudaMalloc(&dbase, base.size() * 4));
  CK(cudaMalloc(&dks, ksteps.size() * 4));
  CK(cudaMalloc(&dout, static_cast<size_t>(TP) * lout * 4));
  CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dinv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(df, f.data(), f.size() * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ddj, dj.data(), dj.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dbase, base.data(), base.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dks, ksteps.data(), ksteps.size() * 4, cudaMemcpyHostToDevice));
  const Params p{dx, dinv, da, df, ddj, dbase, dks, dout, C, l, lout};
  const KernelFit fit = fit_kernel(mf_network, 128, SMEM);
  const dim3 grid(lout / NW, groups);
  const auto launch = [&] { mf_network<<<grid, 128, SMEM>>>(p); };
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> out(static_cast<size_t>(TP) * lout);
  CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
  // FP64 reference at 48 times (first, last, random) for every template.
  std::vector<int> times = {0, lout - 1};
  for (int i = 0; i < 46; ++i) times.push_back(static_cast<int>(rng() % lout));
  double maxerr = 0, maxref = 0;
  for (int n : times)
    for (int j = 0; j < T; ++j) {
      double s = 0;
      for (int c = 0; c < C; ++c) {
        const float* tj = &tm[(static_cast<size_t>(j) * C + c) * K];
        const float* xc = &x[static_cast<size_t>(c) * l + n + mv[j * C + c]];
        double num = 0, et = 0, ex = 0;
        for (int k = 0; k < K; ++k)
          num += static_cast<double>(tj[k]) * xc[k], et += static_cast<double>(tj[k]) * tj[k],
              ex += static_cast<double>(xc[k]) * xc[k];
        s += w[j * C + c] * num / std::sqrt(et * ex);
      }
      maxerr = std::max(maxerr, std::fabs(s - out[static_cast<size_t>(j) * lout + n]));
      maxref = std::max(maxref, std::fabs(s));
    }
  const std::vector<float> tt = times_ms(launch, 5);
  const double useful = 2.0 * T * C * K * static_cast<double>(lout);
  const double mma = flop_done * (lout / NW);
  printf(
      "%s | NW %d | %d regs, %d B stack, %d B smem, %d blocks/SM | T %d C %d K %d samples %d: "
      "median %.3f ms (min %.3f) | %.1f TFLOP/s useful, %.1f TFLOP/s MMA (K'/K %.3f) | max "
      "|err| %.2e (max |stack| %.2f)\n",
      prop.name, NW, fit.attr.numRegs, static_cast<int>(fit.attr.localSizeBytes), SMEM, fit.per_sm,
      T, C, K, lout, tt[tt.size() / 2], tt[0], useful / tt[tt.size() / 2] / 1e9,
      mma / tt[tt.size() / 2] / 1e9, mma * T / TP / useful, maxerr, maxref);
  return 0;
}
