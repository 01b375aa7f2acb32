// The unrolled register-tile kernel (odd square kernels of width KW); see register.cuh for the
// design and the floors. Included from register.cuh only.
#pragma once

namespace halfscope::conv::kernels {

/// FP32/FP64 arithmetic: every input row of the thread's region of interest, read from shared
/// memory bottom-up, added into its P x Q accumulators (accumulate_row), then stored.
template <class Prec, int KW, int P, int Q>
__device__ inline void tile_compute(const RegArgs& a, const typename Prec::R* win, int sp,
                                    long long i0, long long j0, unsigned& overflow) {
  using A = typename Prec::A;
  constexpr int V = 16 / static_cast<int>(sizeof(typename Prec::R));
  constexpr int NV = (P + KW - 1 + V - 1) / V;
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
    accumulate_row<Prec, KW, P, Q, 0>(a, w, r, acc);
  }
  const unsigned long long bad = store_rows<Prec, P, Q>(a, acc, i0, j0);
  if constexpr (Prec::kNarrow)
    if (bad) count_overflow<Prec, P>(a, bad, i0, j0, overflow);
}

/// FP16 arithmetic, packed (accumulate_row_half): two adjacent outputs per HFMA2.
template <int KW, int P, int Q>
__device__ inline void tile_compute_half(const RegArgs& a, const unsigned short* win, int sp,
                                         long long i0, long long j0, unsigned& overflow) {
  constexpr int NV = (P + KW - 1 + 7) / 8;
  __half2 acc[Q][P / 2];
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m) acc[q][m] = __half2half2(__ushort_as_half(0));
  }
  HS_UNROLL
  for (int r = Q + KW - 2; r >= 0; --r) {
    unsigned w[4 * NV];
    load_words<NV>(win + r * sp, w);
    accumulate_row_half<KW, P, Q, 0>(a, w, r, acc);
  }
  const unsigned long long bad = store_rows_half<P, Q>(a, acc, i0, j0);
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
