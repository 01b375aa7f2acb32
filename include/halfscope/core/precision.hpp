// Precision: how an operation stores its data and how it computes (DESIGN.md section 2).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "halfscope/core/dtype.hpp"

namespace halfscope {

/// How data is stored and computed. `Split` keeps FP32 in memory and runs FP16 tensor cores on a
/// hi + lo split of each operand with FP32 accumulation, for FP32-grade results.
enum class Precision { Double, Single, TF32, Half, Mixed, BF16, Split };

/// The CLI / Python name: "double", "single", "tf32", "half", "mixed", "bf16", "split".
std::string_view precision_name(Precision p) noexcept;

/// Parses a name (case-insensitive; "fp64"/"fp32"/"fp16" are accepted as aliases). Throws
/// InvalidInput naming the text and listing the valid names.
Precision parse_precision(std::string_view text);

/// Every precision, in the order above.
std::span<const Precision> all_precisions() noexcept;

/// Unit roundoff of the storage format (2^-53, 2^-24, 2^-11 for FP16 storage, 2^-8 for BF16).
double storage_unit_roundoff(Precision p) noexcept;

/// Unit roundoff of the arithmetic (FP32 for Mixed, BF16 and Split; 2^-11 for TF32's products).
double compute_unit_roundoff(Precision p) noexcept;

/// The storage dtype of a precision: f64 (double), f32 (single, tf32, split), f16 (half, mixed),
/// bf16 (bf16). The one mapping every operation and backend uses.
constexpr DType storage_dtype(Precision p) noexcept {
  switch (p) {
    case Precision::Double:
      return DType::f64;
    case Precision::Half:
    case Precision::Mixed:
      return DType::f16;
    case Precision::BF16:
      return DType::bf16;
    case Precision::Single:
    case Precision::TF32:
    case Precision::Split:
      return DType::f32;
  }
  return DType::f32;
}

/// "single, half, mixed": for messages that list what a method supports.
std::string precision_list(std::span<const Precision> ps);

}  // namespace halfscope
