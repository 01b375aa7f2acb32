// The network stack on Hopper's wgmma (sm_90a; design and measurements: docs/mfilter-tensor.md,
// "The wgmma network kernel"). A consumer warpgroup owns 64 templates (wgmma M) x 128 correlation
// times (wgmma N), walks the channels and keeps w * CC summed in registers, so the stack is written
// once and per-channel CC never exists. A block has two consumers on neighbouring time tiles,
// which share the template operands, and a producer warpgroup that prepares the next channel
// (warp specialization, setmaxnreg moving registers to the consumers), so a consumer's path per
// channel is a barrier wait, its products and its epilogue.
//
// Per channel c, with base = the group's smallest moveout on c (among templates of nonzero
// weight) and shift_j = moveout_j - base, every template is stored shifted inside a longer row of
// K' = 16 ksteps >= K + spread operands (network_templates_kernel), so the 64 rows share one window
// start per column: D(j, n) = sum_k' A(j, k') S(t0 + base + n + k') is template j's numerator for
// window t0 + n + moveout_j. B, the data's Hankel matrix, is MN-major and its 8 x 8 core matrices
// repeat along diagonals: block (k-group b, n-group a) = C[a + b] with row kr of C[m] = S[8m + kr
// .. + 7], so both descriptor strides are one core matrix and B costs 16 bytes a sample. Epilogue
// per (j, n): w CC = inv(u) (D f_j 2^-e - mean(u) rs_j) clamped to |w|, u = t0 + n + moveout_j,
// f_j = w 2^-shift_j / |T_j| (rf) and rs_j = w (sum of the operand values) / |T_j| (full only).
// Templates, inverse norms and means arrive by TMA bulk copies; spans that leave the data are
// filled element by element, zero outside it, so those windows add nothing (inverse norm 0).
#pragma once

#include <cstdint>
#include <type_traits>

#include "mfilter/kernels/tensor_operand.cuh"
#include "mfilter/kernels/tensor_step.cuh"
#include "mfilter/kernels/wgmma.cuh"
#include "mfilter/wgmma_plan.hpp"

namespace halfscope::mfilter::tensor {

inline constexpr int kWgTemplates = kWgmmaGroupTemplates;  // per block and consumer (wgmma M)
inline constexpr int kWgTimes = 128;    // correlation times per consumer (wgmma N)
inline constexpr int kWgThreads = 128;  // one warpgroup
/// A block: two consumer warpgroups on neighbouring time tiles of one template group (sharing its
/// template stage: half the copies from L2 of one consumer per block) and one producer.
inline constexpr int kWgConsumers = 2;
inline constexpr int kWgBlockTimes = kWgConsumers * kWgTimes;
inline constexpr int kWgBlockThreads = (kWgConsumers + 1) * kWgThreads;
/// Registers per thread after the hand-over (setmaxnreg; 384 threads start at 168 each): the
/// consumers' two 64-float accumulators (the stack and the products) need most.
inline constexpr int kWgConsumerRegisters = 216;
inline constexpr int kWgProducerRegisters = 72;
/// B rows the producer builds per thread and pass (256 + 16 ksteps - 8 rows: one pass up to
/// ksteps = 24).
inline constexpr int kWgRowsPerThread = 5;

/// Everything the network kernel reads. Per (group, channel) gc = g * C + c.
struct WgArgs {
  const float* data = nullptr;         // (C, L)
  const float* inv = nullptr;          // (C, windows): inverse window norms, 0 for flat windows
  const float* mean = nullptr;         // (C, windows) window means, or null (short)
  const std::uint16_t* a = nullptr;    // per gc: 64 x kp operands, K-major core matrices
  const float4* rows = nullptr;        // per gc, 64: {w rf, |w|, w rs, shift (int bits)}
  const std::int64_t* base = nullptr;  // per gc: the group's smallest contributing moveout
  const int* ksteps = nullptr;         // per gc: K' / 16, 0 when no template contributes
  float* out = nullptr;                // (T, n_corr)
  int* bad = nullptr;                  // count of data tiles holding inf or NaN
  std::int64_t T = 0, C = 0, L = 0, windows = 0, n_corr = 0;
  int K = 0, kp = 0;  // template length; the longest K' (a multiple of 16)
};

/// Byte offsets of one block's dynamic shared memory. Stages [2] alternate between the channel
/// the consumers compute and the one the producer prepares.
struct WgLayout {
  int a_bytes = 0, b_bytes = 0, i_floats = 0;
  int a = 0, b = 0, inv = 0, mean = 0, stage = 0, meta = 0, red = 0, bar = 0, total = 0;
  __host__ __device__ WgLayout(int kp, int K, bool full, std::int64_t C) {
    a_bytes = kWgTemplates * kp * 2;
    b_bytes = (kp / 8 + kWgBlockTimes / 8 - 1) * 128;     // core matrices C[m]
    i_floats = (kWgBlockTimes + kp - K + 3) / 4 * 4 + 4;  // window starts n + shift, + the lead
    a = 0;
    b = a + 2 * a_bytes;
    inv = b + 2 * b_bytes;
    mean = inv + 2 * i_floats * 4;
    stage = mean + (full ? 2 * i_floats * 4 : 0);  // per stage: {scale exponent, inverse-norm lead}
    meta = stage + 16;                             // the block's group: base[C] (int64), ksteps[C]
    red = meta + static_cast<int>((C * 12 + 15) / 16 * 16);
    bar = red + 16;  // full[2], empty[2]
    total = bar + 32;
  }
};

/// Where channel c's span of group g and the block's time tiles from t0 starts, whether every
/// sample the products read lies inside the channel, and whether TMA can copy its inverse norms
/// (and means): the 16-byte-aligned copy inside the arrays, both with the same lead.
struct WgSpan {
  std::int64_t start = 0;  // first sample (= first window start) of the span in channel c
  int ksteps = 0, lead_i = 0;
  bool inside = false, bulk = false;
};
/// The block's group's spans, copied to shared memory once (wg_load_meta).
struct WgMeta {
  const std::int64_t* base;
  const int* ksteps;
  __device__ WgMeta(const unsigned char* sm, const WgLayout& lay, std::int64_t C)
      : base(reinterpret_cast<const std::int64_t*>(sm + lay.meta)),
        ksteps(reinterpret_cast<const int*>(sm + lay.meta + 8 * C)) {}
};
__device__ inline void wg_load_meta(const WgArgs& a, const WgLayout& lay, unsigned char* sm,
                                    std::int64_t g) {
  auto* base = reinterpret_cast<std::int64_t*>(sm + lay.meta);
  auto* ksteps = reinterpret_cast<int*>(sm + lay.meta + 8 * a.C);
  for (std::int64_t c = threadIdx.x; c < a.C; c += blockDim.x) {
    base[c] = a.base[g * a.C + c];
    ksteps[c] = a.ksteps[g * a.C + c];
  }
}
__device__ inline WgSpan wg_span(const WgArgs& a, const WgLayout& lay, const WgMeta& meta,
                                 std::int64_t c, std::int64_t t0) {
  WgSpan s;
  s.start = t0 + meta.base[c];
  s.ksteps = meta.ksteps[c];
  s.inside = s.start >= 0 && s.start + kWgBlockTimes + 16 * s.ksteps - 1 <= a.L;
  // Inside the channel's samples (hence its windows) first, so the leads come from pointers into
  // the arrays.
  if (!s.inside) return s;
  const std::int64_t io = c * a.windows + s.start;
  s.lead_i = lead_of(a.inv + io);
  const bool same_lead = a.mean == nullptr || lead_of(a.mean + io) == s.lead_i;
  s.bulk = io - s.lead_i >= 0 && io - s.lead_i + lay.i_floats <= a.C * a.windows && same_lead;
  return s;
}

/// The next channel after c with a contributing template in the block's group (C when none).
__device__ inline std::int64_t wg_next(const WgArgs& a, const WgMeta& meta, std::int64_t c) {
  for (++c; c < a.C && meta.ksteps[c] == 0; ++c) {
  }
  return c;
}

/// The producer warpgroup (thread ptid of 128): channel c's operands into stage s once the
/// consumers have given the stage back (`empty` completes the phase of the given parity), then one
/// arrival on the stage's `full` barrier (whose other arrival expects the TMA bytes). Templates,
/// inverse norms and means by TMA bulk copies (those that cannot go so are filled element by
/// element, zero outside the windows); B, the data's Hankel core matrices, from global memory at
/// the power-of-two scale of the samples the products read. The scale is found before the wait:
/// its loads' latency overlaps the consumers' previous channel.
template <Operand O>
__device__ void wg_produce(const WgArgs& a, const WgLayout& lay, const WgMeta& meta,
                           unsigned char* sm, std::int64_t g, std::int64_t c, int s,
                           std::int64_t t0, int ptid, int empty_parity) {
  const WgSpan sp = wg_span(a, lay, meta, c, t0);
  // Sample i of the span, zero outside the channel.
  const float* xc = a.data + c * a.L;
  const float* xs = sp.inside ? xc + sp.start : nullptr;
  const auto sample = [&](int i) {
    if (xs != nullptr) return __ldg(xs + i);
    const std::int64_t at = sp.start + i;
    return at >= 0 && at < a.L ? __ldg(xc + at) : 0.0f;
  };
  // B has `rows` rows; thread ptid builds rows r0 .. r0 + R - 1, r0 = R ptid (+ 128 R per further
  // pass), from samples r0 .. r0 + R + 6 loaded at once: one round trip to L2 per pass, where a
  // row at a time paid one per row. The maximum is taken over the same loads (samples < need).
  constexpr int R = kWgRowsPerThread;
  const int need = kWgBlockTimes + 16 * sp.ksteps - 1, rows = need - 7;
  float v[R + 7];
  const auto load = [&](int r0) {
#pragma unroll
    for (int u = 0; u < R + 7; ++u) v[u] = r0 + u < need ? sample(r0 + u) : 0.0f;
  };
  unsigned m = 0;
  for (int r0 = R * ptid; r0 < rows; r0 += R * kWgThreads) {
    load(r0);
#pragma unroll
    for (int u = 0; u < R + 7; ++u) m = max(m, __float_as_uint(v[u]) & 0x7fffffffu);
  }
  m = __reduce_max_sync(0xffffffffu, m);
  auto* red = reinterpret_cast<unsigned*>(sm + lay.red);
  if (ptid % 32 == 0) red[ptid / 32] = m;
  wg::named_sync(1, kWgThreads);
  m = max(max(red[0], red[1]), max(red[2], red[3]));
  const int e = operand_shift<O>(__uint_as_float(m));

  auto* bars = reinterpret_cast<std::uint64_t*>(sm + lay.bar);
  wg::barrier_wait(bars + 2 + s, empty_parity);
  float* iv = reinterpret_cast<float*>(sm + lay.inv) + s * lay.i_floats;
  float* mn = reinterpret_cast<float*>(sm + lay.mean) + s * lay.i_floats;
  if (ptid == 0) {
    if (m >= 0x7f800000u) atomicAdd(a.bad, 1);
    int* st = reinterpret_cast<int*>(sm + lay.stage) + 2 * s;
    st[0] = e;
    st[1] = sp.bulk ? sp.lead_i : 0;
    const std::int64_t gc = g * a.C + c;
    const int i_bytes = sp.bulk ? lay.i_floats * 4 * (a.mean != nullptr ? 2 : 1) : 0;
    wg::expect_bytes(bars + s, sp.ksteps * 2048 + i_bytes);
    wg::bulk_copy(sm + lay.a + s * lay.a_bytes, a.a + gc * kWgTemplates * a.kp, sp.ksteps * 2048,
                  bars + s);
    if (sp.bulk) {
      const std::int64_t io = c * a.windows + sp.start - sp.lead_i;
      wg::bulk_copy(iv, a.inv + io, lay.i_floats * 4, bars + s);
      if (a.mean != nullptr) wg::bulk_copy(mn, a.mean + io, lay.i_floats * 4, bars + s);
    }
  }
  if (!sp.bulk) {
    for (int i = ptid; i < lay.i_floats; i += kWgThreads) {
      const std::int64_t at = sp.start + i;
      const bool in = at >= 0 && at < a.windows;
      iv[i] = in ? a.inv[c * a.windows + at] : 0.0f;
      if (a.mean != nullptr) mn[i] = in ? a.mean[c * a.windows + at] : 0.0f;
    }
  }
  // B: row (m, kr) of core matrix C[m] = S[8 m + kr + i], i < 8, for the 2 ksteps + 31 core
  // matrices the two consumers' products read: rows r < 16 ksteps + 248 read samples r + i <
  // need, exactly the samples the maximum was taken over. One pass (ksteps <= 24) keeps its
  // samples in registers.
  const Pow2Scale scale(e);
  unsigned char* b = sm + lay.b + s * lay.b_bytes;
  const auto build = [&](auto two) {
    constexpr bool kTwo = decltype(two)::value;
    for (int r0 = R * ptid; r0 < rows; r0 += R * kWgThreads) {
      if (rows > R * kWgThreads) load(r0);
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (r0 + i >= rows) break;
        float x[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) x[u] = scale.apply<kTwo>(v[i + u]);
        *reinterpret_cast<uint4*>(b + 16 * (r0 + i)) =
            uint4{pack_hi<O>(x[0], x[1]), pack_hi<O>(x[2], x[3]), pack_hi<O>(x[4], x[5]),
                  pack_hi<O>(x[6], x[7])};
      }
    }
  };
  if (scale.f2 == 1.0f)
    build(std::false_type{});
  else
    build(std::true_type{});
  wg::proxy_fence();  // B's generic writes before the consumer's wgmma reads them
  wg::named_sync(1, kWgThreads);
  if (ptid == 0) wg::arrive(bars + s);
}

/// grid (tiles of kWgBlockTimes correlation times, groups of 64 templates), kWgBlockThreads
/// threads, WgLayout(kp, K, full, C) bytes. Warpgroups 0 and 1 consume (products, epilogue, the
/// stack in registers) times [T0, T0 + 128) and [T0 + 128, T0 + 256); warpgroup 2 produces
/// (wg_produce) one channel ahead, so a consumer's path per channel is a barrier wait, its
/// products and its epilogue; `empty` barriers (one arrival per consumer warp) give the stages
/// back.
template <Operand O, bool kFull>
__global__ void __launch_bounds__(kWgBlockThreads, 1) network_wgmma_kernel(const WgArgs a) {
  extern __shared__ __align__(128) unsigned char sm[];
  const WgLayout lay(a.kp, a.K, kFull, a.C);
  const WgMeta meta(sm, lay, a.C);
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t T0 = static_cast<std::int64_t>(blockIdx.x) * kWgBlockTimes, grp = blockIdx.y;
  auto* bars = reinterpret_cast<std::uint64_t*>(sm + lay.bar);  // full[2], empty[2]
  if (tid == 0) {
    wg::barrier_init(bars, 2);  // the producer's expect_tx arrival and its arrival after B
    wg::barrier_init(bars + 1, 2);
    wg::barrier_init(bars + 2, kWgConsumers * kWgThreads / 32);  // every consumer warp
    wg::barrier_init(bars + 3, kWgConsumers * kWgThreads / 32);
    wg::barrier_init_fence();
  }
  wg_load_meta(a, lay, sm, grp);
  __syncthreads();
  if (tid >= kWgConsumers * kWgThreads) {
    wg::lower_registers<kWgProducerRegisters>();
    int it = 0;
    for (std::int64_t c = wg_next(a, meta, -1); c < a.C; c = wg_next(a, meta, c), ++it) {
      // A stage is free once the consumer is done with its previous channel (a fresh barrier
      // counts as free: the wait on parity 1 passes).
      wg_produce<O>(a, lay, meta, sm, grp, c, it & 1, T0, tid - kWgConsumers * kWgThreads,
                    ((it >> 1) & 1) ^ 1);
    }
    return;
  }
  wg::raise_registers<kWgConsumerRegisters>();
  const int w = tid / kWgThreads, warp = tid % kWgThreads / 32, lane = tid % 32, g8 = lane / 4,
            q = lane % 4;
  const std::int64_t t0 = T0 + kWgTimes * w;
  const int j0 = 16 * warp + g8;  // this thread's rows j0, j0 + 8 and columns n = 8 t + 2 q, + 1
  float acc[kWgTimes / 2], d[kWgTimes / 2];
#pragma unroll
  for (int i = 0; i < kWgTimes / 2; ++i) acc[i] = 0.0f, d[i] = 0.0f;
  int it = 0;
  for (std::int64_t c = wg_next(a, meta, -1); c < a.C; c = wg_next(a, meta, c), ++it) {
    const int s = it & 1;
    const float4* rows = a.rows + (grp * a.C + c) * kWgTemplates;
    const float4 r0 = __ldg(rows + j0), r1 = __ldg(rows + j0 + 8);
    wg::barrier_wait(bars + s, (it >> 1) & 1);
    const std::uint64_t da0 = wg::descriptor(sm + lay.a + s * lay.a_bytes, 1024, 128);
    const std::uint64_t db0 =
        wg::descriptor(sm + lay.b + s * lay.b_bytes + w * (kWgTimes / 8) * 128, 128, 128);
    const int ksteps = meta.ksteps[c];
    wg::touch(d);
    wg::fence();
    wg::mma_m64n128k16_tb<O>(d, da0, db0, 0);
    // k-step k: A's slice at 2048 k bytes, B's core matrices from C[2 k] (256 k bytes).
    for (int k = 1; k < ksteps; ++k)
      wg::mma_m64n128k16_tb<O>(d, da0 + (2048 * k >> 4), db0 + (256 * k >> 4), 1);
    wg::commit();
    wg::wait_all();
    wg::touch(d);
    // Epilogue.
    const int* st = reinterpret_cast<const int*>(sm + lay.stage) + 2 * s;
    const int e = st[0], li = st[1];
    const float unscale = pow2_or_zero(-e);
    const float f0 = times_pow2(r0.x, unscale, -e), f1 = times_pow2(r1.x, unscale, -e);
    const int sh0 = __float_as_int(r0.w), sh1 = __float_as_int(r1.w);
    const int at = s * lay.i_floats + li + kWgTimes * w + 2 * q;
    const float* iv = reinterpret_cast<const float*>(sm + lay.inv) + at;
    const float* mv = reinterpret_cast<const float*>(sm + lay.mean) + at;
    const auto add = [](float& to, float v, float lim) { to += fminf(fmaxf(v, -lim), lim); };
#pragma unroll
    for (int t = 0; t < kWgTimes / 8; ++t) {
      const int n0 = 8 * t + sh0, n1 = 8 * t + sh1;
      float v00 = d[4 * t] * f0, v01 = d[4 * t + 1] * f0;
      float v10 = d[4 * t + 2] * f1, v11 = d[4 * t + 3] * f1;
      if constexpr (kFull) {
        v00 -= mv[n0] * r0.z, v01 -= mv[n0 + 1] * r0.z;
        v10 -= mv[n1] * r1.z, v11 -= mv[n1 + 1] * r1.z;
      }
      add(acc[4 * t], v00 * iv[n0], r0.y);
      add(acc[4 * t + 1], v01 * iv[n0 + 1], r0.y);
      add(acc[4 * t + 2], v10 * iv[n1], r1.y);
      add(acc[4 * t + 3], v11 * iv[n1 + 1], r1.y);
    }
    __syncwarp();
    if (lane == 0) wg::arrive(bars + 2 + s);
  }
  // The stack: rows below T, columns below n_corr (pairs where aligned).
  for (int h = 0; h < 2; ++h) {
    const std::int64_t j = grp * kWgTemplates + j0 + 8 * h;
    if (j >= a.T) continue;
    float* row = a.out + j * a.n_corr;
#pragma unroll
    for (int t = 0; t < kWgTimes / 8; ++t) {
      const std::int64_t col = t0 + 8 * t + 2 * q;
      const float x0 = acc[4 * t + 2 * h], x1 = acc[4 * t + 2 * h + 1];
      if (col + 1 < a.n_corr && reinterpret_cast<std::uintptr_t>(row + col) % 8 == 0) {
        __stcs(reinterpret_cast<float2*>(row + col), make_float2(x0, x1));
      } else {
        if (col < a.n_corr) __stcs(row + col, x0);
        if (col + 1 < a.n_corr) __stcs(row + col + 1, x1);
      }
    }
  }
}

/// Per (group, channel), one thread each: base and ksteps of wgmma_group_ksteps, and the largest
/// 16 ksteps over all into `kp_need`.
__global__ void network_spans_kernel(const std::int64_t* moveouts, const float* weights,
                                     std::int64_t T, std::int64_t C, std::int64_t K,
                                     std::int64_t groups, std::int64_t* base, int* ksteps,
                                     unsigned long long* kp_need) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t gc = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       gc < groups * C; gc += stride) {
    const std::int64_t kp =
        wgmma_group_ksteps(moveouts, weights, T, C, K, gc / C, gc % C, base[gc]);
    ksteps[gc] = static_cast<int>(kp);
    atomicMax(kp_need, static_cast<unsigned long long>(16 * kp));
  }
}

/// One warp per (template t of the zero-padded 64-template groups, channel c): the template's
/// operands shifted by moveout - base inside its row of A (zero elsewhere: the caller clears A)
/// and its row factors. Templates of zero weight (and padding rows) keep zero rows and factors.
template <Operand O>
__global__ void network_templates_kernel(const float* templates, const std::int64_t* moveouts,
                                         const float* weights, std::int64_t T, std::int64_t C,
                                         std::int64_t K, std::int64_t groups, int kp, bool full,
                                         const std::int64_t* base, std::uint16_t* a, float4* rows,
                                         int* bad) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < groups * kWgTemplates * C; w += warps) {
    const std::int64_t t = w / C, c = w % C, g = t / kWgTemplates;
    const std::int64_t gc = g * C + c;
    const int r = static_cast<int>(t % kWgTemplates);
    const float wt = t < T ? weights[t * C + c] : 0.0f;
    const bool real = wt != 0.0f;
    const float* x = templates + (real ? (t * C + c) * K : 0);
    const TemplateStats st = template_stats<O>(x, real, K, full);
    const int shift = real ? static_cast<int>(moveouts[t * C + c] - base[gc]) : 0;
    std::uint16_t* row = a + gc * kWgTemplates * kp;
    double op_sum = 0;
    for (std::int64_t k = lane; !st.flat && k < K; k += 32) {
      std::uint16_t hi = 0, lo = 0;
      op_sum += template_operand<O>(x[k], st, hi, lo, bad);
      const std::int64_t at = k + shift;
      row[(at / 8) * 8 * kWgTemplates + r * 8 + at % 8] = hi;
    }
    for (int o = 16; o > 0; o /= 2) op_sum += __shfl_xor_sync(0xffffffffu, op_sum, o);
    if (lane == 0) {
      const auto rf = static_cast<float>(ldexp(st.inv_norm, -st.shift));
      const float rs = full ? static_cast<float>(op_sum * st.inv_norm) : 0.0f;
      rows[gc * kWgTemplates + r] = make_float4(wt * rf, fabsf(wt), wt * rs, __int_as_float(shift));
    }
  }
}

}  // namespace halfscope::mfilter::tensor
