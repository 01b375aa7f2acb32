// Conversions FP32 <-> FP16 / BF16 with counted overflow and underflow (the SP2HP of study 002).
//
// Rounding is round-to-nearest-even on both CPU and GPU, so the two give identical bits. Nothing is
// silent: every conversion can fill a ConversionReport, and `require_finite` turns an overflow
// into a NumericalError whose message says how many values overflowed and where.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "halfscope/core/half.hpp"

namespace halfscope {

/// What happened to the values of one narrowing conversion.
struct ConversionReport {
  std::int64_t count = 0;      // values converted
  std::int64_t overflow = 0;   // finite inputs that became +-inf (|x| >= 65520 for FP16)
  std::int64_t underflow = 0;  // nonzero inputs that became +-0
  std::int64_t subnormal = 0;  // nonzero results in the subnormal range (precision lost)
  std::int64_t nan = 0;        // NaN inputs (carried through as NaN)
  std::int64_t first_overflow_index = -1;  // linear index of the first overflow, -1 if none

  /// No finite value became infinite. NaN inputs are carried through as NaN (masked pixels are
  /// data, not a conversion failure); callers report `nan` when they want to.
  [[nodiscard]] bool clean() const noexcept { return overflow == 0; }
  ConversionReport& operator+=(const ConversionReport& o) noexcept;
  /// "1048576 values: 3 overflowed (first at 17), 12 underflowed to zero, 0 subnormal, 0 NaN".
  [[nodiscard]] std::string summary() const;
};

/// Throws NumericalError naming `what` if the report shows overflow.
void require_finite(const ConversionReport& report, std::string_view what);

/// Host conversions. `out` must have the size of `in`. Return the counts.
ConversionReport convert_to_half(std::span<const float> in, std::span<Half> out);
ConversionReport convert_to_bf16(std::span<const float> in, std::span<BFloat16> out);
ConversionReport convert_to_half(std::span<const double> in, std::span<Half> out);
ConversionReport convert_to_bf16(std::span<const double> in, std::span<BFloat16> out);
/// Widening conversions are exact.
void convert_to_float(std::span<const Half> in, std::span<float> out);
void convert_to_float(std::span<const BFloat16> in, std::span<float> out);

/// Classifies one conversion of `x` whose rounded result has the given bits (FP16 layout when
/// `half_layout`, else BF16) into `r`. Shared by the CPU loops and checked against the GPU counts.
void classify_conversion(double x, std::uint16_t bits, bool half_layout, std::int64_t index,
                         ConversionReport& r) noexcept;

}  // namespace halfscope
