// The generic register kernel (kernel size at run time, P and Q templates); see register.cuh for
// the design and the floors. Included from register.cuh only.
#pragma once

namespace halfscope::conv::kernels {

/// One staged input row against the Q accumulator rows of a thread: acc row q uses kernel row
/// u = ub + q (skipped when outside the kernel, uniformly for the warp). Offsets w = kcols-1-v
/// are walked downward (v upward, the documented tap order) in chunks of P: the chunk at w0 needs
/// row pixels [w0, w0 + 2P) from the thread's start, kept as lo (new) and hi (previous lo).
template <class Prec, int P, int Q, bool kConst>
__device__ inline void generic_row(const RegArgs& a, const typename Prec::R* row, int ub,
                                   typename Prec::A (&acc)[Q][P]) {
  using A = typename Prec::A;
  using R = typename Prec::R;
  constexpr int NV = P * static_cast<int>(sizeof(R)) / 16;
  const int kr = a.c.krows, kc = a.c.kcols;
  const int wtop = (kc - 1) / P * P;
  unsigned w[4 * NV];
  A lo[P], hi[P];
  load_words<NV>(row + wtop + P, w);
  HS_UNROLL
  for (int p = 0; p < P; ++p) hi[p] = element<Prec>(w, p);
  auto chunk = [&](int w0, auto first) {
    load_words<NV>(row + w0, w);
    HS_UNROLL
    for (int p = 0; p < P; ++p) lo[p] = element<Prec>(w, p);
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      const int u = ub + q;
      if (static_cast<unsigned>(u) >= static_cast<unsigned>(kr)) continue;
      const int kbase = u * kc + kc - 1 - w0;  // tap (u, v) with v = kc - 1 - (w0 + dw)
      HS_UNROLL
      for (int dw = P - 1; dw >= 0; --dw) {
        if (decltype(first)::value && w0 + dw >= kc) continue;
        const A k = coef<Prec, kConst>(a, kbase - dw);
        HS_UNROLL
        for (int p = 0; p < P; ++p)
          acc[q][p] = Prec::fma(k, p + dw < P ? lo[p + dw] : hi[p + dw - P], acc[q][p]);
      }
    }
    HS_UNROLL
    for (int p = 0; p < P; ++p) hi[p] = lo[p];
  };
  chunk(wtop, std::true_type{});
  HS_NO_UNROLL
  for (int w0 = wtop - P; w0 >= 0; w0 -= P) chunk(w0, std::false_type{});
}

/// FP16 arithmetic, packed: the 2P-pixel window as words (lo: P/2 new, hi: P/2 previous) and
/// their odd-shifted pairs; accumulator pair (p, p + 1) at offset dw reads the pair at p + dw.
template <int P, int Q, bool kConst>
__device__ inline void generic_row_half(const RegArgs& a, const unsigned short* row, int ub,
                                        __half2 (&acc)[Q][P / 2]) {
  constexpr int NV = P * 2 / 16;
  constexpr int H = P / 2;  // words per P pixels
  const int kr = a.c.krows, kc = a.c.kcols;
  const int wtop = (kc - 1) / P * P;
  unsigned win[2 * H];  // [0, H): lo, [H, 2H): hi
  {
    unsigned t[4 * NV];
    load_words<NV>(row + wtop + P, t);
    HS_UNROLL
    for (int m = 0; m < H; ++m) win[H + m] = t[m];
  }
  auto chunk = [&](int w0, auto first) {
    unsigned t[4 * NV];
    load_words<NV>(row + w0, t);
    HS_UNROLL
    for (int m = 0; m < H; ++m) win[m] = t[m];
    __half2 odd[2 * H - 1];
    HS_UNROLL
    for (int m = 0; m + 1 < 2 * H; ++m)
      odd[m] = bit_as<__half2>(__byte_perm(win[m], win[m + 1], 0x5432));
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      const int u = ub + q;
      if (static_cast<unsigned>(u) >= static_cast<unsigned>(kr)) continue;
      const int kbase = u * kc + kc - 1 - w0;
      HS_UNROLL
      for (int dw = P - 1; dw >= 0; --dw) {
        if (decltype(first)::value && w0 + dw >= kc) continue;
        const __half2 k = coef<PrecHalf, kConst>(a, kbase - dw);
        HS_UNROLL
        for (int m = 0; m < H; ++m) {
          const int s = 2 * m + dw;
          const __half2 x = (s & 1) ? odd[s >> 1] : bit_as<__half2>(win[s >> 1]);
          acc[q][m] = __hfma2(k, x, acc[q][m]);
        }
      }
    }
    HS_UNROLL
    for (int m = 0; m < H; ++m) win[H + m] = win[m];
  };
  chunk(wtop, std::true_type{});
  HS_NO_UNROLL
  for (int w0 = wtop - P; w0 >= 0; w0 -= P) chunk(w0, std::false_type{});
}

/// blockDim = (32, TY); a block computes a (TY*Q) x (32*P) tile of outputs, streaming its
/// TY*Q + krows - 1 input rows bottom-up through one shared-memory row of a.sp pixels.
template <class Prec, int P, int Q, bool kConst>
__global__ void __launch_bounds__(register_tuning::kGenericThreads,
                                  register_tuning::kGenericMinBlocks)
    register_generic_kernel(const RegArgs a) {
  using R = typename Prec::R;
  constexpr bool kHalf = std::is_same_v<Prec, PrecHalf>;
  static_assert(P * Q <= 64);
  HS_DYNAMIC_SHARED(uint4, smem_generic);
  R* sm = reinterpret_cast<R*>(smem_generic);
  const int tid = threadIdx.y * 32 + threadIdx.x;
  const int nthreads = 32 * blockDim.y;
  const int th = blockDim.y * Q;
  const int kr = a.c.krows, kc = a.c.kcols;
  const long long tj0 = static_cast<long long>(blockIdx.x) * 32 * P;
  const long long j0 = tj0 + threadIdx.x * P;
  const R* row = sm + threadIdx.x * P;
  unsigned overflow = 0;
  for (long long trow = blockIdx.y; trow < a.n_tile_rows; trow += gridDim.y) {
    const long long ti0 = trow * th;
    const long long y0 = ti0 + a.c.row0 - (kr - 1), x0 = tj0 + a.c.col0 - (kc - 1);
    using AccRow = std::conditional_t<kHalf, __half2[P / 2], typename Prec::A[P]>;
    AccRow acc[Q];
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      HS_UNROLL
      for (int p = 0; p < (kHalf ? P / 2 : P); ++p) {
        if constexpr (kHalf)
          acc[q][p] = __half2half2(__ushort_as_half(0));
        else
          acc[q][p] = Prec::zero();
      }
    }
    HS_NO_UNROLL
    for (int s = th + kr - 2; s >= 0; --s) {
      __syncthreads();  // everyone is done with the previous row
      stage_rows<R>(a, sm, y0 + s, x0, 1, a.sp, tid, nthreads);
      __syncthreads();
      const int ub = threadIdx.y * Q + kr - 1 - s;  // kernel row for accumulator row 0
      if (ub + Q - 1 < 0 || ub >= kr) continue;     // uniform per warp (blockDim.x == 32)
      if constexpr (kHalf)
        generic_row_half<P, Q, kConst>(a, row, ub, acc);
      else
        generic_row<Prec, P, Q, kConst>(a, row, ub, acc);
    }
    const long long i0 = ti0 + threadIdx.y * Q;
    unsigned long long bad = 0;
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      unsigned m = 0;
      if constexpr (kHalf) {
        OutWords<PrecHalf, P> o;
        HS_UNROLL
        for (int n = 0; n < P / 2; ++n) o.w[n] = bit_as<unsigned>(acc[q][n]);
        m = store_outputs<PrecHalf, P>(a, o, i0 + q, j0);
      } else {
        m = store_outputs<Prec, P>(a, pack_outputs<Prec, P>(acc[q]), i0 + q, j0);
      }
      bad |= static_cast<unsigned long long>(m) << (q * P);
    }
    if constexpr (Prec::kNarrow)
      if (bad) count_overflow<Prec, P>(a, bad, i0, j0, overflow);
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.c.overflow);
}

}  // namespace halfscope::conv::kernels
