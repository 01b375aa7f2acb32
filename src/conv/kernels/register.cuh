// Device code of the register-blocked convolution (PRCF, Perrot et al. 2016, extended to a 2-D
// register tile). Host side: src/conv/register_launch.cuh, instantiated per precision family in
// src/conv/register_cuda_<family>.cu.
//
// Tile kernel (odd square kernels up to register_tuning::kMaxTemplateWidth, width KW a template
// parameter, every loop unrolled): a block stages its input tile (TY*Q + KW - 1 rows of
// TX*P + KW - 1 pixels) into shared memory with coalesced 16-byte loads, then each thread keeps a
// P x Q tile of outputs in registers and walks its (Q + KW - 1) x (P + KW - 1) region of interest
// row by row: each row is read once from shared memory (16-byte loads), converted once, and added
// into every accumulator it touches with taps at compile-time constant-memory offsets (the SASS
// loads them once per tile into uniform registers, ULDC.64, for FP32 and into registers for
// FP16). FP16 arithmetic runs packed: HFMA2 on two adjacent outputs, with the odd-shifted input
// pairs made by one PRMT each. Zero and circular boundaries are both resolved while staging, so
// the compute loop has no branch; only chunks that cross an image edge take the per-pixel path.
//
// Streaming kernel (register_stream.cuh; widths 3, 5, 7 on 16-byte aligned rows, where it beats
// the tile kernel, which keeps unaligned rows and the other widths): no shared memory; a thread
// loads its whole (Q + KW - 1)-row window from global memory at once and keeps it as raw words.
//
// Generic kernel (any kernel size, P a template parameter): the same scheme with the kernel width
// at run time: input rows stream through shared memory one at a time, and the taps of a row are
// walked in chunks of P with a 2P-pixel register window, so the inner chunk (P taps x P outputs
// x Q rows) is unrolled and the tap is one LDC per P multiply-adds.
//
// Floors per call (H100 SXM: 3.35 TB/s, ~2.9 TB/s for a copy; FP32 FMA ~25-33 T/s; issue limit
// 132 SMs x 4 warp-instructions per clock):
//   bytes >= (rows*cols + out_rows*out_cols) * sizeof(storage)   (halo rows re-read from L2)
//   FMAs   = out_rows*out_cols*krows*kcols                       (an HFMA2 does two)
// Per output the tile kernel issues KW^2 FFMA (KW^2/2 HFMA2) plus about 8 instructions of
// staging, row loads, conversions and stores (counted in the SASS of the 3x3..7x7 instances).
// 4096^2 in FP16 storage moves 67 MB: 23 us at 2.9 TB/s. 3x3 half or mixed: ~16 instructions per
// output, ~9 us of issue: memory-bound, 80-90% of the copy bandwidth expected. 7x7 half: ~33 per
// output, ~19 us: borderline. 7x7 mixed: ~58 per output, ~33 us: FP32-issue-bound at ~70% of the
// copy bandwidth (FP32 arithmetic, not memory, is then the floor).
#pragma once

#include "conv/kernels/direct_common.cuh"
#include "conv/kernels/register_tuning.hpp"

#include <cstring>
#include <type_traits>

namespace halfscope::conv::kernels {

/// Taps for the register kernels as CoefOf<Prec>::T: 64 KB = 32768 FP16/BF16 taps (181 x 181),
/// 16384 FP32 (127 x 127), 8192 FP64. Larger kernels are read from global memory.
inline constexpr int kRegisterConstantBytes = 65536;  // register_plan::kConstantBytes
static __constant__ uint4 c_reg_kernel[kRegisterConstantBytes / 16];

/// How taps are stored (T) and turned into the arithmetic's operand (get). The caller's raw
/// storage bits where that is free: FP32/FP64 taps as they are, FP16 taps broadcast into both
/// halves of the HFMA2 multiplier by an operand selector (.H0_H0 / .H1_H1 in the SASS). FP16 and
/// BF16 taps for FP32 arithmetic would cost a conversion per use (for BF16 a shift: tried, ptxas
/// kept the shifted taps in registers and spilled up to 300 bytes at KW = 31), so those are
/// widened to FP32 once per call (kPrepared: prepare_coefficients), and the FFMAs read them
/// from constant memory through uniform registers.
template <class Prec>
struct CoefOf {
  using T = typename Prec::R;
  static constexpr bool kPrepared = false;
  __device__ static typename Prec::A get(T raw) { return Prec::widen(raw); }
};
template <>
struct CoefOf<PrecHalf> {
  using T = unsigned short;
  static constexpr bool kPrepared = false;
  __device__ static __half2 get(T raw) { return __half2half2(__ushort_as_half(raw)); }
};
template <>
struct CoefOf<PrecMixed> {
  using T = float;
  static constexpr bool kPrepared = true;
  __device__ static float get(T k) { return k; }
};
template <>
struct CoefOf<PrecBF16> {
  using T = float;
  static constexpr bool kPrepared = true;
  __device__ static float get(T k) { return k; }
};

/// What the register kernels need beyond the geometry.
struct RegArgs {
  ConvArgs c;
  const void* coef = nullptr;  // CoefOf<Prec>::T[krows * kcols] in global memory (large kernels)
  long long n_tile_rows = 0;   // ceil(out_rows / (blockDim.y * Q))
  int sp = 0;                  // shared-memory row pitch in pixels (multiple of 16 bytes)
  int vec_in = 0;              // image rows 16-byte aligned: 16-byte loads allowed
  int vec_out = 0;             // output rows 16-byte aligned: 16-byte stores allowed
};

template <class To, class From>
__device__ inline To bit_as(const From& f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  memcpy(static_cast<void*>(&t), &f, sizeof(To));
  return t;
}

/// Widens FP16/BF16 taps to FP32 for FP32 arithmetic (CoefOf<PrecMixed>, CoefOf<PrecBF16>).
template <class Prec>
__global__ void prepare_coefficients(const typename Prec::R* k, typename CoefOf<Prec>::T* dst,
                                     long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dst[i] = Prec::widen(k[i]);
}

/// Tap `idx` as the arithmetic's operand, from constant memory (kConst) or from global memory.
template <class Prec, bool kConst>
__device__ inline auto coef(const RegArgs& a, int idx) {
  using T = typename CoefOf<Prec>::T;
  if constexpr (kConst)
    return CoefOf<Prec>::get(reinterpret_cast<const T*>(c_reg_kernel)[idx]);
  else
    return CoefOf<Prec>::get(__ldg(static_cast<const T*>(a.coef) + idx));
}

template <class R>
__device__ inline void unpack16(const uint4 t, R (&v)[16 / sizeof(R)]) {
  const unsigned w[4] = {t.x, t.y, t.z, t.w};
  if constexpr (sizeof(R) == 2) {
    HS_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = static_cast<R>(w[k] & 0xffffu);
      v[2 * k + 1] = static_cast<R>(w[k] >> 16);
    }
  } else if constexpr (sizeof(R) == 4) {
    HS_UNROLL
    for (int k = 0; k < 4; ++k) v[k] = w[k];
  } else {
    v[0] = w[0] | (static_cast<R>(w[1]) << 32);
    v[1] = w[2] | (static_cast<R>(w[3]) << 32);
  }
}

/// Chunk (r, c) of a staging pass -> the next one nthreads further on (dr rows, dc chunks).
__device__ inline void stage_step(int& r, int& c, int dr, int dc, int nchunks) {
  c += dc;
  r += dr;
  if (c >= nchunks) {
    c -= nchunks;
    ++r;
  }
}

/// Stores chunk c (pixels xa + c*V ...) of staged row r at sm[r * sp + (x - x0)], x0 = xa + s.
template <class R, int V>
__device__ inline void stage_store(R* sm, const R (&v)[V], int r, int c, int s, int sp,
                                   int nchunks) {
  const int base = r * sp + c * V - s;
  if (c > 0 && c < nchunks - 1) {  // whole chunk inside the row
    HS_UNROLL
    for (int e = 0; e < V; ++e) sm[base + e] = v[e];
  } else {
    HS_UNROLL
    for (int e = 0; e < V; ++e) {
      const int sx = c * V + e - s;
      if (sx >= 0 && sx < sp) sm[base + e] = v[e];
    }
  }
}

/// stage_store of a 16-byte chunk as loaded. FP16/BF16 chunks inside the row with an even shift
/// s are 4-byte aligned in shared memory and go out as four 32-bit stores.
template <class R>
__device__ inline void stage_store_chunk(R* sm, const uint4 t, int r, int c, int s, int sp,
                                         int nchunks) {
  if constexpr (sizeof(R) == 2) {
    if ((s & 1) == 0 && c > 0 && c < nchunks - 1) {
      unsigned* dst = reinterpret_cast<unsigned*>(sm + r * sp + c * 8 - s);
      dst[0] = t.x;
      dst[1] = t.y;
      dst[2] = t.z;
      dst[3] = t.w;
      return;
    }
  }
  constexpr int V = 16 / static_cast<int>(sizeof(R));
  R v[V];
  unpack16<R>(t, v);
  stage_store<R, V>(sm, v, r, c, s, sp, nchunks);
}

/// Stages image rows y0 .. y0 + nrows - 1, columns x0 .. x0 + sp - 1 (geometry.hpp's in(y, x),
/// boundary included) into sm[r * sp + (x - x0)]. Global reads are 16-byte aligned chunks,
/// coalesced along rows, kStageBatch of them issued per thread before any is used so that each
/// thread has that many loads in flight. A chunk that crosses an image edge, or any chunk of an
/// image whose rows are not 16-byte aligned, is read pixel by pixel with the boundary applied
/// (the rare path, not unrolled). Pixels are stored one by one because x0 is not chunk-aligned in
/// general; that is about one store per pixel, against KW^2 multiply-adds per output.
template <class R>
__device__ void stage_rows(const RegArgs& a, R* sm, long long y0, long long x0, int nrows, int sp,
                           int tid, int nthreads) {
  constexpr int V = 16 / static_cast<int>(sizeof(R));
  constexpr int B = register_tuning::kStageBatch;
  const R* img = static_cast<const R*>(a.c.image);
  const long long rows = a.c.rows, cols = a.c.cols;
  const long long xa = floor_div(x0, V) * V;
  const int s = static_cast<int>(x0 - xa);
  const int nchunks = (s + sp + V - 1) / V;
  const int dr = nthreads / nchunks, dc = nthreads - dr * nchunks;
  int r = tid / nchunks, c = tid - r * nchunks;
  if (a.vec_in && y0 >= 0 && y0 + nrows <= rows && xa >= 0 &&
      xa + static_cast<long long>(nchunks) * V <= cols) {
    // The whole staged region is inside the image (block-uniform): every chunk is a 16-byte
    // load, and the address advances with the (r, c) walk instead of being recomputed.
    const R* p = img + (y0 + r) * cols + xa + static_cast<long long>(c) * V;
    const long long step = dr * cols + static_cast<long long>(dc) * V;
    const long long wrap = cols - static_cast<long long>(nchunks) * V;
    while (r < nrows) {
      const int r0 = r, c0 = c;
      uint4 t[B];
      unsigned live = 0;
      HS_UNROLL
      for (int k = 0; k < B; ++k) {
        if (r < nrows) {
          live |= 1u << k;
          t[k] = __ldg(reinterpret_cast<const uint4*>(p));
        }
        p += step;
        c += dc;
        r += dr;
        if (c >= nchunks) {
          c -= nchunks;
          ++r;
          p += wrap;
        }
      }
      int rk = r0, ck = c0;
      HS_UNROLL
      for (int k = 0; k < B; ++k) {
        if (live & (1u << k)) stage_store_chunk<R>(sm, t[k], rk, ck, s, sp, nchunks);
        stage_step(rk, ck, dr, dc, nchunks);
      }
    }
    return;
  }
  while (r < nrows) {
    const int r0 = r, c0 = c;
    uint4 t[B];
    unsigned fast = 0, live = 0;
    HS_UNROLL
    for (int k = 0; k < B; ++k) {
      if (r < nrows) {
        live |= 1u << k;
        const long long y = y0 + r, xc = xa + static_cast<long long>(c) * V;
        if (a.vec_in &&
            static_cast<unsigned long long>(y) < static_cast<unsigned long long>(rows) && xc >= 0 &&
            xc + V <= cols) {
          t[k] = __ldg(reinterpret_cast<const uint4*>(img + y * cols + xc));
          fast |= 1u << k;
        }
      }
      stage_step(r, c, dr, dc, nchunks);
    }
    int rk = r0, ck = c0;
    HS_UNROLL
    for (int k = 0; k < B; ++k) {
      if (fast & (1u << k)) stage_store_chunk<R>(sm, t[k], rk, ck, s, sp, nchunks);
      stage_step(rk, ck, dr, dc, nchunks);
    }
    if (const unsigned slow = live & ~fast) {  // image edges, unaligned images
      rk = r0;
      ck = c0;
      HS_NO_UNROLL
      for (int k = 0; k < B; ++k) {
        if (slow & (1u << k)) {
          R v[V];
          const long long xc = xa + static_cast<long long>(ck) * V;
          HS_UNROLL
          for (int e = 0; e < V; ++e)
            v[e] = load_bounded(img, rows, cols, a.c.circular != 0, y0 + rk, xc + e);
          stage_store<R, V>(sm, v, rk, ck, s, sp, nchunks);
        }
        stage_step(rk, ck, dr, dc, nchunks);
      }
    }
  }
}

/// Reads NV 16-byte vectors of a shared-memory row into 32-bit words.
template <int NV>
__device__ inline void load_words(const void* p, unsigned (&w)[4 * NV]) {
  const uint4* src = static_cast<const uint4*>(p);
  HS_UNROLL
  for (int n = 0; n < NV; ++n) {
    const uint4 t = src[n];
    w[4 * n] = t.x;
    w[4 * n + 1] = t.y;
    w[4 * n + 2] = t.z;
    w[4 * n + 3] = t.w;
  }
}

/// Element e of a word array, in the arithmetic type (FP32 or FP64 arithmetic only).
template <class Prec, int N>
__device__ inline typename Prec::A element(const unsigned (&w)[N], int e) {
  if constexpr (std::is_same_v<Prec, PrecSingle>) {
    return __uint_as_float(w[e]);
  } else if constexpr (std::is_same_v<Prec, PrecDouble>) {
    return __hiloint2double(static_cast<int>(w[2 * e + 1]), static_cast<int>(w[2 * e]));
  } else if constexpr (std::is_same_v<Prec, PrecMixed>) {
    const __half2 h = bit_as<__half2>(w[e >> 1]);
    return (e & 1) ? __high2float(h) : __low2float(h);
  } else {
    static_assert(std::is_same_v<Prec, PrecBF16>);
    return __uint_as_float((e & 1) ? (w[e >> 1] & 0xffff0000u) : (w[e >> 1] << 16));
  }
}

/// The output words of one accumulator row: P storage values packed into 32-bit words.
template <class Prec, int P>
struct OutWords {
  static constexpr int kWords = P * static_cast<int>(sizeof(typename Prec::R)) / 4;
  unsigned w[kWords];
};

template <class Prec, int P>
__device__ inline OutWords<Prec, P> pack_outputs(const typename Prec::A (&acc)[P]) {
  OutWords<Prec, P> o;
  if constexpr (std::is_same_v<Prec, PrecSingle>) {
    HS_UNROLL
    for (int p = 0; p < P; ++p) o.w[p] = __float_as_uint(acc[p]);
  } else if constexpr (std::is_same_v<Prec, PrecDouble>) {
    HS_UNROLL
    for (int p = 0; p < P; ++p) {
      o.w[2 * p] = static_cast<unsigned>(__double2loint(acc[p]));
      o.w[2 * p + 1] = static_cast<unsigned>(__double2hiint(acc[p]));
    }
  } else if constexpr (std::is_same_v<Prec, PrecMixed>) {
    HS_UNROLL
    for (int p = 0; p < P; p += 2)
      o.w[p / 2] = bit_as<unsigned>(__floats2half2_rn(acc[p], acc[p + 1]));
  } else {
    static_assert(std::is_same_v<Prec, PrecBF16>);
    HS_UNROLL
    for (int p = 0; p < P; p += 2)
      o.w[p / 2] = bit_as<unsigned>(__floats2bfloat162_rn(acc[p], acc[p + 1]));
  }
  return o;
}

/// Output p of a packed row, as raw storage bits (p a compile-time index after unrolling).
template <class Prec, int P>
__device__ inline typename Prec::R output_bits(const OutWords<Prec, P>& o, int p) {
  using R = typename Prec::R;
  if constexpr (sizeof(R) == 2)
    return static_cast<R>((p & 1) ? o.w[p >> 1] >> 16 : o.w[p >> 1] & 0xffffu);
  else if constexpr (sizeof(R) == 4)
    return o.w[p];
  else
    return o.w[2 * p] | (static_cast<R>(o.w[2 * p + 1]) << 32);
}

/// Stores P outputs of row i from column j0 (16-byte stores where aligned and inside). For
/// FP16/BF16 storage returns a bit per stored output that is inf or NaN (bit p for column j0 + p):
/// the caller recounts those against their inputs (count_overflow) once per tile.
template <class Prec, int P>
__device__ inline unsigned store_outputs(const RegArgs& a, const OutWords<Prec, P>& o, long long i,
                                         long long j0) {
  using R = typename Prec::R;
  constexpr int NW = OutWords<Prec, P>::kWords;
  if (i >= a.c.out_rows) return 0;
  R* dst = static_cast<R*>(a.c.out) + i * a.c.out_cols + j0;
  if (a.vec_out && j0 + P <= a.c.out_cols) {
    static_assert(NW % 4 == 0);
    HS_UNROLL
    for (int n = 0; n < NW / 4; ++n)
      reinterpret_cast<uint4*>(dst)[n] =
          make_uint4(o.w[4 * n], o.w[4 * n + 1], o.w[4 * n + 2], o.w[4 * n + 3]);
  } else {
    HS_UNROLL
    for (int p = 0; p < P; ++p)
      if (j0 + p < a.c.out_cols) dst[p] = output_bits<Prec, P>(o, p);
  }
  unsigned mask = 0;
  if constexpr (Prec::kNarrow) {
    unsigned flags = 0;
    HS_UNROLL
    for (int n = 0; n < NW; ++n) flags |= nonfinite_pair_flags<Prec>(o.w[n]);
    if (flags) {  // rare
      HS_UNROLL
      for (int p = 0; p < P; ++p)
        if (j0 + p < a.c.out_cols && is_nonfinite_bits<Prec>(output_bits<Prec, P>(o, p)))
          mask |= 1u << p;
    }
  }
  return mask;
}

/// Counts the outputs flagged by store_outputs (bit q * P + p: row i0 + q, column j0 + p) whose
/// inputs are all finite: those overflowed in the arithmetic. One call site per kernel, so the
/// slow footprint scan is inlined once.
template <class Prec, int P>
__device__ inline void count_overflow(const RegArgs& a, unsigned long long mask, long long i0,
                                      long long j0, unsigned& overflow) {
  while (mask) {
    const int b = __ffsll(static_cast<long long>(mask)) - 1;
    mask &= mask - 1;
    if (footprint_finite<Prec>(a.c, i0 + b / P, j0 + b % P)) ++overflow;
  }
}

/// Adds input row r of a thread's window (raw words w, as loaded) into its Q x P accumulators:
/// acc[q][p] += k(u, v) * x[SHIFT + p + KW - 1 - v] for output row q, u = q + KW - 1 - r, where
/// x is the row's pixels from the window's first column (SHIFT pixels left of what output 0's
/// last tap reads). Callers walk r downwards, so every output sees its taps in (u, v) ascending
/// order, the order the tests emulate bit for bit. FP32/FP64 arithmetic; shared by the tile and
/// the streaming kernels.
template <class Prec, int KW, int P, int Q, int SHIFT, int N>
__device__ inline void accumulate_row(const RegArgs& a, const unsigned (&w)[N], int r,
                                      typename Prec::A (&acc)[Q][P]) {
  constexpr int E = N * 4 / static_cast<int>(sizeof(typename Prec::R));  // pixels in w
  static_assert(SHIFT + P + KW - 1 <= E);
  typename Prec::A x[E];
  HS_UNROLL
  for (int e = 0; e < E; ++e) x[e] = element<Prec>(w, e);
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    const int u = q + KW - 1 - r;  // kernel row this input row is for output row q
    if (u < 0 || u >= KW) continue;
    HS_UNROLL
    for (int v = 0; v < KW; ++v) {
      const auto k = coef<Prec, true>(a, u * KW + v);
      HS_UNROLL
      for (int p = 0; p < P; ++p) acc[q][p] = Prec::fma(k, x[SHIFT + p + KW - 1 - v], acc[q][p]);
    }
  }
}

/// accumulate_row in packed FP16: accumulator pair m (outputs 2m, 2m + 1) takes the input pair
/// starting at s = SHIFT + 2m + KW - 1 - v, an aligned word of the row when s is even and a PRMT
/// of two words when odd.
template <int KW, int P, int Q, int SHIFT, int N>
__device__ inline void accumulate_row_half(const RegArgs& a, const unsigned (&w)[N], int r,
                                           __half2 (&acc)[Q][P / 2]) {
  static_assert(P % 2 == 0 && SHIFT + P + KW - 1 <= 2 * N);
  __half2 even[N], odd[N - 1];
  HS_UNROLL
  for (int m = 0; m < N; ++m) even[m] = bit_as<__half2>(w[m]);
  HS_UNROLL
  for (int m = 0; m + 1 < N; ++m) odd[m] = bit_as<__half2>(__byte_perm(w[m], w[m + 1], 0x5432));
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    const int u = q + KW - 1 - r;
    if (u < 0 || u >= KW) continue;
    HS_UNROLL
    for (int v = 0; v < KW; ++v) {
      const __half2 k = coef<PrecHalf, true>(a, u * KW + v);
      HS_UNROLL
      for (int m = 0; m < P / 2; ++m) {
        const int s = SHIFT + 2 * m + KW - 1 - v;
        acc[q][m] = __hfma2(k, (s & 1) ? odd[s >> 1] : even[s >> 1], acc[q][m]);
      }
    }
  }
}

/// The row sums of a rank-one kernel (k(u, v) = col[u] row[v]) for one input row of a thread's
/// window: s[p] = sum_v row[v] x[SHIFT + p + KW - 1 - v], v ascending, FP32 arithmetic.
template <class Prec, int KW, int P, int SHIFT, int N>
__device__ inline void separable_row_sums(const SepTaps& t, const unsigned (&w)[N],
                                          float (&sum)[P]) {
  constexpr int E = N * 4 / static_cast<int>(sizeof(typename Prec::R));
  static_assert(SHIFT + P + KW - 1 <= E && KW <= SepTaps::kMaxWidth);
  float x[E];
  HS_UNROLL
  for (int e = 0; e < E; ++e) x[e] = element<Prec>(w, e);
  HS_UNROLL
  for (int p = 0; p < P; ++p) sum[p] = t.row[0] * x[SHIFT + p + KW - 1];
  HS_UNROLL
  for (int v = 1; v < KW; ++v) {
    HS_UNROLL
    for (int p = 0; p < P; ++p) sum[p] = __fmaf_rn(t.row[v], x[SHIFT + p + KW - 1 - v], sum[p]);
  }
}

/// separable_row_sums in packed FP16 (half): pair m holds outputs 2m, 2m + 1; the input pair
/// starting at s is an aligned word when s is even and a PRMT of two words when odd; every
/// multiply-add rounds to FP16.
template <int KW, int P, int SHIFT, int N>
__device__ inline void separable_row_sums_half(const SepTaps& t, const unsigned (&w)[N],
                                               __half2 (&sum)[P / 2]) {
  static_assert(P % 2 == 0 && SHIFT + P + KW - 1 <= 2 * N && KW <= SepTaps::kMaxWidth);
  __half2 even[N], odd[N - 1];
  HS_UNROLL
  for (int m = 0; m < N; ++m) even[m] = bit_as<__half2>(w[m]);
  HS_UNROLL
  for (int m = 0; m + 1 < N; ++m) odd[m] = bit_as<__half2>(__byte_perm(w[m], w[m + 1], 0x5432));
  const auto pair = [&](int s) { return (s & 1) ? odd[s >> 1] : even[s >> 1]; };
  HS_UNROLL
  for (int m = 0; m < P / 2; ++m)
    sum[m] = __hmul2(bit_as<__half2>(t.row2[0]), pair(SHIFT + 2 * m + KW - 1));
  HS_UNROLL
  for (int v = 1; v < KW; ++v) {
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m)
      sum[m] = __hfma2(bit_as<__half2>(t.row2[v]), pair(SHIFT + 2 * m + KW - 1 - v), sum[m]);
  }
}

/// accumulate_row for a rank-one kernel (the streaming kernel's SEP mode, separable_cuda): the
/// row sums once per input row, then acc[q][p] += col[u] s[p] for every output row q the row
/// serves, u = q + KW - 1 - r. That is KW (Q + KW - 1) / Q + KW multiply-adds per output instead
/// of KW^2 (7x7, Q = 4: 24.5, not 49).
template <class Prec, int KW, int P, int Q, int SHIFT, int N>
__device__ inline void accumulate_row_separable(const SepTaps& t, const unsigned (&w)[N], int r,
                                                float (&acc)[Q][P]) {
  float sum[P];
  separable_row_sums<Prec, KW, P, SHIFT>(t, w, sum);
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    const int u = q + KW - 1 - r;
    if (u < 0 || u >= KW) continue;
    HS_UNROLL
    for (int p = 0; p < P; ++p) acc[q][p] = __fmaf_rn(t.col[u], sum[p], acc[q][p]);
  }
}

/// accumulate_row_separable in packed FP16 (half), the row sums rounded to FP16 as every FP16
/// multiply-add.
template <int KW, int P, int Q, int SHIFT, int N>
__device__ inline void accumulate_row_separable_half(const SepTaps& t, const unsigned (&w)[N],
                                                     int r, __half2 (&acc)[Q][P / 2]) {
  __half2 sum[P / 2];
  separable_row_sums_half<KW, P, SHIFT>(t, w, sum);
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    const int u = q + KW - 1 - r;
    if (u < 0 || u >= KW) continue;
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m)
      acc[q][m] = __hfma2(bit_as<__half2>(t.col2[u]), sum[m], acc[q][m]);
  }
}

/// Stores Q accumulator rows of P outputs (rows i0.., columns j0..) and returns store_outputs'
/// non-finite bits, row q at bit q * P.
template <class Prec, int P, int Q>
__device__ inline unsigned long long store_rows(const RegArgs& a,
                                                const typename Prec::A (&acc)[Q][P], long long i0,
                                                long long j0) {
  static_assert(P * Q <= 64);  // one overflow bit per output in a 64-bit mask
  unsigned long long bad = 0;
  HS_UNROLL
  for (int q = 0; q < Q; ++q)
    bad |= static_cast<unsigned long long>(
               store_outputs<Prec, P>(a, pack_outputs<Prec, P>(acc[q]), i0 + q, j0))
           << (q * P);
  return bad;
}

/// store_rows for packed FP16 accumulators.
template <int P, int Q>
__device__ inline unsigned long long store_rows_half(const RegArgs& a,
                                                     const __half2 (&acc)[Q][P / 2], long long i0,
                                                     long long j0) {
  static_assert(P * Q <= 64);
  unsigned long long bad = 0;
  HS_UNROLL
  for (int q = 0; q < Q; ++q) {
    OutWords<PrecHalf, P> o;
    HS_UNROLL
    for (int m = 0; m < P / 2; ++m) o.w[m] = bit_as<unsigned>(acc[q][m]);
    bad |= static_cast<unsigned long long>(store_outputs<PrecHalf, P>(a, o, i0 + q, j0)) << (q * P);
  }
  return bad;
}

}  // namespace halfscope::conv::kernels

#include "conv/kernels/register_generic.cuh"
#include "conv/kernels/register_stream.cuh"
#include "conv/kernels/register_tile.cuh"
