// The rolling kernel: a rank-one kernel k(u, v) = col[u] row[v] of width KW <= 7 on FP16 / BF16
// storage (16-byte aligned rows), what separable_cuda runs there (register_launch.cuh). A block
// owns a strip of 8 * kRollThreads output columns and a band of rows, and walks down the band:
// each input row arrives in a ring of shared-memory rows through cp.async, kRollAhead rows before
// it is used, so a thread's loads never stall its arithmetic and it holds no window of rows in
// registers. Each thread turns its 8 columns of every input row into 8 row sums once, keeps the
// last KW rows' sums in registers (a ring, unrolled over KW so its slots are registers), and when
// an output row is complete adds them with the column taps and stores 8 outputs.
//
// Why not the streaming kernel's rank-one mode (register_stream.cuh) for these types: that one
// loads Q + KW - 1 rows per Q output rows into registers before using any, so its loads in flight
// are bounded by its registers; with 16-bit pixels it reached 54-61 % of the copy ceiling at
// 5x5 / 7x7 on an H200 (8192^2). The rolling kernel reads each input row once per band (the band
// adds KW - 1 rows) with several rows always in flight: a prototype on the same H200 ran FP16 5x5
// / 7x7 at 0.084-0.090 ms (the copy of the same bytes takes 0.069 ms). Device code only (cp.async):
// not part of the host emulation of register.cuh.
#pragma once

#include "conv/kernels/register.cuh"
#include "conv/kernels/register_tuning.hpp"
#include "core/kernels/async_copy.cuh"

namespace halfscope::conv::kernels {

/// A ring row: the strip's 8 * kRollThreads pixels and 8 more on each side (16-byte chunks).
template <class R>
inline constexpr int kRollRowPixels = 8 * register_tuning::kRollThreads + 16;

/// Queues the copy of image row y (any integer: wrapped, or zero outside a zero boundary) into
/// `dst`: chunk c holds image columns x0 + 8c .. + 7, x0 = the strip's first column - 8. The image
/// rows are a whole number of 16 bytes and the strip starts at a multiple of 8 pixels, so each
/// chunk lies wholly inside or wholly outside the image.
template <class R>
__device__ inline void roll_load_row(R* dst, const ConvArgs& c, long long y, long long x0) {
  static_assert(sizeof(R) == 2, "8 pixels per 16-byte chunk");
  const R* img = static_cast<const R*>(c.image);
  bool row_in = static_cast<unsigned long long>(y) < static_cast<unsigned long long>(c.rows);
  if (!row_in && c.circular) {
    y = wrap_near(y, c.rows);
    row_in = true;
  }
  constexpr int kChunks = kRollRowPixels<R> / 8;
  for (int k = static_cast<int>(threadIdx.x); k < kChunks; k += register_tuning::kRollThreads) {
    long long x = x0 + 8LL * k;
    bool in =
        row_in && static_cast<unsigned long long>(x) < static_cast<unsigned long long>(c.cols);
    if (row_in && !in && c.circular) {
      x = wrap_near(x, c.cols);
      in = true;
    }
    halfscope::kernels::cp_async16_fill(dst + 8 * k, in ? img + y * c.cols + x : img, in ? 16 : 0);
  }
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
  constexpr int kAhead = rt::kRollAhead, kRing = rt::kRollRing, kRow = kRollRowPixels<R>;
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
  HS_UNROLL
  for (int k = 0; k < kAhead; ++k) {
    if (k < ny) roll_load_row(ring + k * kRow, c, y0 + k, x0);
    halfscope::kernels::cp_async_commit();
  }
  using Sums = std::conditional_t<kHalf, __half2[4], float[8]>;
  Sums sums[KW];  // the row sums of band rows k - KW + 1 .. k, row k in slot k % KW
  unsigned overflow = 0;
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
        roll_load_row(ring + (k + kAhead) % kRing * kRow, c, y0 + k + kAhead, x0);
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
      unsigned bad;
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
        bad = static_cast<unsigned>(store_rows_half<8, 1>(a, acc, i, j0));
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
        bad = static_cast<unsigned>(store_rows<Prec, 8, 1>(a, acc, i, j0));
      }
      if (bad && j0 < c.out_cols) count_overflow<Prec, 8>(a, bad, i, j0, overflow);
    }
  }
  commit_overflow(overflow, c.overflow);
}

}  // namespace halfscope::conv::kernels
