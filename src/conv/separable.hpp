// Internal: low-rank (separable) kernels. A kernel K (krows x kcols) that is, within its own
// storage rounding, a sum of `rank` outer products K = sum_r c_r r_r^T convolves as `rank` pairs
// of 1-D passes (a row pass along x with r_r, then a column pass along y with c_r): (krows +
// kcols) multiply-adds per output and rank instead of krows * kcols. Gaussian kernels (the
// study's, and most beam and smoothing kernels) have rank 1; the method `separable` runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv {

/// The factors of a low-rank kernel: K(u, v) ~= sum_r col[r * krows + u] * row[r * kcols + v].
struct SeparableFactors {
  int rank = 0;
  std::int64_t krows = 0, kcols = 0;
  std::vector<double> col;  // rank x krows
  std::vector<double> row;  // rank x kcols
  /// sum |K - sum_r c_r r_r^T| / sum |K| of the factorization (0 for a zero kernel).
  double residual = 0;
};

/// The most terms the method takes: beyond a few, two 1-D passes per term stop paying off.
inline constexpr int kSeparableMaxRank = 4;
/// Auto tests a GPU kernel for separability from this width (max(krows, kcols)) on: at 7x7 the
/// rank-one streaming kernel beats the direct one (H100, 8192^2: mixed 0.152 against 0.220 ms,
/// whole calls, the device kernel's read-back included); below it a direct method costs at most
/// 25 multiply-adds per output and the read-back (a synchronisation) is not worth it.
inline constexpr std::int64_t kSeparableMinWidth = 7;

/// The precision the separable method runs a request in: split as single (the same FP32 storage
/// and FP32-grade result), every other precision as it is.
constexpr Precision separable_precision(Precision p) noexcept {
  return p == Precision::Split ? Precision::Single : p;
}

/// The accepted residual for precision p: 4 x the storage unit roundoff of the kernel, so the
/// factors differ from the kernel by no more than the kernel's own rounding to its storage type.
double separable_tolerance(Precision p) noexcept;

/// The most terms worth running for a krows x kcols kernel: rank r costs r (krows + kcols)
/// multiply-adds per output and two passes over memory, the direct sum krows * kcols; r is kept
/// where it costs at most half the direct sum, capped at kSeparableMaxRank (0: never worth it).
int separable_worthwhile_rank(std::int64_t krows, std::int64_t kcols) noexcept;

/// Adaptive cross approximation with full pivoting in FP64: subtracts the outer product through
/// the largest remaining entry until sum |residual| <= tol * sum |K|. Returns the factors of at
/// most max_rank terms, or nothing when more are needed or an entry is not finite.
std::optional<SeparableFactors> factor_separable(const double* k, std::int64_t krows,
                                                 std::int64_t kcols, double tol, int max_rank);

/// As above for a kernel array (host or device, any real dtype; a device array is read back).
std::optional<SeparableFactors> factor_separable(const Array& kernel, double tol, int max_rank);

}  // namespace halfscope::conv
