// Tuning constants of the tensor-core (banded Toeplitz) convolution, apart from the algorithm
// (tensor_block.hpp). Host and device code both read them.
//
// How they were chosen (by arithmetic on the H100's limits, not yet by measurement; see
// docs/conv-tensor.md "Tiling"): one MMA m16n8k16 (4096 flop) per SM clock is the FP16 tensor
// peak and shared memory delivers 128 B per SM clock. A warp tile of 4 x 4 MMA tiles (64 output
// columns x 32 output rows) reads (4 + Q - 1) 256-byte input fragments per 8 rows for 4 * Q MMAs,
// i.e. 100-160 B per MMA for Q = 5..2 band chunks, so shared memory keeps up with the tensor cores
// that mma.sync reaches on Hopper (~60 % of the dense peak). Four warps (2 x 2) make a 128 x 64
// block tile (128 x 32 for split): a 4096 x 4096 output is 2048 blocks, several waves on 132 SMs.
// The input rows stream through a ring of 128 (64) rows, 16 kernel rows (one "group") at a time.
#pragma once

namespace halfscope::conv::kernels {

inline constexpr int kTensorThreads = 128;  // 4 warps
inline constexpr int kTensorWarps = kTensorThreads / 32;
inline constexpr int kWarpColFrags = 4;  // 16 output columns each (MMA M)
inline constexpr int kWarpGridCols = 2;  // warps side by side along columns
inline constexpr int kBlockCols = kWarpGridCols * kWarpColFrags * 16;  // 128
/// 8-row fragments (MMA N) per warp: 4 for mixed and bf16 (64 FP32 accumulators per thread);
/// 2 for split, whose hi / lo fragments and per-row partial sums would otherwise exceed 255
/// registers and spill (measured with -Xptxas -v: 255 registers + spills at Q = 4, 5 with 4).
inline constexpr int kWarpRowFrags = 4;
inline constexpr int kWarpRowFragsSplit = 2;
inline constexpr int kRowGroup = 16;  // kernel rows per pipeline stage

/// Output rows of a block tile (two warps deep): 64, or 32 for split.
constexpr int tensor_block_rows(bool split) {
  return (kTensorWarps / kWarpGridCols) * (split ? kWarpRowFragsSplit : kWarpRowFrags) * 8;
}
/// Input rows held in the shared-memory ring (a power of two): rows in use while a group
/// computes (block rows + kRowGroup - 1) plus the next group's rows stored meanwhile (kRowGroup).
constexpr int tensor_ring_rows(bool split) {
  const int need = tensor_block_rows(split) + 2 * kRowGroup - 1;
  int r = 1;
  while (r < need) r *= 2;
  return r;
}

/// Blocks per SM the register allocation must allow (__launch_bounds__): mixed / bf16 fit in 128
/// registers (4 blocks, 16 warps per SM; measured: 127..136 registers unbounded, no spills at
/// 128); split needs ~170 (3 blocks; its hot loop has no spills at that bound).
constexpr int tensor_min_blocks_per_sm(bool split) {
  return split ? 3 : 4;
}

/// Band chunks Q per 16 output columns: a kernel-column chunk of width up to 16 Q - 15 needs Q
/// MMAs of K = 16 per output fragment. Q is a template parameter between these bounds; wider
/// kernels are cut into equal chunks of at most 16 * kMaxBandChunks - 15 = 65 columns.
inline constexpr int kMinBandChunks = 2;
inline constexpr int kMaxBandChunks = 5;
inline constexpr int kMaxChunkWidth = 16 * kMaxBandChunks - 15;

static_assert(tensor_ring_rows(false) == 128 && tensor_ring_rows(true) == 64);
static_assert(kRowGroup % kTensorWarps == 0, "each warp loads whole rows of a group");

}  // namespace halfscope::conv::kernels
