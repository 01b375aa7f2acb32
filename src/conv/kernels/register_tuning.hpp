// Tuning constants of the register-blocked (PRCF) convolution, in one place.
//
// How they were chosen: by the resource arithmetic below, on the H100/H200 numbers of
// docs/performance.md's ceilings (132 SMs, 64K registers and 228 KB shared memory per SM, FMA
// issue 4 warp-instructions per clock per SM), not yet by a measured sweep -- no GPU was at hand
// when they were written. `halfscope bench conv` is the place to revisit them; the kernels take
// every value here as a template or launch parameter, so a change needs no other edit.
#pragma once

namespace halfscope::conv::register_tuning {

/// Odd square kernels up to this width get a fully unrolled kernel (taps as immediate constant-
/// bank operands of the FMAs); anything else (even, non-square, wider) runs the generic kernel.
/// 31 covers the brief's "odd widths 3..31"; compile time stays bounded by kUnrollBudget.
inline constexpr int kMaxTemplateWidth = 31;

/// P of PRCF: adjacent outputs of one row per thread. 8 makes one thread's outputs one 16-byte
/// store in FP16 (two in FP32), and its shared-memory window a whole number of 16-byte loads.
inline constexpr int kPacket = 8;

/// Threads along a row of a block tile: one warp, so a warp's window reads are one contiguous,
/// conflict-free span of shared memory. Narrow outputs shrink it (down to kMinThreadsX).
inline constexpr int kThreadsX = 32;
inline constexpr int kMinThreadsX = 8;

/// Multiply-adds one unrolled instantiation may contain (Q * KW^2 * P; an FP16 HFMA2 counts as
/// two). Beyond about this size nvcc stops unrolling the row loop (seen in the SASS: the taps then
/// need an LDC each instead of being constant-bank operands) and ptxas time grows; 8192 keeps
/// every instantiation fully unrolled and the slowest (KW = 31) to a few seconds of ptxas.
inline constexpr int kUnrollBudget = 8192;

/// Q: output rows per thread (a 2-D register tile P x Q, PRCF's horizontal packet stacked Q
/// times). Input rows are read and converted once per Q outputs instead of once per output, so
/// shared-memory reads and conversions per output fall as (Q + KW - 1) / Q. Largest power of two
/// that fits kUnrollBudget and at most 8 rows (64 FP32 accumulators) for KW <= 7, where the
/// per-row overhead matters most, else 4 (8 with packed FP16: two outputs per register).
constexpr int tile_rows_per_thread(int kw, bool packed_half) {
  const int fmas_per_row = kw * kw * kPacket;
  int q = (packed_half || kw <= 7) ? 8 : 4;
  while (q > 1 && q * fmas_per_row > kUnrollBudget) q /= 2;
  return q;
}

/// Launch bounds of the tile kernel: at most kTileThreads threads (32 x kMaxThreadsY) and a
/// register budget that keeps tile_min_blocks blocks resident per SM: 4 (<= 128 registers, 16
/// warps) for KW <= 5, which are memory-bound and need loads in flight; 3 (<= 168 registers) from
/// KW = 7, where the taps ptxas keeps in registers (49 for FP16 7x7), the accumulators and a
/// staging batch no longer fit 128 without spilling. With only the thread bound, ptxas assumed
/// 2-3 blocks of 256 threads and spilled at 80 or 128 registers.
inline constexpr int kTileThreads = 128;
constexpr int tile_min_blocks(int kw) {
  return kw <= 5 ? 4 : 3;
}

/// Thread rows per block (TY) at most (kTileThreads / 32); the host halves it while the grid has
/// fewer than kMinBlocksPerSm blocks per SM (small images), down to 1. 4 x 32 = 128 threads keep
/// the tile's halo small (KW - 1 extra rows per 4*Q output rows) with several blocks per SM.
inline constexpr int kMaxThreadsY = 4;
static_assert(kThreadsX * kMaxThreadsY == kTileThreads);
inline constexpr int kMinBlocksPerSm = 2;

/// 16-byte global loads each thread issues before storing any of them into shared memory while
/// staging a tile: 4 x 16 B x 128 threads = 8 KB in flight per block, so two or three blocks per
/// SM in their staging phase cover the ~20 KB per SM that 3.35 TB/s at ~800 ns latency needs.
/// 8 was tried: its 32 staging registers pushed ptxas into spilling hundreds of bytes.
inline constexpr int kStageBatch = 4;

/// Generic kernel (runtime kernel size): P outputs per thread (16 for FP32/FP16, 8 for FP64 for
/// registers), Q rows, TY thread rows. Its inner chunk is P taps x P outputs x Q rows unrolled,
/// so the kernel index is one LDC per P multiply-adds; one shared-memory row per step keeps the
/// block small, and many resident blocks hide the two barriers per input row.
inline constexpr int kGenericPacket = 16;
inline constexpr int kGenericPacketDouble = 8;
inline constexpr int kGenericRows = 2;
inline constexpr int kGenericThreadsY = 4;
/// Launch bounds of the generic kernel: 32 x kGenericThreadsY threads, 3 blocks per SM (<= 168
/// registers: its 2 x 16 accumulators and 2 x 16-pixel window fit without spilling).
inline constexpr int kGenericThreads = 32 * kGenericThreadsY;
inline constexpr int kGenericMinBlocks = 3;

/// Streaming kernel (register_stream.cuh): odd square kernels up to kStreamMaxWidth with 16-byte
/// aligned rows, taken by register_run wherever it is built: on an NVIDIA H200 (2026-11-22) it
/// beat the tile kernel at every width 3-7 in every precision (4096^2 half 3x3 40.7 -> 25.6 us,
/// mixed 7x7 94 -> 64 us, FP32 5x5 78 -> 47 us per call). kStreamThreads threads of 8 outputs
/// along a row (fewer for narrow outputs, down to 32), Q = 4 output rows per thread, and the
/// blocks per SM its launch bounds ask for, from a sweep of the library kernel on that GPU (4096^2
/// and 8192^2, Q in {2, 4, 8}, 2-6 blocks, docs/performance.md): the register budget that keeps
/// the most warps resident without spilling wins, since the kernel waits on its loads.
inline constexpr int kStreamMaxWidth = 7;
inline constexpr int kStreamThreads = 128;
inline constexpr int kStreamMinThreads = 32;
inline constexpr int kStreamRows = 4;
/// Blocks per SM: FP16 arithmetic 5 / 5 / 4 at widths 3 / 5 / 7 (<= 102 / 102 / 128 registers),
/// FP32 arithmetic on FP16/BF16 storage 6 / 5 / 4, FP32 storage (twice the window registers)
/// 3 / 4 / 3 (7x7 spills 32 bytes there and is still 17 % faster than at 2 blocks).
constexpr int stream_min_blocks(int kw, bool fp32_arith_on_16bit, bool fp32_storage) {
  if (fp32_storage) return kw == 5 ? 4 : 3;
  if (kw <= 3) return fp32_arith_on_16bit ? 6 : 5;
  return kw == 5 ? 5 : 4;
}

/// The streaming kernel's rank-one mode (separable_cuda): output rows per thread. Half 7x7 takes 8
/// rows (each input row's row sums then serve 8 outputs, and the column halo is re-read less):
/// on an H100 at 8192^2, 0.145 -> 0.126 ms per call with kStreamSeparableTallMinBlocks blocks
/// per SM (162-168 registers, no spills); half 5x5 and mixed gained nothing (Q = 6 or 8: 5x5 half
/// 0.121 -> 0.128 ms, mixed 7x7 0.155 -> 0.158), so they keep kStreamRows.
constexpr int stream_separable_rows(int kw, bool half_arithmetic) {
  return half_arithmetic && kw == 7 ? 8 : kStreamRows;
}
inline constexpr int kStreamSeparableTallMinBlocks = 3;

/// Rolling kernel (register_roll.cuh): rank-one kernels of width 5 or 7 on FP16 / BF16 storage
/// (roll_rank_one). kRollThreads threads of 8 outputs span a block's column strip; input rows
/// stream into a ring of kRollRing shared-memory rows kRollAhead rows ahead of the one in use.
/// Rows per block: the image's rows cut so the grid has about kRollBlocksPerSm blocks per SM.
/// From a prototype sweep on an NVIDIA H200 (2026-11-23, 8192^2 and 4096^2, FP16 and mixed 3x3-
/// 7x7): 4 blocks per SM beat one full wave at the occupancy limit (5-9 per SM) by up to 10 % and
/// 2-3 per SM by 5-20 %; 3 rows ahead in a ring of 4 matched or beat 4-6 ahead in a ring of 8;
/// 256 threads gained nothing over 128.
inline constexpr int kRollThreads = 128;
inline constexpr int kRollAhead = 3;
inline constexpr int kRollRing = 4;
inline constexpr int kRollBlocksPerSm = 4;
inline constexpr int kRollMinRows = 8;  // rows per block at least (small images)
/// Where separable_cuda takes the rolling kernel instead of the streaming kernel's rank-one mode:
/// kernel alone (ncu), 8192^2, NVIDIA H200 (2026-11-23), rolling / streaming us: FP16 7x7 86 /
/// 98, mixed 7x7 89 / 127, mixed 5x5 88 / 94, but FP16 5x5 88 / 84, FP16 3x3 79 / 72 and mixed
/// 3x3 81 / 74 (the streaming kernel's loads are all in flight at once and its few taps cost
/// little: only from 5 taps with FP32 arithmetic, or 7, do its per-thread windows fall behind).
constexpr bool roll_rank_one(int kw, bool half_arithmetic) {
  return kw >= 7 || (kw == 5 && !half_arithmetic);
}

}  // namespace halfscope::conv::register_tuning
