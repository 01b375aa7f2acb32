// The work schedule of the tensor-core matched filter: persistent blocks walk a sequence of
// steps (block tile, channel, tile of window starts) and resolve and prefetch step k + 1 while
// step k computes, so the global-memory latency of the metadata, the observation tile, the
// inverse norms and the template fragments is hidden behind the tensor-core work.
#pragma once

#include <cstdint>

#include "mfilter/kernels/tensor_operand.cuh"
#include "mfilter/kernels/tensor_tuning.hpp"

namespace halfscope::mfilter::tensor {

/// Everything the main kernel reads; sizes 64-bit.
struct KernelArgs {
  const float* data = nullptr;                 // (C, L)
  const uint4* frags = nullptr;                // prepare_templates_kernel layout
  const float* row_factor = nullptr;           // (C, T_pad)
  const float* row_sum = nullptr;              // (C, T_pad), full normalization
  const float* inv_norm = nullptr;             // (C, windows), window_stats_cuda
  const float* mean = nullptr;                 // (C, windows) or null (short)
  const std::int64_t* moveouts = nullptr;      // (T, C)
  const float* weights = nullptr;              // (T, C)
  const unsigned long long* spread = nullptr;  // moveout_spread_kernel
  float* out = nullptr;
  int* bad = nullptr;  // count of non-finite operands
  std::int64_t T = 0, C = 0, L = 0, step = 1, n_corr = 0, windows = 0;
  std::int64_t groups = 0, chunks = 0;  // chunks = ceil(K / 16)
  std::int64_t words = 0;               // 32-bit words per staged copy
  std::int64_t copy_stride = 0;         // words between the staged copies
  bool frags_in_shared = true;          // template fragments staged per step (else read via L1)
  /// Per-channel steps whose group shares one moveout store CC straight from the accumulators
  /// (step must be 1; the host clears it otherwise or when HALFSCOPE_MF_TENSOR_DIRECT=0).
  bool direct = false;
  /// The staged observation as 64-bit pairs (Tiling::kPairs): `pair_count` uint2 per part.
  bool pairs = false;
  std::int64_t pair_count = 0;
};

/// Byte offsets of the dynamic shared memory of one block; buffers marked [2] alternate
/// between the step computing and the step being prefetched.
struct SharedLayout {
  std::int64_t stage = 0, words = 0, raw = 0, inv = 0, mean = 0, frags = 0, total = 0;
  std::int64_t frag_bytes = 0;  // per buffer
  __host__ __device__ SharedLayout(const KernelArgs& a, int parts, bool full) {
    stage = 0;
    words = stage + static_cast<std::int64_t>(kTemplatesPerTile) * kStageStride * 4;
    // Even / odd copies of 32-bit words, or (pairs) uint2 pairs[parts][pair_count].
    raw = words + (a.pairs ? parts * a.pair_count * 8 : 2 * parts * a.copy_stride * 4);
    inv = raw + 2 * (2 * a.words) * 4;              // float inv[2][kTileLags]
    mean = inv + 2 * kTileLags * 4;                 // float mean[2][kTileLags]
    frags = mean + (full ? 2 * kTileLags * 4 : 0);  // uint4 frags[2][chunks*parts*32]
    frag_bytes = a.chunks * parts * 32 * 16;
    total = frags + (a.frags_in_shared ? 2 * frag_bytes : 0);
  }
};

/// One step's metadata (written by warp 0, read by every thread after a barrier).
struct Slot {
  std::int64_t bid, c, u0, u_hi;
  int valid, compute, first;  // compute 0: per-channel zero pass only (no window in the data)
  int edge;                   // some window of this (tile, channel) lies outside the data
  int uniform;                // every real template of the group has the same moveout here
  std::int64_t mv[kTemplatesPerTile];
  float w[kTemplatesPerTile], rf[kTemplatesPerTile], rs[kTemplatesPerTile];
};

/// Correlation times per block tile: the 512 window starts of one tile must also cover the
/// moveout spread of a group, so tiles shrink by it (down to 64); larger spreads use several
/// tiles of window starts per channel.
__device__ inline std::int64_t tile_outputs(const KernelArgs& a) {
  const auto spread = static_cast<std::int64_t>(*a.spread);
  return spread <= kTileLags - 64 ? kTileLags - spread : kTileLags;
}

/// Warp 0: the step after `cur` (or the block's first step when `cur` is null) into `next`.
template <bool kNetwork>
__device__ void find_next(const KernelArgs& a, std::int64_t ni, std::int64_t total, const Slot* cur,
                          Slot& next) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (cur != nullptr && cur->compute && cur->u0 + kTileLags <= cur->u_hi) {
    if (lane < kTemplatesPerTile) {
      next.mv[lane] = cur->mv[lane];
      next.w[lane] = cur->w[lane];
      next.rf[lane] = cur->rf[lane];
      next.rs[lane] = cur->rs[lane];
    }
    if (lane == 0) {
      next.bid = cur->bid, next.c = cur->c, next.u0 = cur->u0 + kTileLags;
      next.u_hi = cur->u_hi, next.valid = 1, next.compute = 1, next.first = 0;
      next.edge = cur->edge, next.uniform = cur->uniform;
    }
    return;
  }
  std::int64_t bid = cur != nullptr ? cur->bid : blockIdx.x;
  std::int64_t c = cur != nullptr ? cur->c + 1 : 0;
  const std::int64_t t_pad = a.groups * kTemplatesPerTile;
  bool emitted = cur != nullptr;  // the block tile `bid` already has a step
  for (;; ++c) {
    if (c >= a.C) c = 0, bid += gridDim.x, emitted = false;
    if (bid >= total) {
      if (lane == 0) next.valid = 0;
      return;
    }
    const std::int64_t group = bid % a.groups, i0 = (bid / a.groups) * ni;
    const std::int64_t t = group * kTemplatesPerTile + lane % kTemplatesPerTile;
    const bool real = lane < kTemplatesPerTile && t < a.T;
    const std::int64_t mv = real ? a.moveouts[t * a.C + c] : 0;
    const float w = real ? a.weights[t * a.C + c] : 0.0f;
    std::int64_t lo = real ? mv : INT64_MAX, hi = real ? mv : INT64_MIN;
    for (int o = 16; o > 0; o /= 2) {
      const std::int64_t l2 = __shfl_xor_sync(0xffffffffu, lo, o);
      const std::int64_t h2 = __shfl_xor_sync(0xffffffffu, hi, o);
      lo = l2 < lo ? l2 : lo;
      hi = h2 > hi ? h2 : hi;
    }
    const bool any_weight = __any_sync(0xffffffffu, real && w != 0.0f);
    const std::int64_t i_last = (i0 + ni < a.n_corr ? i0 + ni : a.n_corr) - 1;
    std::int64_t u_lo = i0 * a.step + lo, u_hi = i_last * a.step + hi;
    const bool edge = u_lo < 0 || u_hi > a.windows - 1;
    u_lo = u_lo > 0 ? u_lo : 0;
    u_hi = u_hi < a.windows - 1 ? u_hi : a.windows - 1;
    const bool empty = u_lo > u_hi;
    // A network step needs a weight and a window in the data, except that every block tile gets
    // at least one step (its stack, maybe all zeros, is written when the tile changes);
    // per-channel mode visits every channel (an empty one still writes its zeros).
    const bool skip = kNetwork && (empty || !any_weight);
    if (skip && (emitted || c != a.C - 1)) continue;
    if (lane < kTemplatesPerTile) {
      next.mv[lane] = mv;
      next.w[lane] = w;
      next.rf[lane] = a.row_factor[c * t_pad + t];
      next.rs[lane] = a.row_sum[c * t_pad + t];
    }
    if (lane == 0) {
      next.bid = bid, next.c = c, next.u0 = u_lo, next.u_hi = u_hi;
      next.valid = 1, next.compute = !empty && !skip, next.first = 1, next.edge = edge;
      next.uniform = lo == hi;
    }
    return;
  }
}

/// All threads: asynchronous copies of a step's inputs into buffer `b` (one commit group).
template <int kParts, int kThreads>
__device__ void prefetch(const KernelArgs& a, const Slot& s, int b, unsigned char* smem,
                         const SharedLayout& lay, std::int64_t group) {
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t nsamp = 2 * a.words;
  float* raw = reinterpret_cast<float*>(smem + lay.raw) + b * nsamp;
  const float* x = a.data + s.c * a.L;
  for (std::int64_t j = tid; j < nsamp; j += kThreads) {
    const bool in = s.u0 + j < a.L;
    cp_async4(raw + j, in ? x + s.u0 + j : x, in ? 4 : 0);
  }
  float* inv = reinterpret_cast<float*>(smem + lay.inv) + b * kTileLags;
  float* mean = reinterpret_cast<float*>(smem + lay.mean) + b * kTileLags;
  const std::int64_t row = s.c * a.windows + s.u0;
  for (int j = tid; j < kTileLags; j += kThreads) {
    const bool in = s.u0 + j < a.windows;
    cp_async4(inv + j, in ? a.inv_norm + row + j : a.inv_norm, in ? 4 : 0);
    if (a.mean != nullptr) cp_async4(mean + j, in ? a.mean + row + j : a.mean, in ? 4 : 0);
  }
  if (a.frags_in_shared) {
    const std::int64_t n = a.chunks * kParts * 32;
    uint4* dst = reinterpret_cast<uint4*>(smem + lay.frags) + b * n;
    const uint4* src = a.frags + (s.c * a.groups + group) * n;
    for (std::int64_t j = tid; j < n; j += kThreads) cp_async16(dst + j, src + j);
  }
  cp_async_commit();
}

}  // namespace halfscope::mfilter::tensor
