// A second, independent implementation of src/mfilter/emulation.hpp's arithmetic contract,
// written from its text alone, for one (template channel, window) pair: the numerator a CPU
// emulation or a GPU kernel must produce for `half`, `mixed`, `bf16` and `split`. The CPU
// emulation is tested to match it to the last float32 bit of the numerator (up to the final
// normalization); GPU tests may use it to separate ordering differences from contract violations.
#pragma once

#include <cmath>
#include <cstdint>

#include "halfscope/core/half.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::mftest {

/// shift with M 2^shift in [2^14, 2^15): 15 - (exponent of M with mantissa in [0.5, 1)).
inline int contract_shift(float m) {
  if (!(m > 0.0f)) return 0;
  int e = 0;
  (void)std::frexp(m, &e);
  return 15 - e;
}

inline float to_fp16(float x) {
  return static_cast<float>(Half(x));
}

/// The contract's numerator for template channel `t` (K float32 values as the backend receives
/// them) against the window `w` (K float32 data samples). `mt`, `ms`: the global maxima (half).
inline double contract_numerator(Precision p, const float* t, const float* w, std::int64_t K,
                                 float mt = 1.0f, float ms = 1.0f) {
  if (p == Precision::Half) {
    Half acc(0.0f);
    for (std::int64_t k = 0; k < K; ++k) acc = acc + Half(t[k] / mt) * Half(w[k] / ms);
    return static_cast<double>(static_cast<float>(acc)) * mt * ms;
  }
  if (p == Precision::BF16) {
    float acc = 0;
    for (std::int64_t k = 0; k < K; ++k)
      acc += bf16_bits_to_float(float_to_bf16_bits_rne(t[k])) *
             bf16_bits_to_float(float_to_bf16_bits_rne(w[k]));
    return acc;
  }
  const bool split = p == Precision::Split;
  float acc = 0;
  for (std::int64_t k0 = 0; k0 < K; k0 += 16) {
    const std::int64_t k1 = k0 + 16 < K ? k0 + 16 : K;
    float mtb = 0, mwb = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      mtb = std::fmax(mtb, std::fabs(t[k]));
      mwb = std::fmax(mwb, std::fabs(w[k]));
    }
    const int a = contract_shift(mtb), d = contract_shift(mwb);
    float partial = 0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const float ty = std::ldexp(t[k], a), wy = std::ldexp(w[k], d);
      const float th = to_fp16(ty), wh = to_fp16(wy);
      partial += th * wh;
      if (split) {
        partial += th * to_fp16(wy - wh);
        partial += to_fp16(ty - th) * wh;
      }
    }
    acc += std::ldexp(partial, -(a + d));
  }
  return acc;
}

}  // namespace halfscope::mftest
