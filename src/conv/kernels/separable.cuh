// Device code of the `separable` GPU convolution (host side: src/conv/separable_cuda.cu). A kernel
// K = sum_r c_r r_r^T runs as, per term, a row pass T_r(y, j) = sum_v r_r(v) in(y, j + col0 - v)
// over the image rows, into an intermediate in the arithmetic type, then one column pass
// out(i, j) = sum_r sum_u c_r(u) T_r(i + row0 - u, j) with the boundary rule applied to y. Both
// passes read their line from shared memory and slide a window of registers over it: per chunk
// of 8 taps a thread loads 8 new values and 8 taps (broadcast) and does 8 x (outputs per thread)
// multiply-adds, so the FMA pipe, not the loads, sets the pace.
//
// Floors on an H200 at 4096^2, FP32, rank 1: 256 MB moved (image, intermediate twice, output),
// 61 us at 4.2 TB/s; 2 w multiply-adds per output, 3.9 us per tap pair at 67 TFLOP/s.
#pragma once

#include "conv/kernels/direct_common.cuh"
#include "conv/kernels/storage_types.cuh"

namespace halfscope::conv::kernels {

inline constexpr int kSepChunk = 8;         // taps per step of the sliding window
inline constexpr int kSepRowThreads = 128;  // row pass: one block per 1024 outputs of a row
inline constexpr int kSepRowOutputs = 8;    // consecutive outputs per thread
inline constexpr int kSepRowSpan = kSepRowThreads * kSepRowOutputs;
inline constexpr int kSepColThreadsY = 16;  // column pass: 32 x 16 threads,
inline constexpr int kSepColOutputs = 16;   // 16 consecutive rows per thread,
inline constexpr int kSepColSpan = kSepColThreadsY * kSepColOutputs;  // 256 x 32 outputs a block

struct SepArgs {
  ConvArgs c;                  // geometry, image, kernel (for the overflow footprint), output
  void* tmp = nullptr;         // rank planes of rows x tpitch, arithmetic type
  const void* taps = nullptr;  // rank x rpad reversed row taps, then rank x cpad column taps
  long long tpitch = 0;        // intermediate row pitch (a multiple of 8 elements)
  int rpad = 0, cpad = 0;      // kcols, krows rounded up to kSepChunk (zero taps beyond)
  int rank = 0;
};

/// Loads 8 consecutive values from 16-byte-aligned shared memory.
template <class A>
__device__ inline void load8(const A* p, A* dst) {
  const auto v = storage::load_pack(reinterpret_cast<const storage::Pack<A, 8>*>(p));
  HS_UNROLL for (int q = 0; q < 8; ++q) dst[q] = v.v[q];
}

/// acc[q] += sum_d taps[d] * x[q + d] for q < N, d < 8: one chunk of the sliding window.
template <class Prec, int N>
__device__ inline void sep_chunk(const typename Prec::A* taps, const typename Prec::A* x,
                                 typename Prec::A* acc) {
  HS_UNROLL for (int d = 0; d < kSepChunk; ++d) {
    HS_UNROLL for (int q = 0; q < N; ++q) acc[q] = Prec::fma(taps[d], x[q + d], acc[q]);
  }
}

/// Row pass: block (x, y) computes T_r(y, 1024 x + t) for every term r from one shared line.
template <class Prec>
__global__ void __launch_bounds__(kSepRowThreads) separable_row_kernel(SepArgs a) {
  using A = typename Prec::A;
  using R = typename Prec::R;
  extern __shared__ __align__(16) unsigned char sep_smem[];
  A* line = reinterpret_cast<A*>(sep_smem);
  A* taps = line + kSepRowSpan + a.rpad;
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < a.rank * a.rpad; i += kSepRowThreads)
    taps[i] = static_cast<const A*>(a.taps)[i];
  const R* img = static_cast<const R*>(a.c.image);
  const long long j0 = static_cast<long long>(blockIdx.x) * kSepRowSpan;
  const long long x0 = j0 + a.c.col0 - (a.c.kcols - 1);
  const int n = kSepRowSpan + a.rpad;
  const bool circular = a.c.circular != 0;
  for (long long y = blockIdx.y; y < a.c.rows; y += gridDim.y) {
    __syncthreads();  // the previous line's readers are done
    for (int k = t; k < n; k += kSepRowThreads)
      line[k] = Prec::widen(load_bounded(img, a.c.rows, a.c.cols, circular, y, x0 + k));
    __syncthreads();
    const long long j = j0 + kSepRowOutputs * t;
    for (int r = 0; r < a.rank; ++r) {
      A acc[kSepRowOutputs], x[kSepRowOutputs + kSepChunk], tap[kSepChunk];
      HS_UNROLL for (int q = 0; q < kSepRowOutputs; ++q) acc[q] = Prec::zero();
      const int k0 = kSepRowOutputs * t;
      load8(line + k0, x);
      for (int a0 = 0; a0 < a.rpad; a0 += kSepChunk) {
        load8(line + k0 + a0 + kSepChunk, x + kSepChunk);
        load8(taps + r * a.rpad + a0, tap);
        sep_chunk<Prec, kSepRowOutputs>(tap, x, acc);
        HS_UNROLL for (int q = 0; q < kSepChunk; ++q) x[q] = x[q + kSepChunk];
      }
      // The pitch is a multiple of 8, so the whole pack stays inside this row.
      if (j < a.c.out_cols) {
        storage::Pack<A, kSepRowOutputs> p;
        HS_UNROLL for (int q = 0; q < kSepRowOutputs; ++q) p.v[q] = acc[q];
        A* dst = static_cast<A*>(a.tmp) + (r * a.c.rows + y) * a.tpitch + j;
        storage::store_pack(reinterpret_cast<storage::Pack<A, kSepRowOutputs>*>(dst), p);
      }
    }
  }
}

/// Column pass: block (x, y) computes out over 32 columns x 256 rows, summing the terms.
template <class Prec>
__global__ void __launch_bounds__(32 * kSepColThreadsY) separable_column_kernel(SepArgs a) {
  using A = typename Prec::A;
  using R = typename Prec::R;
  extern __shared__ __align__(16) unsigned char sep_smem[];
  const int rows_in_tile = kSepColSpan + a.cpad;
  A* tile = reinterpret_cast<A*>(sep_smem);  // rows_in_tile x 32
  A* taps = tile + rows_in_tile * 32;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * 32 + tx;
  for (int i = tid; i < a.rank * a.cpad; i += 32 * kSepColThreadsY)
    taps[i] = static_cast<const A*>(a.taps)[a.rank * a.rpad + i];
  const long long j = static_cast<long long>(blockIdx.x) * 32 + tx;
  const bool circular = a.c.circular != 0, column = j < a.c.out_cols;
  unsigned overflow = 0;
  for (long long i0 = static_cast<long long>(blockIdx.y) * kSepColSpan; i0 < a.c.out_rows;
       i0 += static_cast<long long>(gridDim.y) * kSepColSpan) {
    const long long y0 = i0 + a.c.row0 - (a.c.krows - 1);
    A acc[kSepColOutputs];
    HS_UNROLL for (int q = 0; q < kSepColOutputs; ++q) acc[q] = Prec::zero();
    for (int r = 0; r < a.rank; ++r) {
      __syncthreads();  // taps stored; the previous tile's readers are done
      const A* plane = static_cast<const A*>(a.tmp) + r * a.c.rows * a.tpitch + j;
      for (int k = ty; k < rows_in_tile; k += kSepColThreadsY) {
        long long y = y0 + k;
        const bool inside =
            static_cast<unsigned long long>(y) < static_cast<unsigned long long>(a.c.rows);
        if (!inside && circular) y = wrap_index(y, a.c.rows);
        tile[k * 32 + tx] = column && (inside || circular) ? plane[y * a.tpitch] : Prec::zero();
      }
      __syncthreads();
      A x[kSepColOutputs + kSepChunk], tap[kSepChunk];
      const A* src = tile + kSepColOutputs * ty * 32 + tx;
      HS_UNROLL for (int q = 0; q < kSepColOutputs; ++q) x[q] = src[q * 32];
      for (int a0 = 0; a0 < a.cpad; a0 += kSepChunk) {
        HS_UNROLL for (int q = 0; q < kSepChunk; ++q) x[kSepColOutputs + q] =
            src[(a0 + kSepColOutputs + q) * 32];
        load8(taps + r * a.cpad + a0, tap);
        sep_chunk<Prec, kSepColOutputs>(tap, x, acc);
        HS_UNROLL for (int q = 0; q < kSepColOutputs; ++q) x[q] = x[q + kSepChunk];
      }
    }
    if (column) {
      R* out = static_cast<R*>(a.c.out);
      unsigned flagged = 0;  // non-finite narrow outputs, examined after the stores (cold path)
      const long long i1 = i0 + kSepColOutputs * ty;
      HS_UNROLL for (int q = 0; q < kSepColOutputs; ++q) {
        if (i1 + q >= a.c.out_rows) break;
        const R bits = Prec::narrow(acc[q]);
        out[(i1 + q) * a.c.out_cols + j] = bits;
        if constexpr (Prec::kNarrow) flagged |= is_nonfinite_bits<Prec>(bits) ? 1u << q : 0u;
      }
      if constexpr (Prec::kNarrow) {
        for (int q = 0; flagged != 0; ++q, flagged >>= 1)
          if ((flagged & 1u) && footprint_finite<Prec>(a.c, i1 + q, j)) ++overflow;
      }
    }
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.c.overflow);
}

}  // namespace halfscope::conv::kernels
