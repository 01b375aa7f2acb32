// The rolling kernel: a rank-one kernel k(u, v) = col[u] row[v] of width KW <= 7 on FP16 / BF16
// storage (16-byte aligned rows), what separable_cuda runs there (register_launch.cuh). A block
// owns a strip of 8 * kRollThreads output columns and a band of rows, and walks down the band:
// each input row arrives in a ring of shared-memory rows through cp.async, kRollAhead rows before
// it is used, so a thread's loads never stall its arithmetic and it holds no window of rows in
// registers. Each thread turns its 8 columns of every input row into 8 row sums once, keeps the
// last KW rows' sums in registers (a ring, unrolled over KW so its slots are registers), and when
// an output row is complete adds them with the column taps and stores 8 outputs.
//
// Why not the streaming kernel's rank-one mode (register_stream.cuh) everywhere: that one loads
// Q + KW - 1 rows per Q output rows into registers before using any, so its loads in flight are
// bounded by its registers, and its per-thread windows grow with KW. Kernel alone (ncu) on an
// NVIDIA H200 at 8192^2: FP16 7x7 98 -> 86 us, mixed 7x7 127 -> 89 us (74 % / 71 % of the copy
// ceiling); at 3x3 and FP16 5x5 the streaming kernel stays faster (register_tuning::
// roll_rank_one). Device code only (cp.async): not part of the host emulation of register.cuh.
#pragma once

#include "conv/kernels/register.cuh"
#include "conv/kernels/register_tuning.hpp"
#include "core/kernels/async_copy.cuh"

namespace halfscope::conv::kernels {

/// A ring row: the strip's 8 * kRollThreads pixels and 8 more on each side (16-byte chunks).
inline constexpr int kRollRowPixels = 8 * register_tuning::kRollThreads + 16;

/// Where a thread's ring chunks come from: chunk t and t + kRollThreads of every ring row (the
/// second only for the last two threads), chunk c holding image columns x0 + 8c .. + 7 with x0 =
/// the strip's first column - 8. The image rows are a whole number of 16 bytes and the strip
/// starts at a multiple of 8 pixels, so a chunk lies wholly inside or wholly outside the image:
/// outside, it reads its wrapped place (circular) or nothing (zero-filled). Worked out once per
/// thread: computed per row, the wrapping's 64-bit arithmetic was most of the kernel's code.
struct RollChunks {
  static constexpr int kPerThread = 2;
  long long x[kPerThread];  // first image column, or -1: zero-filled
  int n = 0;                // chunks this thread copies
};

__device__ inline RollChunks roll_chunks(const ConvArgs& c, long long x0) {
  constexpr int kChunks = kRollRowPixels / 8;
  static_assert(kChunks <= RollChunks::kPerThread * register_tuning::kRollThreads);
  RollChunks out;
  for (int k = static_cast<int>(threadIdx.x); k < kChunks; k += register_tuning::kRollThreads) {
    const long long x = x0 + 8LL * k;
    const bool in = static_cast<unsigned long long>(x) < static_cast<unsigned long long>(c.cols);
    out.x[out.n++] = in ? x : (c.circular ? wrap_near(x, c.cols) : -1);
  }
  return out;
}

/// The image row that input row y reads (wrapped, circular), or -1 (zero boundary, outside).
/// A template, so each translation unit's out-of-line copy is an inline definition.
template <class R>
__device__ __noinline__ long long roll_row_outside(const ConvArgs& c, long long y) {
  return c.circular ? wrap_near(y, c.rows) : -1;
}

/// Queues the copy of image row y (any integer) into the ring row `dst`.
template <class R>
__device__ inline void roll_load_row(R* dst, const ConvArgs& c, const RollChunks& ch, long long y) {
  static_assert(sizeof(R) == 2, "8 pixels per 16-byte chunk");
  const R* img = static_cast<const R*>(c.image);
  if (static_cast<unsigned long long>(y) >= static_cast<unsigned long long>(c.rows))
    y = roll_row_outside<R>(c, y);
  const R* row = img + (y >= 0 ? y : 0) * c.cols;
  HS_UNROLL
  for (int n = 0; n < RollChunks::kPerThread; ++n) {
    if (n >= ch.n) break;
    const bool in = y >= 0 && ch.x[n] >= 0;
    halfscope::kernels::cp_async16_fill(
        dst + 8 * (static_cast<int>(threadIdx.x) + n * register_tuning::kRollThreads),
        in ? row + ch.x[n] : img, in ? 16 : 0);
  }
}

/// store_outputs where the 8 outputs of row i from column j0 are not one aligned 16-byte store
/// (the last strip's edge, unaligned output rows), its non-finite bits left to the caller's test.
/// Out of line: the kernel's unrolled loop keeps only the vector store.
template <class Prec>
__device__ __noinline__ void roll_store_edge(const RegArgs& a, const OutWords<Prec, 8> o,
                                             long long i, long long j0) {
  (void)store_outputs<Prec, 8>(a, o, i, j0);
}

/// The outputs of a thread's 8 columns in output rows [i0, i0 + rows) that overflowed: read back
/// (this thread wrote them) and, where not finite, recounted against their inputs (count_overflow's
/// rule). Out of line and called only when a stored output was not finite.
template <class Prec>
__device__ __noinline__ unsigned roll_recount(const RegArgs& a, long long i0, int rows,
                                              long long j0) {
  using R = typename Prec::R;
  unsigned n = 0;
  for (long long i = i0; i < i0 + rows; ++i)
    for (int p = 0; p < 8 && j0 + p < a.c.out_cols; ++p) {
      const R bits = static_cast<const R*>(a.c.out)[i * a.c.out_cols + j0 + p];
      if (is_nonfinite_bits<Prec>(bits) && footprint_finite<Prec>(a.c, i, j0 + p)) ++n;
    }
  return n;
}

/// Block: kRollThreads threads, 8 output columns each; grid.x column strips, grid.y bands of
/// `band` output rows. LEAD = KW - 1 - col0 columns of the kernel reach left of an output (KW - 1
/// for `full`, KW / 2 for `same`, 0 for `valid`). Dynamic shared memory: kRollRing ring rows.
template <class Prec, int KW, int LEAD>
__global__ void __launch_bounds__(register_tuning::kRollThreads)
    register_roll_kernel(const RegArgs a, const SepTaps sep, const long long band) {
  namespace rt = register_tuning;
  using R = typename Prec::R;
  constexpr bool kHalf = std::is_same_v<Prec, PrecHalf>;
  constexpr int kAhead = rt::kRollAhead, kRing = rt::kRollRing, kRow = kRollRowPixels;
  constexpr int kShift = 8 - LEAD;  // pixels from the window's first to output 0's leftmost tap
  static_assert(kRing > kAhead && LEAD >= 0 && LEAD < KW && KW <= 8);
  HS_DYNAMIC_SHARED(uint4, ring_words);
  R* ring = reinterpret_cast<R*>(ring_words);
  const ConvArgs& c = a.c;
  const long long strip = static_cast<long long>(blockIdx.x) * 8 * rt::kRollThreads;
  const long long j0 = strip + 8LL * threadIdx.x;
  const long long i0 = static_cast<long long>(blockIdx.y) * band;
  const int rows_out = static_cast<int>(c.out_rows - i0 < band ? c.out_rows - i0 : band);
  const int ny = rows_out + KW - 1;                         // input rows of the band
  const long long y0 = i0 + c.row0 - (KW - 1);              // image row of band row 0
  const long long x0 = strip + c.col0 - (KW - 1) - kShift;  // image column of ring pixel 0
  const RollChunks chunks = roll_chunks(c, x0);
  HS_UNROLL
  for (int k = 0; k < kAhead; ++k) {
    if (k < ny) roll_load_row(ring + k * kRow, c, chunks, y0 + k);
    halfscope::kernels::cp_async_commit();
  }
  using Sums = std::conditional_t<kHalf, __half2[4], float[8]>;
  Sums sums[KW];           // the row sums of band rows k - KW + 1 .. k, row k in slot k % KW
  unsigned nonfinite = 0;  // nonfinite_pair_flags of every output stored
  for (int k0 = 0; k0 < ny; k0 += KW) {
    HS_UNROLL
    for (int s = 0; s < KW; ++s) {
      const int k = k0 + s;
      if (k >= ny) break;  // uniform in the block: the barriers below stay matched
      // Row k has landed (this thread's chunks; after the barrier everyone's), and no thread
      // reads row k - 1's slot any more: the load of row k + kAhead may take it.
      halfscope::kernels::cp_async_wait_group<kAhead - 1>();
      __syncthreads();
      if (k + kAhead < ny)
        roll_load_row(ring + (k + kAhead) % kRing * kRow, c, chunks, y0 + k + kAhead);
      halfscope::kernels::cp_async_commit();
      unsigned w[12];
      load_words<3>(ring + k % kRing * kRow + 8 * threadIdx.x, w);
      if constexpr (kHalf)
        separable_row_sums_half<KW, 8, kShift>(sep, w, sums[s]);
      else
        separable_row_sums<Prec, KW, 8, kShift>(sep, w, sums[s]);
      if (k < KW - 1) continue;
      // Output row i0 + k - (KW - 1) is complete: kernel row u takes band row k - u; u
      // ascending, as the streaming kernel's rank-one mode adds them.
      const long long i = i0 + k - (KW - 1);
      OutWords<Prec, 8> o;
      if constexpr (kHalf) {
        __half2 acc[1][4];
        HS_UNROLL
        for (int m = 0; m < 4; ++m) acc[0][m] = __hmul2(bit_as<__half2>(sep.col2[0]), sums[s][m]);
        HS_UNROLL
        for (int u = 1; u < KW; ++u) {
          HS_UNROLL
          for (int m = 0; m < 4; ++m)
            acc[0][m] =
                __hfma2(bit_as<__half2>(sep.col2[u]), sums[(s - u + KW) % KW][m], acc[0][m]);
        }
        HS_UNROLL
        for (int m = 0; m < 4; ++m) o.w[m] = bit_as<unsigned>(acc[0][m]);
      } else {
        float acc[1][8];
        HS_UNROLL
        for (int p = 0; p < 8; ++p) acc[0][p] = sep.col[0] * sums[s][p];
        HS_UNROLL
        for (int u = 1; u < KW; ++u) {
          HS_UNROLL
          for (int p = 0; p < 8; ++p)
            acc[0][p] = __fmaf_rn(sep.col[u], sums[(s - u + KW) % KW][p], acc[0][p]);
        }
        o = pack_outputs<Prec, 8>(acc[0]);
      }
      // Only the aligned store and the non-finite test stay in the unrolled loop: with the edge
      // stores, the overflow recount and the 64-bit wrapping inlined into each of its KW copies,
      // the FP16 7x7 kernel had 17 K instructions (now 5.4 K) and a whole call took 0.152 ms
      // (now 0.104) on the H200 at 8192^2.
      if (a.vec_out && j0 + 8 <= c.out_cols)
        *reinterpret_cast<uint4*>(static_cast<R*>(c.out) + i * c.out_cols + j0) =
            make_uint4(o.w[0], o.w[1], o.w[2], o.w[3]);
      else if (j0 < c.out_cols)
        roll_store_edge<Prec>(a, o, i, j0);
      HS_UNROLL
      for (int m = 0; m < 4; ++m) nonfinite |= nonfinite_pair_flags<Prec>(o.w[m]);
    }
  }
  unsigned overflow = 0;
  if (nonfinite && j0 < c.out_cols) overflow = roll_recount<Prec>(a, i0, rows_out, j0);
  commit_overflow(overflow, c.overflow);
}

}  // namespace halfscope::conv::kernels
