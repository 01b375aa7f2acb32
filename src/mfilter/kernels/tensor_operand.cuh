// Device helpers of the tensor-core matched filter: how a float becomes an mma operand in each
// precision (src/mfilter/emulation.hpp's rounding: RNE, power-of-two scaling, hi + lo split), the
// mma.sync wrapper, and the template preparation kernel (operands in mma fragment order).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/kernels/async_copy.cuh"
#include "mfilter/emulation.hpp"
#include "mfilter/kernels/tensor_tuning.hpp"

namespace halfscope::mfilter::tensor {

/// The three tensor precisions as compile-time operand kinds.
enum class Operand { Mixed, BF16, Split };

/// Operand parts per value: hi only, or hi + lo (split).
template <Operand O>
inline constexpr int kParts = O == Operand::Split ? 2 : 1;

/// Power-of-two shift applied before rounding (emulation.hpp's scale_shift): FP16 needs it,
/// BF16 has FP32's exponent range and is rounded unscaled.
template <Operand O>
__host__ __device__ inline int operand_shift(float max_abs) {
  return O == Operand::BF16 ? 0 : scale_shift(max_abs);
}

/// hi part (RNE) of an already scaled value, as raw 16 bits.
template <Operand O>
__device__ inline std::uint16_t round_hi(float v) {
  if constexpr (O == Operand::BF16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  } else {
    return __half_as_ushort(__float2half_rn(v));
  }
}

/// 2^e as a float when it is a normal number (|e| small enough), else 0: multiplying by it is
/// then exactly scalbnf(x, e) (a product with a power of two rounds once, like scalbnf).
__device__ inline float pow2_or_zero(int e) {
  return e >= -126 && e <= 127 ? __int_as_float((e + 127) << 23) : 0.0f;
}

/// x * 2^e with the factor from pow2_or_zero (0: out of range, take the exact library path).
__device__ inline float times_pow2(float x, float factor, int e) {
  return factor != 0.0f ? x * factor : scalbnf(x, e);
}

/// The 16-bit operands (RNE) of two already scaled values in one 32-bit word, `first` in the
/// low half: one conversion instruction for both (F2FP).
template <Operand O>
__device__ __forceinline__ std::uint32_t pack_hi(float first, float second) {
  if constexpr (O == Operand::BF16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(first, second);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(first, second);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

/// split's lo parts of the same two values, given their hi word: the FP32 remainder v - hi (exact:
/// hi is within half an FP16 ulp of v) rounded to FP16, for both at once.
__device__ __forceinline__ std::uint32_t pack_lo(float first, float second, std::uint32_t hi) {
  const float2 back = __half22float2(*reinterpret_cast<const __half2*>(&hi));
  const __half2 l = __floats2half2_rn(first - back.x, second - back.y);
  return *reinterpret_cast<const std::uint32_t*>(&l);
}

/// x * 2^shift, exactly as scalbnf: one FP32 product, or two where 2^shift is not a normal float
/// (shift > 127: data below 2^-112; scaling up is exact as long as the result does not overflow,
/// and scaled operands stay below 2^15).
struct Pow2Scale {
  float f1 = 1.0f, f2 = 1.0f;
  __device__ explicit Pow2Scale(int shift) {
    const int s1 = shift > 127 ? 127 : shift;
    f1 = pow2_or_zero(s1);
    f2 = pow2_or_zero(shift - s1);
  }
  /// kTwo: the two-product path (f2 != 1); chosen once per tile, outside the loops.
  template <bool kTwo>
  __device__ __forceinline__ float apply(float x) const {
    return kTwo ? x * f1 * f2 : x * f1;
  }
};

/// True when a 16-bit operand is inf or NaN (FP16: exponent 0x1f; BF16: exponent 0xff).
template <Operand O>
__device__ inline bool not_finite(std::uint16_t bits) {
  return O == Operand::BF16 ? (bits & 0x7f80u) == 0x7f80u : (bits & 0x7c00u) == 0x7c00u;
}

/// d += a * b on the tensor cores, m16n8k16, FP32 accumulation; FP16 operands for Mixed and
/// Split, BF16 for BF16.
template <Operand O>
__device__ __forceinline__ void mma(float (&d)[4], const uint4& a, std::uint32_t b0,
                                    std::uint32_t b1) {
  if constexpr (O == Operand::BF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  }
}

/// FP64 statistics of one template channel x[0..K), computed by one warp (every lane gets them):
/// the mean (full normalization, else 0), 1 / sqrt(energy after demeaning) (0 when flat or not
/// `real`: a padding row) and the operand shift of the largest demeaned value.
struct TemplateStats {
  double mean = 0, inv_norm = 0;
  int shift = 0;
  bool flat = true;
};
template <Operand O>
__device__ TemplateStats template_stats(const float* x, bool real, std::int64_t K, bool full) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  double sum = 0, raw = 0;
  for (std::int64_t k = lane; real && k < K; k += 32) {
    sum += x[k];
    raw += static_cast<double>(x[k]) * x[k];
  }
  for (int o = 16; o > 0; o /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    raw += __shfl_xor_sync(0xffffffffu, raw, o);
  }
  TemplateStats s;
  s.mean = full ? sum / static_cast<double>(K) : 0.0;
  double energy = 0;
  float max_abs = 0;
  for (std::int64_t k = lane; real && k < K; k += 32) {
    const double y = x[k] - s.mean;
    energy += y * y;
    max_abs = fmaxf(max_abs, static_cast<float>(fabs(y)));
  }
  for (int o = 16; o > 0; o /= 2) {
    energy += __shfl_xor_sync(0xffffffffu, energy, o);
    max_abs = fmaxf(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, o));
  }
  s.flat = !real || energy == 0.0 || energy <= kFlatRelative * raw;
  s.shift = operand_shift<O>(max_abs);
  s.inv_norm = s.flat ? 0.0 : 1.0 / sqrt(energy);
  return s;
}

/// The operand parts of template value x under its channel's statistics: hi (and, for split, lo)
/// as raw 16 bits, counting a non-finite hi into `bad`; returns the value they represent,
/// unscaled, in FP64 (what the row sum of full normalization adds up).
template <Operand O>
__device__ double template_operand(float x, const TemplateStats& s, std::uint16_t& hi,
                                   std::uint16_t& lo, int* bad) {
  const double scaled = ldexp(x - s.mean, s.shift);
  hi = round_hi<O>(static_cast<float>(scaled));
  lo = 0;
  if (not_finite<O>(hi)) atomicAdd(bad, 1);
  double back = O == Operand::BF16 ? static_cast<double>(__bfloat162float(__ushort_as_bfloat16(hi)))
                                   : static_cast<double>(__half2float(__ushort_as_half(hi)));
  if constexpr (O == Operand::Split) {
    lo = __half_as_ushort(__float2half_rn(static_cast<float>(scaled - back)));
    back += __half2float(__ushort_as_half(lo));
  }
  return ldexp(back, -s.shift);
}

/// Per template channel (t, c): the factors the epilogue needs and the operands in mma A
/// fragment order. One warp per (t, c) of the zero-padded T_pad = 16 G templates.
///   row_factor[c * T_pad + t] = 2^-shift / sqrt(E_T)   (0 for a flat or padding template)
///   row_sum[c * T_pad + t]    = (sum_k of the operand values, unscaled) / sqrt(E_T)
/// row_sum corrects full normalization exactly for the rounding of the demeaned template:
/// num = sum_k t'_k S_k - mean_S * sum_k t'_k with t' the operand actually multiplied.
/// Fragment layout (16-bit units): [c][group][chunk p][part][lane][8], the 8 being the lane's
/// a0..a3 registers of m16n8k16 (rows g, g + 8; columns 2q, 2q + 1, 2q + 8, 2q + 9).
template <Operand O>
__global__ void prepare_templates_kernel(const float* templates, std::int64_t T, std::int64_t C,
                                         std::int64_t K, std::int64_t t_pad, std::int64_t chunks,
                                         bool full, std::uint16_t* frags, float* row_factor,
                                         float* row_sum, int* bad) {
  constexpr int parts = kParts<O>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const std::int64_t groups = t_pad / kTemplatesPerTile;
  for (std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       w < C * t_pad; w += warps) {
    const std::int64_t c = w / t_pad, t = w % t_pad;
    const bool real = t < T;
    const float* x = templates + (real ? (t * C + c) * K : 0);
    const TemplateStats st = template_stats<O>(x, real, K, full);
    double op_sum = 0;
    const std::int64_t g0 = t / kTemplatesPerTile;
    const int row = static_cast<int>(t % kTemplatesPerTile);
    for (std::int64_t k = lane; k < chunks * 16; k += 32) {
      std::uint16_t hi = 0, lo = 0;
      if (!st.flat && k < K) op_sum += template_operand<O>(x[k], st, hi, lo, bad);
      const std::int64_t p = k / 16;
      const int q = static_cast<int>(k % 16);
      const int frag_lane = (row % 8) * 4 + (q % 8) / 2;
      const int reg = row / 8 + 2 * (q / 8);
      const std::int64_t base = ((c * groups + g0) * chunks + p) * parts;
      frags[((base * 32) + frag_lane) * 8 + reg * 2 + q % 2] = hi;
      if constexpr (O == Operand::Split)
        frags[(((base + 1) * 32) + frag_lane) * 8 + reg * 2 + q % 2] = lo;
    }
    for (int o = 16; o > 0; o /= 2) op_sum += __shfl_xor_sync(0xffffffffu, op_sum, o);
    if (lane == 0) {
      row_factor[c * t_pad + t] = static_cast<float>(ldexp(st.inv_norm, -st.shift));
      row_sum[c * t_pad + t] = full ? static_cast<float>(op_sum * st.inv_norm) : 0.0f;
    }
  }
}

// The cp.async helpers live in core (the convolution's rolling kernel uses them too).
using halfscope::kernels::cp_async16;
using halfscope::kernels::cp_async4;
using halfscope::kernels::cp_async_commit;
using halfscope::kernels::cp_async_wait_all;

}  // namespace halfscope::mfilter::tensor
