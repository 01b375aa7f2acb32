#include "conv/separable.hpp"

#include <algorithm>
#include <cmath>

namespace halfscope::conv {

double separable_tolerance(Precision p) noexcept {
  return 4.0 * storage_unit_roundoff(p);
}

int separable_worthwhile_rank(std::int64_t krows, std::int64_t kcols) noexcept {
  const double direct = static_cast<double>(krows) * static_cast<double>(kcols);
  const double per_term = static_cast<double>(krows + kcols);
  const auto r = static_cast<std::int64_t>(std::floor(direct / (2 * per_term)));
  return static_cast<int>(std::clamp<std::int64_t>(r, 0, kSeparableMaxRank));
}

std::optional<SeparableFactors> factor_separable(const double* k, std::int64_t krows,
                                                 std::int64_t kcols, double tol, int max_rank) {
  const std::int64_t n = krows * kcols;
  std::vector<double> res(k, k + n);
  double total = 0;
  for (double v : res) {
    if (!std::isfinite(v)) return std::nullopt;
    total += std::abs(v);
  }
  SeparableFactors f;
  f.krows = krows;
  f.kcols = kcols;
  if (total == 0) {  // the zero kernel: one zero term
    f.rank = 1;
    f.col.assign(static_cast<std::size_t>(krows), 0.0);
    f.row.assign(static_cast<std::size_t>(kcols), 0.0);
    return f;
  }
  for (;;) {
    std::int64_t pivot = 0;
    double left = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      left += std::abs(res[i]);
      if (std::abs(res[i]) > std::abs(res[pivot])) pivot = i;
    }
    f.residual = left / total;
    if (f.residual <= tol && f.rank > 0) return f;
    if (f.rank == max_rank) return std::nullopt;
    const std::int64_t p = pivot / kcols, q = pivot % kcols;
    const double inv = 1.0 / res[pivot];
    const std::size_t c0 = f.col.size(), r0 = f.row.size();
    for (std::int64_t u = 0; u < krows; ++u) f.col.push_back(res[u * kcols + q]);
    for (std::int64_t v = 0; v < kcols; ++v) f.row.push_back(res[p * kcols + v] * inv);
    for (std::int64_t u = 0; u < krows; ++u)
      for (std::int64_t v = 0; v < kcols; ++v)
        res[u * kcols + v] -=
            f.col[c0 + static_cast<std::size_t>(u)] * f.row[r0 + static_cast<std::size_t>(v)];
    ++f.rank;
  }
}

std::optional<SeparableFactors> factor_separable(const Array& kernel, double tol, int max_rank) {
  const Array host = kernel.on_device() ? kernel.to(Memory::host) : kernel;
  const Array k = host.astype(DType::f64).contiguous();
  return factor_separable(k.data_as<double>(), k.dim(0), k.dim(1), tol, max_rank);
}

}  // namespace halfscope::conv
