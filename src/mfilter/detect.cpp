// Detection on the network stack with EQcorrscan's semantics: per-template threshold (absolute
// or k x median |stack|), peaks of |stack| strictly above it that are local maxima, declustered
// strongest first (a weaker peak within the minimum separation of a kept one is dropped).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope {

namespace mfilter {

std::int64_t separation_in_correlations(std::int64_t min_separation, std::int64_t step) {
  return min_separation / step;
}

void validate_detect_options(const DetectOptions& o, std::int64_t step) {
  if (!std::isfinite(o.threshold) || o.threshold < 0)
    throw InvalidInput("detection: threshold must be a finite value >= 0, found " +
                       std::to_string(o.threshold));
  if (o.min_separation < 0)
    throw InvalidInput("detection: min_separation must be >= 0 samples, found " +
                       std::to_string(o.min_separation));
  if (step < 1) throw InvalidInput("detection: step must be >= 1, found " + std::to_string(step));
}

void check_mad_median(double median, std::int64_t template_index, std::int64_t n,
                      const DetectOptions& o) {
  if (o.type != ThresholdType::Mad || !(o.threshold > 0) || median != 0) return;
  throw NumericalError(
      "detection: template " + std::to_string(template_index) + ": median |cc_sum| is 0 over " +
      std::to_string(n) +
      " correlation times (at least half of them exactly 0: zero-filled or flat data, zero "
      "weights, or windows outside the data), so the MAD threshold would be 0 and every local "
      "maximum a detection; use an absolute threshold or leave the empty stretch out of the "
      "data");
}

double row_threshold(const float* row, std::int64_t n, const DetectOptions& o,
                     std::int64_t template_index) {
  if (o.type == ThresholdType::Absolute || n == 0) return o.threshold;
  std::vector<float> a(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(i)] = std::fabs(row[i]);
  const auto mid = a.begin() + n / 2;
  std::nth_element(a.begin(), mid, a.end());
  double median = *mid;
  if (n % 2 == 0) median = 0.5 * (median + *std::max_element(a.begin(), mid));
  check_mad_median(median, template_index, n, o);
  return o.threshold * median;
}

std::vector<Detection> decluster(std::vector<Detection> c, std::int64_t separation) {
  std::stable_sort(c.begin(), c.end(), [](const Detection& a, const Detection& b) {
    const double fa = std::fabs(a.value), fb = std::fabs(b.value);
    return fa != fb ? fa > fb : a.correlation_index < b.correlation_index;
  });
  std::set<std::int64_t> kept_times;
  std::vector<Detection> kept;
  for (const Detection& d : c) {
    // The nearest kept peaks on either side decide: within `separation` means dropped.
    const auto next = kept_times.lower_bound(d.correlation_index);
    if (next != kept_times.end() && *next - d.correlation_index <= separation) continue;
    if (next != kept_times.begin() && d.correlation_index - *std::prev(next) <= separation)
      continue;
    kept_times.insert(d.correlation_index);
    kept.push_back(d);
  }
  std::sort(kept.begin(), kept.end(), [](const Detection& a, const Detection& b) {
    return a.correlation_index < b.correlation_index;
  });
  return kept;
}

}  // namespace mfilter

std::vector<Detection> detect_peaks(const Array& stack, const DetectOptions& options,
                                    std::int64_t step) {
  mfilter::validate_detect_options(options, step);
  if (stack.empty() || stack.ndim() != 2 || stack.dtype() != DType::f32)
    throw InvalidInput(
        "detect_peaks: stack: expected a float32 (templates, correlations) array, "
        "found " +
        (stack.empty() ? std::string("an empty array") : stack.describe()));
  const std::int64_t T = stack.dim(0), n = stack.dim(1);
  const std::int64_t sep = mfilter::separation_in_correlations(options.min_separation, step);
  if (stack.on_device()) {
#if HALFSCOPE_WITH_CUDA
    const Array s = stack.contiguous();
    return mfilter::detect_device_stack(s.data_as<float>(), T, n, options, step, nullptr);
#else
    throw Unsupported("detect_peaks: a device stack needs the CUDA build");
#endif
  }
  const Array s = stack.contiguous();
  std::vector<Detection> out;
  for (std::int64_t t = 0; t < T; ++t) {
    const float* row = s.data_as<float>() + t * n;
    const double thr = mfilter::row_threshold(row, n, options, t);
    std::vector<Detection> candidates;
    for (std::int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(row[i]);
      if (!(a > thr)) continue;
      if ((i > 0 && std::fabs(row[i - 1]) > a) || (i + 1 < n && std::fabs(row[i + 1]) > a))
        continue;  // not a local maximum (plateaus keep every point; decluster thins them)
      candidates.push_back({t, i, i * step, static_cast<double>(row[i]), thr, 0});
    }
    auto kept = mfilter::decluster(std::move(candidates), sep);
    out.insert(out.end(), kept.begin(), kept.end());
  }
  return out;
}

}  // namespace halfscope
