// The streaming register kernel (odd square kernels of width KW <= register_tuning::
// kStreamMaxWidth, 16-byte aligned rows): PRCF with no shared memory. Each thread owns 8
// consecutive outputs of Q rows, issues the 16- and 8-byte global loads of all Q + KW - 1 input
// rows of its window before using any of them (the window is kept as raw storage words, so an
// FP16 row costs 6-8 registers), then converts each row once and adds it into every accumulator
// it touches with the taps as constant-memory operands. Neighbouring threads' halo columns and
// rows come from L1 / L2; device memory sees each pixel about once.
//
// Why not the staged tile kernel for these widths: with 3-7 taps per row the kernel is memory-
// bound, and staging through shared memory puts a barrier between every block's loads and its
// arithmetic. Here a thread's loads are all in flight at once and nothing waits on a barrier.
// Prototype on an H100 (bench/prototypes/conv_stream.cu, 4096^2, kernel time against a device
// copy of the same bytes): FP32 3x3 and 5x5 at 92-95 %, FP16 3x3 at 97 % (half) / 92 % (mixed).
// In the library FP32 3x3 matches it (8192^2: 203 us against 204) and replaced the tile kernel
// there; the FP16 and wider instances are still slower than the tile kernel (more registers for
// the edge and overflow code, so fewer bytes in flight; docs/performance.md), so register_run
// does not take them yet (register_tuning::stream_preferred). Included from register.cuh only.
#pragma once

namespace halfscope::conv::kernels {

/// The window of a thread's 8 outputs: LEAD = KW - 1 - col0 columns of the kernel reach left of
/// its first output (KW - 1 for `full`, KW / 2 for `same`, 0 for `valid`); the window holds whole
/// 4-pixel chunks, from column j0 - lead_a to j0 + 8 + trail_a.
template <class R, int KW, int LEAD>
struct StreamWindow {
  static constexpr int kLead = (LEAD + 3) / 4 * 4;
  static constexpr int kTrail = (KW - 1 - LEAD + 3) / 4 * 4;
  static constexpr int kPixels = kLead + 8 + kTrail;
  static constexpr int kWords = kPixels * static_cast<int>(sizeof(R)) / 4;
  /// Pixels between the window's first column and output 0's last tap (accumulate_row's SHIFT).
  static constexpr int kShift = kLead - LEAD;
};

/// Loads E pixels (4 or 8) from p, 8- or 16-byte aligned, into raw words w[0 .. E * sizeof(R) / 4).
template <class R, int E>
__device__ inline void load_pixels(const R* p, unsigned* w) {
  constexpr int bytes = E * static_cast<int>(sizeof(R));
  if constexpr (bytes == 8) {
    const uint2 t = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = t.x;
    w[1] = t.y;
  } else {
    HS_UNROLL
    for (int n = 0; n < bytes / 16; ++n) {
      const uint4 t = __ldg(reinterpret_cast<const uint4*>(p) + n);
      w[4 * n] = t.x;
      w[4 * n + 1] = t.y;
      w[4 * n + 2] = t.z;
      w[4 * n + 3] = t.w;
    }
  }
}

/// One row of the window, all inside the image: at most 3 vector loads (lead, own 8, trail).
template <class R, class Win>
__device__ inline void load_window_row(const R* row, unsigned (&w)[Win::kWords]) {
  constexpr int wpp = static_cast<int>(sizeof(R));  // bytes per pixel
  if constexpr (Win::kLead > 0) load_pixels<R, Win::kLead>(row - Win::kLead, w);
  load_pixels<R, 8>(row, w + Win::kLead * wpp / 4);
  if constexpr (Win::kTrail > 0)
    load_pixels<R, Win::kTrail>(row + 8, w + (Win::kLead + 8) * wpp / 4);
}

/// x mod n for a column or row at most one image beyond an edge (the usual case), else the full
/// modulo (kernels larger than the image).
__device__ inline long long wrap_near(long long x, long long n) {
  if (x < 0)
    x += n;
  else if (x >= n)
    x -= n;
  return static_cast<unsigned long long>(x) < static_cast<unsigned long long>(n) ? x
                                                                                 : wrap_index(x, n);
}

/// One row of the window where the thread's window crosses an image edge: the row wrapped or
/// zero as the boundary says, then per 4-pixel chunk a vector load where the chunk is inside the
/// image and pixel by pixel only where it is not (one chunk per edge thread, so the warp that
/// holds an image edge diverges for a few loads, not for the whole window).
template <class R, class Win>
__device__ inline void load_window_row_edge(const ConvArgs& c, long long y, long long x0,
                                            unsigned (&w)[Win::kWords]) {
  constexpr int wpc = 4 * static_cast<int>(sizeof(R)) / 4;  // words per chunk
  const bool circular = c.circular != 0;
  if (static_cast<unsigned long long>(y) >= static_cast<unsigned long long>(c.rows)) {
    if (!circular) {
      HS_UNROLL
      for (int e = 0; e < Win::kWords; ++e) w[e] = 0u;
      return;
    }
    y = wrap_near(y, c.rows);
  }
  const R* row = static_cast<const R*>(c.image) + y * c.cols;
  HS_UNROLL
  for (int k = 0; k < Win::kPixels / 4; ++k) {
    const long long xc = x0 + 4 * k;
    if (xc >= 0 && xc + 4 <= c.cols) {
      load_pixels<R, 4>(row + xc, w + k * wpc);
      continue;
    }
    R v[4];
    HS_UNROLL
    for (int e = 0; e < 4; ++e) {
      long long x = xc + e;
      const bool inside =
          static_cast<unsigned long long>(x) < static_cast<unsigned long long>(c.cols);
      if (!inside && circular) x = wrap_near(x, c.cols);
      v[e] = inside || circular ? __ldg(row + x) : R(0);
    }
    if constexpr (sizeof(R) == 4) {
      HS_UNROLL
      for (int e = 0; e < 4; ++e) w[k * wpc + e] = v[e];
    } else {
      w[k * wpc] = static_cast<unsigned>(v[0]) | (static_cast<unsigned>(v[1]) << 16);
      w[k * wpc + 1] = static_cast<unsigned>(v[2]) | (static_cast<unsigned>(v[3]) << 16);
    }
  }
}

/// Block: kStreamThreads threads along a row, 8 outputs each; grid.x walks column spans, grid.y
/// groups of Q rows (looping beyond 65535).
template <class Prec, int KW, int LEAD, int Q, int MINB>
__global__ void __launch_bounds__(register_tuning::kStreamThreads, MINB)
    register_stream_kernel(const RegArgs a) {
  using R = typename Prec::R;
  using Win = StreamWindow<R, KW, LEAD>;
  constexpr int RW = Q + KW - 1;  // input rows per thread
  const ConvArgs& c = a.c;
  const long long j0 = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  const long long x0 =
      j0 - Win::kLead;  // first window column, j0 + col0 - (KW - 1) - (kLead - LEAD)
  const bool cols_inside = x0 >= 0 && x0 + Win::kPixels <= c.cols;
  unsigned overflow = 0;
  for (long long g = blockIdx.y; g * Q < c.out_rows; g += gridDim.y) {
    if (j0 >= c.out_cols) break;
    const long long i0 = g * Q;
    const long long y0 = i0 + c.row0 - (KW - 1);  // input row of window row 0
    unsigned win[RW][Win::kWords];
    if (cols_inside && y0 >= 0 && y0 + RW <= c.rows) {
      const R* row = static_cast<const R*>(c.image) + y0 * c.cols + j0;
      HS_UNROLL
      for (int r = 0; r < RW; ++r) load_window_row<R, Win>(row + r * c.cols, win[r]);
    } else {
      HS_UNROLL
      for (int r = 0; r < RW; ++r) load_window_row_edge<R, Win>(c, y0 + r, x0, win[r]);
    }
    unsigned long long bad = 0;
    if constexpr (std::is_same_v<Prec, PrecHalf>) {
      __half2 acc[Q][4];
      HS_UNROLL
      for (int q = 0; q < Q; ++q) {
        HS_UNROLL
        for (int m = 0; m < 4; ++m) acc[q][m] = __half2half2(__ushort_as_half(0));
      }
      HS_UNROLL
      for (int r = RW - 1; r >= 0; --r)  // bottom-up: taps (u, v) ascending per output
        accumulate_row_half<KW, 8, Q, Win::kShift>(a, win[r], r, acc);
      bad = store_rows_half<8, Q>(a, acc, i0, j0);
    } else {
      float acc[Q][8];
      HS_UNROLL
      for (int q = 0; q < Q; ++q) {
        HS_UNROLL
        for (int p = 0; p < 8; ++p) acc[q][p] = 0.0f;
      }
      HS_UNROLL
      for (int r = RW - 1; r >= 0; --r)
        accumulate_row<Prec, KW, 8, Q, Win::kShift>(a, win[r], r, acc);
      bad = store_rows<Prec, 8, Q>(a, acc, i0, j0);
    }
    if constexpr (Prec::kNarrow)
      if (bad) count_overflow<Prec, 8>(a, bad, i0, j0, overflow);
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.c.overflow);
}

}  // namespace halfscope::conv::kernels
