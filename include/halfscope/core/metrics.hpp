// Accuracy metrics against an FP64 reference.
#pragma once

#include <cstdint>
#include <span>

#include "halfscope/core/array.hpp"

namespace halfscope {

/// Errors of one result against its FP64 reference.
struct ErrorMetrics {
  double mre = 0;              // mean relative error, study 000 eq. (5)
  double max_abs = 0;          // max |x - ref|
  double rel_frobenius = 0;    // ||x - ref||_F / ||ref||_F (0 when both are zero)
  std::int64_t nonfinite = 0;  // NaN or inf entries in x (every metric is then +inf)
};

/// Mean relative error of study 000, eq. (5): (1/N) sum |(x_i - ref_i) / ref_i| over the entries
/// whose reference is nonzero; entries with ref_i == 0 contribute 0 (and still count in N).
double mean_relative_error(std::span<const double> ref, std::span<const double> x);

/// All metrics of `x` (any dtype and layout, host) against `ref` (same shape). Sums are in double
/// with compensated (Kahan-Babuska) summation so the metric itself adds no visible error.
ErrorMetrics compare(const Array& ref, const Array& x);

}  // namespace halfscope
