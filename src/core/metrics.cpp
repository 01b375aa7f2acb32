#include "halfscope/core/metrics.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope {

namespace {
// Kahan-Babuska (Neumaier) summation: the metric must not add error of its own over 10^8 terms.
struct CompensatedSum {
  double sum = 0, c = 0;
  void add(double x) {
    const double t = sum + x;
    c += std::abs(sum) >= std::abs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  [[nodiscard]] double value() const { return sum + c; }
};
}  // namespace

double mean_relative_error(std::span<const double> ref, std::span<const double> x) {
  if (ref.size() != x.size())
    throw InvalidInput("mean_relative_error: reference has " + std::to_string(ref.size()) +
                       " values, result " + std::to_string(x.size()));
  if (ref.empty()) return 0;
  CompensatedSum s;
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (ref[i] != 0) s.add(std::abs((x[i] - ref[i]) / ref[i]));
  return s.value() / static_cast<double>(ref.size());
}

ErrorMetrics compare(const Array& ref, const Array& x) {
  if (ref.shape() != x.shape())
    throw InvalidInput("compare: reference " + ref.describe() + " and result " + x.describe() +
                       " differ in shape");
  const Array r64 = ref.dtype() == DType::f64 ? ref.contiguous() : ref.astype(DType::f64);
  const Array x64 = x.dtype() == DType::f64 ? x.contiguous() : x.astype(DType::f64);
  const double* pr = r64.data_as<double>();
  const double* px = x64.data_as<double>();
  const std::int64_t n = ref.size();
  ErrorMetrics m;
  CompensatedSum rel, diff2, ref2;
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(px[i])) {
      ++m.nonfinite;
      continue;
    }
    const double d = px[i] - pr[i];
    if (pr[i] != 0) rel.add(std::abs(d / pr[i]));
    m.max_abs = std::max(m.max_abs, std::abs(d));
    diff2.add(d * d);
    ref2.add(pr[i] * pr[i]);
  }
  if (m.nonfinite > 0) {
    const double inf = std::numeric_limits<double>::infinity();
    m.mre = m.max_abs = m.rel_frobenius = inf;
    return m;
  }
  m.mre = n ? rel.value() / static_cast<double>(n) : 0;
  const double num = std::sqrt(diff2.value()), den = std::sqrt(ref2.value());
  m.rel_frobenius = den > 0 ? num / den : (num > 0 ? std::numeric_limits<double>::infinity() : 0);
  return m;
}

}  // namespace halfscope
