// Tensor-core matched filter (device code). One block tile: 16 templates (one group) x up to
// kTileLags correlation times, looping over channels; persistent blocks walk tiles and channels
// as a sequence of steps (tensor_step.cuh) with the next step's inputs prefetched. Per channel it
// computes the numerators P[t][u] = sum_k T[t,c,k] S[c, u + k] for a tile of kTileLags window
// starts u as a GEMM (M = 16 templates, N = window starts, K = samples), normalizes them to CC in
// registers and, when the group shares one moveout on the channel and step = 1 (the study's case),
// stores it straight from the accumulators; otherwise it stages the CC tile in shared memory and
// each output (t, i) reads the entry of its own window start s = i * step + moveout[t, c]:
// moveouts per template and step > 1 cost extra tiles, not another kernel. Network mode adds
// w[t, c] * CC into the block tile's stack in shared memory (straight from the accumulators when
// step = 1, else from the staged tile), so per-channel CC never reaches device memory;
// per-channel mode streams the staged tile out as full 128-byte lines. Tilings with kPairs stage
// the observation as 64-bit operand pairs (tensor_pairs.cuh).
//
// The GEMM (docs/mfilter-tensor.md): A = templates, FP16 / BF16 fragments prepared once per call
// (tensor_operand.cuh), staged per step in shared memory (or read through L1 for long templates)
// and loaded once per 16-sample k-chunk. B = the Hankel observation
// B[k][n] = S[u0 + n + k]; the m16n8k16 B fragment of lane (g = lane / 4, q = lane % 4) for
// n-block a and k-chunk p is the word pair W[a + 2p], W[a + 2p + 1] with
// W[m] = (S[8m + g + 2q], S[8m + g + 2q + 1]). Its alignment depends on g's parity only, so the
// tile is stored twice (pairs starting at even and at odd samples) and every read is one aligned
// 32-bit load; a warp keeps W[2p .. 2p + Tl::kWarpNBlocks] in a register ring and loads 2 new words
// per chunk and operand part (B(a, p) == B(a + 2, p - 1)).
//
// Scaling (differs from emulation.hpp's per-16-sample slices, see docs/mfilter-tensor.md): one
// power-of-two shift per template channel (its maximum) and one per staged data tile (its
// maximum), both folded into the FP32 epilogue factors, so no per-slice rescaling of partial
// products is needed. Rounding (RNE) and the hi + lo split are the contract's.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mfilter/kernels/tensor_operand.cuh"
#include "mfilter/kernels/tensor_pairs.cuh"
#include "mfilter/kernels/tensor_step.cuh"
#include "mfilter/kernels/tensor_tuning.hpp"

namespace halfscope::mfilter::tensor {

/// One warp's GEMM of a step: 16 templates x Tl::kWarpLags window starts, all k-chunks, from the
/// staged observation copies `words` and the template fragments `af` (lane's first uint4).
template <Operand O, class Tl>
__device__ __forceinline__ void warp_gemm(const KernelArgs& a, const std::uint32_t* words,
                                          const uint4* af, float (&acc)[Tl::kWarpNBlocks][4]) {
  constexpr int parts = kParts<O>;
  constexpr int nb = Tl::kWarpNBlocks;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int n = 0; n < nb; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const int first = warp * Tl::kWarpLags + g + 2 * q;  // sample of W[0]
  const std::uint32_t* wh = words + (g % 2 ? a.copy_stride : 0) + first / 2;
  const std::uint32_t* wl = wh + 2 * a.copy_stride;
  std::uint32_t rh[Tl::kRing], rl[Tl::kRing];
#pragma unroll
  for (int j = 0; j <= nb; ++j) {
    rh[j] = wh[4 * j];
    if constexpr (O == Operand::Split) rl[j] = wl[4 * j];
  }
  uint4 ah = af[0], al = parts > 1 ? af[32] : ah;
  const int chunks = static_cast<int>(a.chunks);
  for (int p0 = 0; p0 < chunks; p0 += Tl::kChunkUnroll) {
#pragma unroll
    for (int r = 0; r < Tl::kChunkUnroll; ++r) {
      const int p = p0 + r;
      if (p >= chunks) break;
      uint4 nh = ah, nl = al;  // next chunk's template fragments, loaded ahead
      if (p + 1 < chunks) {
        nh = af[(p + 1) * parts * 32];
        if constexpr (O == Operand::Split) nl = af[((p + 1) * parts + 1) * 32];
      }
      const int s1 = (2 * r + nb + 1) % Tl::kRing, s2 = (2 * r) % Tl::kRing;
      const int m1 = 4 * (2 * p + nb + 1);
      rh[s1] = wh[m1];
      if constexpr (O == Operand::Split) rl[s1] = wl[m1];
#pragma unroll
      for (int n = 0; n < nb; ++n)
        mma<O>(acc[n], ah, rh[(2 * r + n) % Tl::kRing], rh[(2 * r + n + 1) % Tl::kRing]);
      if constexpr (O == Operand::Split) {
#pragma unroll
        for (int n = 0; n < nb; ++n)
          mma<O>(acc[n], ah, rl[(2 * r + n) % Tl::kRing], rl[(2 * r + n + 1) % Tl::kRing]);
#pragma unroll
        for (int n = 0; n < nb; ++n)
          mma<O>(acc[n], al, rh[(2 * r + n) % Tl::kRing], rh[(2 * r + n + 1) % Tl::kRing]);
      }
      rh[s2] = wh[m1 + 4];
      if constexpr (O == Operand::Split) rl[s2] = wl[m1 + 4];
      ah = nh;
      al = nl;
    }
  }
}

/// Streams the CC pair v of tile columns col, col + 1 to p[0], p[1] where the column is below
/// lim; one 64-bit store when both are and p is 8-byte aligned (`pair`).
__device__ __forceinline__ void store_pair(float* p, float2 v, int col, int lim, bool pair) {
  if (pair && col + 1 < lim) {
    __stcs(reinterpret_cast<float2*>(p), v);
  } else {
    if (col < lim) __stcs(p, v.x);
    if (col + 1 < lim) __stcs(p + 1, v.y);
  }
}

/// A tile offset clamped to +-2^30: every out-of-tile entry stays out of range in 32 bits.
__device__ __forceinline__ int clamp_offset(std::int64_t off) {
  return static_cast<int>(off < -(1ll << 30) ? -(1ll << 30)
                                             : (off > (1ll << 30) ? (1ll << 30) : off));
}

/// Network, direct epilogue: adds v.x and v.y (w CC) to the stack row at outputs at and at + 1
/// (those in [0, lim)).
__device__ __forceinline__ void add_to_stack(float* row, int at, int lim, float2 v) {
  if (static_cast<unsigned>(at) < static_cast<unsigned>(lim)) row[at] += v.x;
  if (static_cast<unsigned>(at + 1) < static_cast<unsigned>(lim)) row[at + 1] += v.y;
}

/// Converts the raw tile of a step into the even / odd FP16 (BF16) pair copies, scaled by
/// 2^shift (the step's tile_shift); one barrier at the end. The raw tile is zero past the data.
template <Operand O, class Tl>
__device__ void stage_tile(const KernelArgs& a, const float* raw, std::uint32_t* words, int shift) {
  const int tid = static_cast<int>(threadIdx.x);
  const int nsamp = static_cast<int>(2 * a.words), nwords = static_cast<int>(a.words);
  const int stride = static_cast<int>(a.copy_stride);
  const Pow2Scale scale(shift);
  const auto convert = [&](auto two) {
    constexpr bool kTwo = decltype(two)::value;
    for (int j = tid; j < nwords; j += Tl::kThreads) {
      const float v0 = scale.apply<kTwo>(raw[2 * j]), v1 = scale.apply<kTwo>(raw[2 * j + 1]);
      const float v2 = 2 * j + 2 < nsamp ? scale.apply<kTwo>(raw[2 * j + 2]) : 0.0f;
      const std::uint32_t even = pack_hi<O>(v0, v1), odd = pack_hi<O>(v1, v2);
      words[j] = even;
      words[stride + j] = odd;
      if constexpr (O == Operand::Split) {
        words[2 * stride + j] = pack_lo(v0, v1, even);
        words[3 * stride + j] = pack_lo(v1, v2, odd);
      }
    }
  };
  if (scale.f2 == 1.0f)
    convert(std::false_type{});
  else
    convert(std::true_type{});
  __syncthreads();
}

/// The correlation kernel: persistent blocks of Tl::kThreads walking the step sequence of
/// find_next; writes per-channel CC (T, C, n_corr) or the stack (T, n_corr) to `a.out`. Network
/// mode keeps the block tile's stack in shared memory: with direct epilogues (step 1) each thread
/// adds w * CC from its accumulators at the output its window start serves, so no CC tile, no
/// barrier and no output pass; the staged epilogue adds from the CC tile.
template <Operand O, class Tl, bool kNetwork, bool kFull>
__global__ void __launch_bounds__(Tl::kThreads, Tl::min_blocks(O == Operand::Split))
    tensor_mf_kernel(KernelArgs a) {
  constexpr int parts = kParts<O>;
  extern __shared__ uint4 smem_raw[];
  auto* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const SharedLayout lay(a, parts, a.mean != nullptr);
  float* stage = reinterpret_cast<float*>(smem + lay.stage);
  [[maybe_unused]] float* stack = reinterpret_cast<float*>(smem + lay.stack);
  float* colf = reinterpret_cast<float*>(smem + lay.colf);
  float* colm = reinterpret_cast<float*>(smem + lay.colm);
  auto* words = reinterpret_cast<std::uint32_t*>(smem + lay.words);
  __shared__ Slot slots[3];  // steps k, k + 1 (prefetching), k + 2 (being resolved)

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, q = lane % 4;
  const std::int64_t ni = tile_outputs(a);
  const std::int64_t total = a.groups * ((a.n_corr + ni - 1) / ni);

  if (warp == 0) find_next<O, kNetwork>(a, ni, total, nullptr, slots[0]);
  __syncthreads();
  if (warp == 0) {
    if (slots[0].valid)
      find_next<O, kNetwork>(a, ni, total, &slots[0], slots[1]);
    else if (lane == 0)
      slots[1].valid = 0;
  }
  if (slots[0].valid && slots[0].compute)
    prefetch<parts, Tl::kThreads>(a, slots[0], 0, smem, lay, slots[0].group);
  if constexpr (kNetwork) {
    for (int j = tid; j < kTemplatesPerTile * kStageStride; j += Tl::kThreads) stack[j] = 0.0f;
  }
  __syncthreads();  // slot 1 resolved, the stack cleared

  [[maybe_unused]] std::int64_t stack_bid = -1, stack_t0 = 0, stack_i0 = 0;
  // Writes the network stack of block tile (stack_t0, stack_i0) and clears what it wrote (the
  // only entries any step adds to).
  [[maybe_unused]] const auto flush = [&] {
    const int rows =
        static_cast<int>(a.T - stack_t0 < kTemplatesPerTile ? a.T - stack_t0 : kTemplatesPerTile);
    const int cols = static_cast<int>(a.n_corr - stack_i0 < ni ? a.n_corr - stack_i0 : ni);
    for (int row = 0; row < rows; ++row)
      for (int col = tid; col < cols; col += Tl::kThreads) {
        float* at = stack + row * kStageStride + col;
        __stcs(a.out + (stack_t0 + row) * a.n_corr + stack_i0 + col, *at);
        *at = 0.0f;
      }
  };

  for (int k = 0; slots[k % 3].valid; ++k) {
    const int b = k & 1;  // data buffer of step k; step k + 1 prefetches into b ^ 1
    const Slot& s = slots[k % 3];
    const Slot& next = slots[(k + 1) % 3];
    // Warp 0 resolves step k + 2 while the others run the epilogue of step k.
    const auto resolve = [&] {
      if (next.valid)
        find_next<O, kNetwork>(a, ni, total, &next, slots[(k + 2) % 3]);
      else if (lane == 0)
        slots[(k + 2) % 3].valid = 0;
    };
    cp_async_wait_all();
    __syncthreads();  // step k's inputs landed
    if (next.valid && next.compute)
      prefetch<parts, Tl::kThreads>(a, next, b ^ 1, smem, lay, next.group);

    const std::int64_t group = s.group, t0 = group * kTemplatesPerTile;
    const std::int64_t i0 = s.i0, c = s.c, u0 = s.u0;
    const int rows = static_cast<int>(a.T - t0 < kTemplatesPerTile ? a.T - t0 : kTemplatesPerTile);
    const int cols = static_cast<int>(a.n_corr - i0 < ni ? a.n_corr - i0 : ni);
    if constexpr (kNetwork) {
      if (s.bid != stack_bid) {
        if (stack_bid >= 0) flush();
        stack_bid = s.bid, stack_t0 = t0, stack_i0 = i0;
      }
    } else if (s.first && s.edge) {
      // Windows outside the data give 0; the tiles write every other output once.
      for (int row = 0; row < rows; ++row) {
        float* dst = a.out + ((t0 + row) * a.C + c) * a.n_corr + i0;
        const std::int64_t s0 = i0 * a.step + s.mv[row];
#pragma unroll
        for (int kk = 0; kk < Tl::kColsPerThread; ++kk) {
          const int col = tid + Tl::kThreads * kk;
          const std::int64_t at = s0 + col * a.step;
          if (col < cols && (at < 0 || at >= a.windows)) __stcs(dst + col, 0.0f);
        }
      }
    }
    if (s.compute) {
      const StepSpans sp(a, s, b, smem, lay);
      const int shift = s.shift;
      column_factors<Tl::kThreads>(sp, shift, colf, colm);
      if constexpr (Tl::kPairs)  // ends with the barrier after which colf / colm are read
        stage_pairs<O, Tl>(a, sp.raw, words, shift);
      else
        stage_tile<O, Tl>(a, sp.raw, words, shift);
      const uint4* af =
          a.frags_in_shared
              ? reinterpret_cast<const uint4*>(smem + lay.frags) + b * a.chunks * parts * 32 + lane
              : a.frags + (c * a.groups + group) * a.chunks * parts * 32 + lane;
      float acc[Tl::kWarpNBlocks][4];
      if constexpr (Tl::kPairs)
        warp_gemm_pairs<O, Tl>(a, words, af, acc);
      else
        warp_gemm<O, Tl>(a, words, af, acc);

      // Epilogue: CC = acc * row_factor * col_factor - (mean_S / |S|) * row_sum, clamped.
      const float rf0 = s.rf[g], rf1 = s.rf[g + 8], rs0 = s.rs[g], rs1 = s.rs[g + 8];
      constexpr bool full = kFull;  // short normalization: no mean loads or mean terms
      const int in_data = static_cast<int>(a.windows - u0 < kTileLags ? a.windows - u0 : kTileLags);
      // Direct stores (per-channel, step 1, one moveout mv for the group): tile column col is
      // window u0 + col, i.e. output i0 + base + col with base = u0 - mv - i0 in [0, cols)
      // (find_next starts u0 at max(i0 + mv, 0) and stops before u_hi <= i_last + mv). Each
      // store instruction of a warp fills one 32-byte sector in each of 8 rows.
      // Network with direct epilogues (step 1): tile column col is window u0 + col, the window of
      // output col + base = u0 + col - mv - i0 for a template of moveout mv (kept when that lies
      // in [0, cols) and the window inside the data, i.e. col + base < in_data + base: one
      // unsigned comparison with slim); the row offsets clamp like the staged ones.
      const bool direct = a.direct && (kNetwork || s.uniform);
      float* drow0 = nullptr;
      float* drow1 = nullptr;
      int lim = 0;
      bool pair0 = false, pair1 = false;
      [[maybe_unused]] int base0 = 0, base1 = 0, slim0 = 0, slim1 = 0;
      if constexpr (kNetwork) {
        base0 = clamp_offset(u0 - s.mv[g] - i0), base1 = clamp_offset(u0 - s.mv[g + 8] - i0);
        slim0 = g < rows ? max(0, min(cols, in_data + base0)) : 0;
        slim1 = g + 8 < rows ? max(0, min(cols, in_data + base1)) : 0;
      }
      if (!kNetwork && direct) {
        const std::int64_t base = u0 - s.mv[0] - i0;
        lim = static_cast<int>(cols - base) < in_data ? static_cast<int>(cols - base) : in_data;
        drow0 = a.out + ((t0 + g) * a.C + c) * a.n_corr + i0 + base;
        drow1 = a.out + ((t0 + g + 8) * a.C + c) * a.n_corr + i0 + base;
        pair0 = reinterpret_cast<std::uintptr_t>(drow0) % 8 == 0;
        pair1 = reinterpret_cast<std::uintptr_t>(drow1) % 8 == 0;
        if (g >= rows) lim = 0;  // padding templates: nothing to write in either row
      }
      const int lim1 = !kNetwork && direct && g + 8 < rows ? lim : 0;
      // The pass over the accumulators, compiled per path: direct is uniform over the block, so
      // no branch per pair. In network mode rf and rs carry w (Slot), so the values are w CC,
      // clamped to |w|.
      const float cl0 = kNetwork ? fabsf(s.w[g]) : 1.0f, cl1 = kNetwork ? fabsf(s.w[g + 8]) : 1.0f;
      const auto pass = [&](auto direct_path) {
        constexpr bool kDirect = decltype(direct_path)::value;
#pragma unroll
        for (int n = 0; n < Tl::kWarpNBlocks; ++n) {
          const int col = warp * Tl::kWarpLags + 8 * n + 2 * q;
          const float2 cf = *reinterpret_cast<const float2*>(colf + col);
          const float cf0 = cf.x, cf1 = cf.y;
          float2 top, bottom;
          top.x = acc[n][0] * rf0 * cf0;
          top.y = acc[n][1] * rf0 * cf1;
          bottom.x = acc[n][2] * rf1 * cf0;
          bottom.y = acc[n][3] * rf1 * cf1;
          if constexpr (full) {
            const float2 cm = *reinterpret_cast<const float2*>(colm + col);
            const float cm0 = cm.x, cm1 = cm.y;
            top.x -= cm0 * rs0, top.y -= cm1 * rs0;
            bottom.x -= cm0 * rs1, bottom.y -= cm1 * rs1;
          }
          top.x = fminf(cl0, fmaxf(-cl0, top.x)), top.y = fminf(cl0, fmaxf(-cl0, top.y));
          bottom.x = fminf(cl1, fmaxf(-cl1, bottom.x));
          bottom.y = fminf(cl1, fmaxf(-cl1, bottom.y));
          if constexpr (kDirect && kNetwork) {
            add_to_stack(stack + g * kStageStride, col + base0, slim0, top);
            add_to_stack(stack + (g + 8) * kStageStride, col + base1, slim1, bottom);
          } else if constexpr (kDirect) {
            store_pair(drow0 + col, top, col, lim, pair0);
            store_pair(drow1 + col, bottom, col, lim1, pair1);
          } else {
            *reinterpret_cast<float2*>(stage + g * kStageStride + col) = top;
            *reinterpret_cast<float2*>(stage + (g + 8) * kStageStride + col) = bottom;
          }
        }
      };
      if (direct)
        pass(std::true_type{});
      else
        pass(std::false_type{});
      if (direct) {
        if (warp == 0) resolve();
      } else {
        __syncthreads();
        if (warp == 0) resolve();

        // Each output reads its own window start s = i * step + moveout from the staged tile:
        // entry s - u0 when it lies in this tile and inside the data.
        // 32-bit offsets: |col * step| <= 2^29 (step <= kMaxStep), so clamping the row offset to
        // +-2^30 keeps every out-of-tile entry out of [0, in_data).
        const int step = static_cast<int>(a.step);
#pragma unroll
        for (int row = 0; row < kTemplatesPerTile; ++row) {
          if (row < rows) {
            const int off = clamp_offset(i0 * a.step + s.mv[row] - u0);
            [[maybe_unused]] float* dst = a.out + ((t0 + row) * a.C + c) * a.n_corr + i0;
#pragma unroll
            for (int kk = 0; kk < Tl::kColsPerThread; ++kk) {
              const int col = tid + Tl::kThreads * kk;
              const int at = off + col * step;
              if (col < cols && at >= 0 && at < in_data) {
                const float v = stage[row * kStageStride + at];
                if constexpr (kNetwork) {
                  stack[row * kStageStride + col] += v;  // v = w CC
                } else {
                  __stcs(dst + col, v);
                }
              }
            }
          }
        }
      }
    }
    if (!s.compute && warp == 0) resolve();
    __syncthreads();  // the stage, the copies, buffer b and slot k are reused later
  }
  if constexpr (kNetwork) {
    if (stack_bid >= 0) flush();
  }
}

}  // namespace halfscope::mfilter::tensor
