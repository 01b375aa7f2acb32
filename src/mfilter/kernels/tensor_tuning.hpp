// Tuning constants of the tensor-core matched filter (kernels/tensor_mf.cuh), apart from the
// algorithm. Host and device code both read them.
//
// Chosen by arithmetic on Hopper's limits (docs/mfilter-tensor.md, "Tiling"): one mma m16n8k16
// (4096 flop) per SM clock is the FP16 dense peak and shared memory delivers 128 B per SM clock.
// A warp computes 16 templates x kWarpLags lags with the observation (Hankel) operand sliding in
// registers: per 16-sample k-chunk it loads 2 new 32-bit words per operand part and issues
// kWarpNBlocks mma, so the B side costs 16 B per mma; the template (A) fragment of the chunk is one
// 16-byte L1 load per lane shared by the same kWarpNBlocks mma (32 B per mma). With step = 1 the
// epilogue works from the accumulators (per-channel stores when a group shares its moveout;
// network additions to the shared stack); otherwise it stages the CC tile through shared memory
// (8 B per output) so every global store is a full 128-byte line and per-template moveouts are
// applied by a shifted read.
#pragma once

#include <cstdint>

namespace halfscope::mfilter::tensor {

inline constexpr int kTileLags = 512;         // window starts per block tile (GEMM N)
inline constexpr int kTemplatesPerTile = 16;  // mma M

/// How a block's 16 x 512 tile is cut among its warps. Two are built and measured
/// (docs/mfilter-tensor.md): Wide (4 warps x 128 lags: 64 accumulators per thread, ~170-250
/// registers, 2-3 blocks = 8-12 warps per SM) and Deep (8 warps x 64 lags: 32 accumulators,
/// <= 128 registers, 2 blocks = 16 warps per SM, more latency hidden behind the barriers).
///
/// Pairs = true stores the staged observation as 64-bit pairs (W[m], W[m + 1]) for every sample
/// offset, so each B operand is one aligned 64-bit register pair loaded from shared memory: no
/// register moves build the pairs from the sliding ring (twice the tile's shared memory).
template <int Warps, int NBlocks, bool Pairs = false>
struct Tiling {
  static constexpr int kWarps = Warps;
  static constexpr bool kPairs = Pairs;
  static constexpr int kThreads = 32 * Warps;
  /// 8-lag mma N blocks per warp.
  static constexpr int kWarpNBlocks = NBlocks;
  static constexpr int kWarpLags = NBlocks * 8;
  /// The observation words a warp keeps in registers: a window of kWarpNBlocks + 1 words
  /// slides by 2 per k-chunk, held in a ring of kRing registers; unrolling kRing / 2 chunks
  /// makes every ring index a compile-time constant.
  static constexpr int kRing = NBlocks + 2;
  static constexpr int kChunkUnroll = kRing / 2;
  /// Output columns per thread and row in the staged epilogue's output pass.
  static constexpr int kColsPerThread = kTileLags / kThreads;
  /// Blocks per SM the register allocation must allow (__launch_bounds__): Wide mixed / bf16
  /// fits 3 (<= 170 registers; -Xptxas -v: 174-176 unbounded, no spills at 170; split's 83 KB of
  /// shared memory allows only 2 anyway; the network stack lives in shared memory); Deep runs
  /// 2 x 8 warps (<= 128 registers).
  static constexpr int min_blocks(bool split) { return Warps == 4 && !split ? 3 : 2; }
  static_assert(Warps * NBlocks * 8 == kTileLags, "the warps cover the tile exactly");
  static_assert(kRing % 2 == 0, "the ring advances two words per chunk");
};
using TilingWide = Tiling<4, 16>;
using TilingDeep = Tiling<8, 8>;
using TilingWidePairs = Tiling<4, 16, true>;
using TilingDeepPairs = Tiling<8, 8, true>;

/// Row stride of the staged CC tile in floats: +8 keeps the float2 epilogue writes at the
/// minimum two shared-memory wavefronts per warp.
inline constexpr int kStageStride = kTileLags + 8;
/// Extra samples staged past the last window (sliding ring reads up to 14 past K rounded to 16).
inline constexpr int kTilePad = 32;
/// Largest step the kernel's 32-bit tile offsets allow (col * step <= 2^29).
inline constexpr std::int64_t kMaxStep = std::int64_t{1} << 20;
/// Shared memory one block may use (H100/H200 opt-in maximum is 227 KB).
inline constexpr std::int64_t kMaxSharedBytes = 200 * 1024;

}  // namespace halfscope::mfilter::tensor
