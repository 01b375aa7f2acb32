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
// register_run takes it for widths 3-7 on aligned rows, where it beats the tile kernel in every
// precision. NVIDIA H200, kernel alone against a device copy of the same bytes (8192^2, sweep of
// docs/performance.md): FP32 3x3 / 5x5 90 / 87 %, half 3x3 / 5x5 / 7x7 88 / 69 / 46 %, mixed
// 82 / 59 / 33 % (7x7 mixed is bound by its 49 FP32 FMAs per output, not by memory). The edge
// path loads whole 4-pixel chunks: an earlier per-pixel edge path had pushed the FP16 instances
// to 142 registers and spills, which made them slower than the tile kernel.
//
// Rank-one mode (SEP, what separable_cuda runs for a rank-one kernel of these widths): the same
// window and stores, but each window row is reduced once to 8 row sums with the row taps, which
// the column taps then add into the outputs (accumulate_row_separable): 24.5 instead of 49
// multiply-adds per output at 7x7, Q = 4. H100, 8192^2, whole calls: half 7x7 0.160 -> 0.128 ms
// (70 % of the copy ceiling, with Q = 8), mixed 7x7 0.220 -> 0.154 ms.
// Included from register.cuh only.
#pragma once

namespace halfscope::conv::kernels {

static_assert(register_tuning::kStreamMaxWidth <= SepTaps::kMaxWidth);

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

/// Where a window that crosses an image edge reads its columns. The image rows are 16-byte
/// aligned and a whole number of 16 bytes (dispatch_stream), so cols is a multiple of 4 pixels,
/// and the window starts at a multiple of 4: every 4-pixel chunk lies wholly inside or wholly
/// outside the image. A chunk outside reads its wrapped place (circular) or column 0 and is then
/// zeroed (zero boundary), so every load is unconditional and from inside the image.
template <class Win>
struct EdgeColumns {
  static constexpr int kChunks = Win::kPixels / 4;
  long long x[kChunks];  // first image column each chunk reads
  unsigned zero = 0;     // bit k: chunk k is outside a zero boundary
};

template <class Win>
__device__ inline EdgeColumns<Win> edge_columns(const ConvArgs& c, long long x0) {
  EdgeColumns<Win> e;
  HS_UNROLL
  for (int k = 0; k < EdgeColumns<Win>::kChunks; ++k) {
    const long long xc = x0 + 4 * k;
    const bool inside =
        static_cast<unsigned long long>(xc) < static_cast<unsigned long long>(c.cols);
    if (c.circular)
      e.x[k] = inside ? xc : wrap_near(xc, c.cols);
    else
      e.x[k] = inside ? xc : 0;
    if (!inside && !c.circular) e.zero |= 1u << k;
  }
  return e;
}

/// One row of a window that crosses an image edge: the row wrapped or, outside a zero boundary,
/// row 0 zeroed, then one vector load per 4-pixel chunk as edge_columns says. The per-pixel edge
/// code this replaced held the FP16 3x3 kernel at 142 registers (76 without it) and spilled
/// under its launch bounds.
template <class R, class Win>
__device__ inline void load_window_row_edge(const ConvArgs& c, long long y,
                                            const EdgeColumns<Win>& e, unsigned (&w)[Win::kWords]) {
  constexpr int wpc = static_cast<int>(sizeof(R));  // words per 4-pixel chunk
  unsigned zero = e.zero;
  if (static_cast<unsigned long long>(y) >= static_cast<unsigned long long>(c.rows)) {
    if (c.circular) {
      y = wrap_near(y, c.rows);
    } else {
      y = 0;
      zero = ~0u;
    }
  }
  const R* row = static_cast<const R*>(c.image) + y * c.cols;
  HS_UNROLL
  for (int k = 0; k < EdgeColumns<Win>::kChunks; ++k) {
    load_pixels<R, 4>(row + e.x[k], w + k * wpc);
    if (zero >> k & 1u) {
      HS_UNROLL
      for (int n = 0; n < wpc; ++n) w[k * wpc + n] = 0u;
    }
  }
}

/// Block: kStreamThreads threads along a row, 8 outputs each; grid.x walks column spans, grid.y
/// groups of Q rows (looping beyond 65535). SEP: a rank-one kernel given by its factors `sep`
/// (accumulate_row_separable), else the taps in c_reg_kernel.
template <class Prec, int KW, int LEAD, int Q, int MINB, bool SEP = false>
__global__ void __launch_bounds__(register_tuning::kStreamThreads, MINB)
    register_stream_kernel(const RegArgs a, const SepTaps sep) {
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
      const auto cols_at = edge_columns<Win>(c, x0);
      HS_UNROLL
      for (int r = 0; r < RW; ++r) load_window_row_edge<R, Win>(c, y0 + r, cols_at, win[r]);
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
      for (int r = RW - 1; r >= 0; --r) {  // bottom-up: taps (u, v) ascending per output
        if constexpr (SEP)
          accumulate_row_separable_half<KW, 8, Q, Win::kShift>(sep, win[r], r, acc);
        else
          accumulate_row_half<KW, 8, Q, Win::kShift>(a, win[r], r, acc);
      }
      bad = store_rows_half<8, Q>(a, acc, i0, j0);
    } else {
      float acc[Q][8];
      HS_UNROLL
      for (int q = 0; q < Q; ++q) {
        HS_UNROLL
        for (int p = 0; p < 8; ++p) acc[q][p] = 0.0f;
      }
      HS_UNROLL
      for (int r = RW - 1; r >= 0; --r) {
        if constexpr (SEP)
          accumulate_row_separable<Prec, KW, 8, Q, Win::kShift>(sep, win[r], r, acc);
        else
          accumulate_row<Prec, KW, 8, Q, Win::kShift>(a, win[r], r, acc);
      }
      bad = store_rows<Prec, 8, Q>(a, acc, i0, j0);
    }
    if constexpr (Prec::kNarrow)
      if (bad) count_overflow<Prec, 8>(a, bad, i0, j0, overflow);
  }
  if constexpr (Prec::kNarrow) commit_overflow(overflow, a.c.overflow);
}

}  // namespace halfscope::conv::kernels
