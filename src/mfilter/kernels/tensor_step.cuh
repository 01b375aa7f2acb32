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
  /// Direct epilogues from the accumulators: per-channel steps whose group shares one moveout
  /// store CC, network steps add w * CC to the shared stack (step must be 1; the host clears it
  /// otherwise or when HALFSCOPE_MF_TENSOR_DIRECT=0).
  bool direct = false;
  /// The staged observation as 64-bit pairs (Tiling::kPairs): `pair_count` uint2 per part.
  bool pairs = false;
  std::int64_t pair_count = 0;
  /// Network mode (the stack lives in shared memory; see SharedLayout).
  bool network = false;
  /// bits of max |S| over each kSegment samples of each channel, (C, segs) (segment_max_kernel):
  /// a step's operand scale comes from the segments its staged samples lie in.
  const unsigned* seg_max = nullptr;
  std::int64_t segs = 0;
};

/// Samples per precomputed data maximum (KernelArgs::seg_max).
inline constexpr int kSegment = 256;
/// Floats a prefetched span may start before the element it is for (copy_span's `lead`), plus
/// the rounding of its 16-byte copies.
inline constexpr int kSpanPad = 4;

/// Byte offsets of the dynamic shared memory of one block; buffers marked [2] alternate
/// between the step computing and the step being prefetched.
/// `stage` holds the CC tile of the staged epilogue or, in network mode with direct (step 1)
/// epilogues, the block tile's stack itself; network mode with the staged epilogue keeps its stack
/// in a second area (`stack`).
struct SharedLayout {
  std::int64_t stage = 0, stack = 0, words = 0, raw = 0, inv = 0, mean = 0, colf = 0, colm = 0;
  std::int64_t frags = 0, total = 0;
  std::int64_t frag_bytes = 0;  // per buffer
  __host__ __device__ SharedLayout(const KernelArgs& a, int parts, bool full) {
    constexpr std::int64_t tile_bytes = std::int64_t{kTemplatesPerTile} * kStageStride * 4;
    stage = 0;
    stack = a.network && !a.direct ? stage + tile_bytes : stage;
    words = stack + tile_bytes;
    // Even / odd copies of 32-bit words, or (pairs) uint2 pairs[parts][pair_count].
    raw = words + (a.pairs ? parts * a.pair_count * 8 : 2 * parts * a.copy_stride * 4);
    inv = raw + 2 * (2 * a.words + kSpanPad) * 4;               // float inv[2][kTileLags + pad]
    mean = inv + 2 * (kTileLags + kSpanPad) * 4;                // float mean[2][kTileLags + pad]
    colf = mean + (full ? 2 * (kTileLags + kSpanPad) * 4 : 0);  // float colf[kTileLags]
    colm = colf + kTileLags * 4;                                // float colm[kTileLags]
    frags = colm + (full ? kTileLags * 4 : 0);                  // uint4 frags[2][chunks*parts*32]
    frag_bytes = a.chunks * parts * 32 * 16;
    total = frags + (a.frags_in_shared ? 2 * frag_bytes : 0);
  }
};

/// One step's metadata (written by warp 0, read by every thread after a barrier). In network
/// mode rf and rs hold w times the row factor and row sum: the epilogue adds w CC directly.
struct Slot {
  std::int64_t bid, c, u0, u_hi;
  std::int64_t group, i0;     // bid's template group and first correlation time
  int shift;                  // power-of-two scale of the staged samples (tile_shift)
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

/// Warp 0: the operand shift of the samples staged for window starts from u0 on channel c (the
/// largest precomputed segment maximum among the segments they lie in).
template <Operand O>
__device__ int tile_shift(const KernelArgs& a, std::int64_t c, std::int64_t u0) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t last = u0 + 2 * a.words < a.L ? u0 + 2 * a.words - 1 : a.L - 1;
  const std::int64_t s0 = u0 / kSegment, s1 = last / kSegment;
  unsigned m = 0;
  for (std::int64_t s = s0 + lane; s <= s1; s += 32) m = max(m, a.seg_max[c * a.segs + s]);
  m = __reduce_max_sync(0xffffffffu, m);
  return operand_shift<O>(__uint_as_float(m));
}

/// Warp 0: the step after `cur` (or the block's first step when `cur` is null) into `next`.
template <Operand O, bool kNetwork>
__device__ void find_next(const KernelArgs& a, std::int64_t ni, std::int64_t total, const Slot* cur,
                          Slot& next) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (cur != nullptr && cur->compute && cur->u0 + kTileLags <= cur->u_hi) {
    const int shift = tile_shift<O>(a, cur->c, cur->u0 + kTileLags);
    if (lane < kTemplatesPerTile) {
      next.mv[lane] = cur->mv[lane];
      next.w[lane] = cur->w[lane];
      next.rf[lane] = cur->rf[lane];
      next.rs[lane] = cur->rs[lane];
    }
    if (lane == 0) {
      next.bid = cur->bid, next.c = cur->c, next.u0 = cur->u0 + kTileLags;
      next.group = cur->group, next.i0 = cur->i0, next.shift = shift;
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
    const int shift = empty || skip ? 0 : tile_shift<O>(a, c, u_lo);
    if (lane < kTemplatesPerTile) {
      const float scale = kNetwork ? w : 1.0f;
      next.mv[lane] = mv;
      next.w[lane] = w;
      next.rf[lane] = a.row_factor[c * t_pad + t] * scale;
      next.rs[lane] = a.row_sum[c * t_pad + t] * scale;
    }
    if (lane == 0) {
      next.bid = bid, next.c = c, next.u0 = u_lo, next.u_hi = u_hi;
      next.group = group, next.i0 = i0, next.shift = shift;
      next.valid = 1, next.compute = !empty && !skip, next.first = 1, next.edge = edge;
      next.uniform = lo == hi;
    }
    return;
  }
}

/// Floats between the 16-byte boundary at or before p and p (0..3).
__device__ __forceinline__ int lead_of(const float* p) {
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(p) / 4) & 3);
}

/// All threads: asynchronous copy of row[from - lead .. from + n) to dst[0 .. lead + n) in aligned
/// 16-byte pieces, lead = lead_of(row + from), so element from + j lands at dst[lead + j]. Pieces
/// that cross either end of row[0 .. len) go element by element, zero outside it (never read).
/// dst holds n + kSpanPad floats (n a multiple of 4).
template <int kThreads>
__device__ void copy_span(float* dst, const float* row, std::int64_t from, std::int64_t len, int n,
                          const float* any) {
  const int lead = lead_of(row + from);
  const std::int64_t at0 = from - lead;
  const int pieces = (lead + n + 3) / 4;
  // Pieces [k_lo, k_hi) lie inside row[0, len): bounds in 64 bits once, 32-bit tests per piece.
  const std::int64_t lo = at0 >= 0 ? 0 : (3 - at0) / 4, hi = len - at0 >= 4 ? (len - at0) / 4 : 0;
  const int k_lo = static_cast<int>(lo < pieces ? lo : pieces);
  const int k_hi = static_cast<int>(hi < k_lo ? k_lo : (hi < pieces ? hi : pieces));
  const float* inner = k_hi > k_lo ? row + at0 + 4 * k_lo : row;
  for (int k = static_cast<int>(threadIdx.x); k < pieces; k += kThreads) {
    const std::int64_t at = at0 + 4 * k;
    if (k >= k_lo && k < k_hi) {
      cp_async16(dst + 4 * k, inner + 4 * (k - k_lo));
    } else {
      for (int e = 0; e < 4; ++e) {
        const bool in = at + e >= 0 && at + e < len;
        cp_async4(dst + 4 * k + e, in ? row + at + e : any, in ? 4 : 0);
      }
    }
  }
}

/// A step's prefetched spans in buffer b, each advanced by its lead (copy_span).
struct StepSpans {
  const float* raw;   // samples from u0 (zero past the channel)
  const float* inv;   // inverse norms from window u0 (zero past the windows)
  const float* mean;  // window means (full normalization) or null
  __device__ StepSpans(const KernelArgs& a, const Slot& s, int b, const unsigned char* smem,
                       const SharedLayout& lay) {
    const std::int64_t nsamp = 2 * a.words, row = s.c * a.windows + s.u0;
    raw = reinterpret_cast<const float*>(smem + lay.raw) + b * (nsamp + kSpanPad) +
          lead_of(a.data + s.c * a.L + s.u0);
    inv = reinterpret_cast<const float*>(smem + lay.inv) + b * (kTileLags + kSpanPad) +
          lead_of(a.inv_norm + row);
    mean = a.mean == nullptr ? nullptr
                             : reinterpret_cast<const float*>(smem + lay.mean) +
                                   b * (kTileLags + kSpanPad) + lead_of(a.mean + row);
  }
};

/// All threads: asynchronous copies of a step's inputs into buffer `b` (one commit group).
template <int kParts, int kThreads>
__device__ void prefetch(const KernelArgs& a, const Slot& s, int b, unsigned char* smem,
                         const SharedLayout& lay, std::int64_t group) {
  const int nsamp = static_cast<int>(2 * a.words);
  copy_span<kThreads>(reinterpret_cast<float*>(smem + lay.raw) + b * (nsamp + kSpanPad),
                      a.data + s.c * a.L, s.u0, a.L, nsamp, a.data);
  const std::int64_t span = kTileLags + kSpanPad;
  copy_span<kThreads>(reinterpret_cast<float*>(smem + lay.inv) + b * span,
                      a.inv_norm + s.c * a.windows, s.u0, a.windows, kTileLags, a.inv_norm);
  if (a.mean != nullptr)
    copy_span<kThreads>(reinterpret_cast<float*>(smem + lay.mean) + b * span,
                        a.mean + s.c * a.windows, s.u0, a.windows, kTileLags, a.mean);
  if (a.frags_in_shared) {
    const int n = static_cast<int>(a.chunks * kParts * 32);
    uint4* dst = reinterpret_cast<uint4*>(smem + lay.frags) + b * n;
    const uint4* src = a.frags + (s.c * a.groups + group) * n;
    for (int j = static_cast<int>(threadIdx.x); j < n; j += kThreads) cp_async16(dst + j, src + j);
  }
  cp_async_commit();
}

/// All threads, before a barrier: the epilogue's column factors of a step, colf[j] = inv[j]
/// 2^-shift (the tile's operand scale undone) and, in full normalization, colm[j] = mean[j] inv[j].
template <int kThreads>
__device__ void column_factors(const StepSpans& sp, int shift, float* colf, float* colm) {
  const float unscale = pow2_or_zero(-shift);
  for (int j = static_cast<int>(threadIdx.x); j < kTileLags; j += kThreads) {
    const float v = sp.inv[j];
    colf[j] = times_pow2(v, unscale, -shift);
    if (sp.mean != nullptr) colm[j] = sp.mean[j] * v;
  }
}

}  // namespace halfscope::mfilter::tensor
