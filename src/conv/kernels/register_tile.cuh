// The unrolled register-tile kernel (odd square kernels of width KW); see register.cuh for the
// design and the floors. Included from register.cuh only.
#pragma once

namespace halfscope::conv::kernels {

/// FP32/FP64 arithmetic: acc[q][p] += k(u, v) * row[p + KW - 1 - v] for every input row of the
/// region of interest, walked bottom-up so each output sees its taps in (u, v) ascending order.
template <class Prec, int KW, int P, int Q>
__device__ inline void tile_compute(const RegArgs& a, const typename Prec::R* win, int sp,
                                    long long i0, long long j0, unsigned& overflow) {
  using A = typename Prec::A;
  using R = typename Prec::R;
  static_assert(P * Q <= 64);  // one overflow bit per output in a 64-bit mask
  constexpr int W = P + KW - 1;
  constexpr int V = 16 / static_cast<int>(sizeof(R));
  constexpr int NV = (W + V - 1) / V;
  A acc[Q][P];
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    HS_UNROLL
    for (int p = 0; p < P; ++p) acc[q][p] = Prec::zero();
  }

  HS_UNROLL
  for (int r = Q + KW - 2; r >= 0; --r) {
    unsigned w[4 * NV];
    load_words<NV>(win + r * sp, w);
    A x[W];
    HS_UNROLL
    for (int e = 0; e < W; ++e) x[e] = element<Prec>(w, e);
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      const int u = q + KW - 1 - r;  // kernel row this input row is for output row q
      if (u < 0 || u >= KW) continue;
      HS_UNROLL
      for (int v = 0; v < KW; ++v) {
        const A k = coef<Prec, true>(a, u * KW + v);
        HS_UNROLL
        for (int p = 0; p < P; ++p) acc[q][p] = Prec::fma(k, x[p + KW - 1 - v], acc[q][p]);
      }
    }
  }
  unsigned long long bad = 0;
  HS_UNROLL
  for (int q = 0; q < Q; ++q)
    bad |= static_cast<unsigned long long>(
               store_outputs<Prec, P>(a, pack_outputs<Prec, P>(acc[q]), i0 + q, j0))
           << (q * P);
  if constexpr (Prec::kNarrow)
    if (bad) count_overflow<Prec, P>(a, bad, i0, j0, overflow);
}

/// FP16 arithmetic, packed: accumulator pair (p, p + 1) takes the input pair starting at
/// s = p + KW - 1 - v, an aligned word of the row when s is even and a PRMT of two words when odd.
template <int KW, int P, int Q>
__device__ inline void tile_compute_half(const RegArgs& a, const unsigned short* win, int sp,
                                         long long i0, long long j0, unsigned& overflow) {
  static_assert(P % 2 == 0 && P * Q <= 64);
  constexpr int W = P + KW - 1;
  constexpr int NV = (W + 7) / 8;
  constexpr int NW = 4 * NV;
  __half2 acc[Q][P / 2];
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m) acc[q][m] = __half2half2(__ushort_as_half(0));
  }

  HS_UNROLL
  for (int r = Q + KW - 2; r >= 0; --r) {
    unsigned w[NW];
    load_words<NV>(win + r * sp, w);
    __half2 even[NW], odd[NW - 1];
    HS_UNROLL
    for (int m = 0; m < NW; ++m) even[m] = bit_as<__half2>(w[m]);
    HS_UNROLL
    for (int m = 0; m + 1 < NW; ++m) odd[m] = bit_as<__half2>(__byte_perm(w[m], w[m + 1], 0x5432));
    HS_UNROLL
    for (int q = 0; q < Q; ++q) {
      const int u = q + KW - 1 - r;
      if (u < 0 || u >= KW) continue;
      HS_UNROLL
      for (int v = 0; v < KW; ++v) {
        const __half2 k = coef<PrecHalf, true>(a, u * KW + v);
        HS_UNROLL
        for (int m = 0; m < P / 2; ++m) {
          const int s = 2 * m + KW - 1 - v;
          acc[q][m] = __hfma2(k, (s & 1) ? odd[s >> 1] : even[s >> 1], acc[q][m]);
        }
      }
    }
  }
  unsigned long long bad = 0;
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    OutWords<PrecHalf, P> o;
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m) o.w[m] = bit_as<unsigned>(acc[q][m]);
    bad |= static_cast<unsigned long long>(store_outputs<PrecHalf, P>(a, o, i0 + q, j0)) << (q * P);
  }
  if (bad) count_overflow<PrecHalf, P>(a, bad, i0, j0, overflow);
}

/// One block: a (blockDim.y * Q) x (blockDim.x * P) tile of outputs; grid.x walks tile columns,
/// grid.y tile rows (looping beyond 65535). Dynamic shared memory: (blockDim.y*Q + KW - 1) rows
/// of a.sp pixels.
template <class Prec, int KW, int P, int Q>
__global__ void __launch_bounds__(register_tuning::kTileThreads,
                                  register_tuning::tile_min_blocks(KW))
    register_tile_kernel(const RegArgs a) {
  using R = typename Prec::R;
  HS_DYNAMIC_SHARED(uint4, smem_tile);
  R* sm = reinterpret_cast<R*>(smem_tile);
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  const int th = blockDim.y * Q;
  const long long tj0 = static_cast<long long>(blockIdx.x) * blockDim.x * P;
  const long long j0 = tj0 + threadIdx.x * P;
  const R* win = sm + threadIdx.y * Q * a.sp + threadIdx.x * P;
  unsigned overflow = 0;
  for (long long trow = blockIdx.y; trow < a.n_tile_rows; trow += gridDim.y) {
    const long long ti0 = trow * th;
    if (trow != blockIdx.y) __syncthreads();  // the previous tile is no longer being read
    stage_rows<R>(a, sm, ti0 + a.c.row0 - (KW - 1), tj0 + a.c.col0 - (KW - 1), th + KW - 1, a.sp,
                  tid, nthreads);
    __syncthreads();
    const long long i0 = ti0 + threadIdx.y * Q;
    if constexpr (std::is_same_v<Prec, PrecHalf>)
      tile_compute_half<KW, P, Q>(a, win, a.sp, i0, j0, overflow);
    else
      tile_compute<Prec, KW, P, Q>(a, win, a.sp, i0, j0, overflow);
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.c.overflow);
}

}  // namespace halfscope::conv::kernels
