// The level-rounding check of full normalization (level_check.hpp).
#include "mfilter/level_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::mfilter {

namespace {

struct Finding {
  std::int64_t window = -1;
  double kappa = 0;  // sqrt(raw / demeaned energy)
};

// The window at s by direct FP64 sums (shifted by its first sample, so a large level does not
// cancel): sqrt(raw / demeaned) when the window is not flat by the backends' rule and its bound
// exceeds kLevelErrorBound, else nothing.
std::optional<double> confirmed(const float* y, std::int64_t s, std::int64_t K, double offset,
                                double u) {
  const double shift = y[s];
  double s1 = 0, s2 = 0, raw = 0, caller = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    const double v = y[s + k], d = v - shift;
    s1 += d;
    s2 += d * d;
    raw += v * v;
    caller += (v + offset) * (v + offset);
  }
  const double demeaned = s2 - s1 * s1 / static_cast<double>(K);
  if (demeaned <= kFlatRelative * caller) return std::nullopt;  // flat: CC 0
  if (u * u * raw <= kLevelErrorBound * kLevelErrorBound * demeaned) return std::nullopt;
  return std::sqrt(raw / demeaned);
}

// The first window of one channel over the bound. Running sums of d = y - shift (shift: the
// span's first sample) screen every window with a 10 % margin; the flagged ones are confirmed.
// Windows of K equal samples (an exact run tracker, as window_stats.cpp keeps) are flat.
Finding scan_channel(const float* y, std::int64_t L, std::int64_t K, double offset, double u) {
  const std::int64_t windows = L - K + 1;
  const double kd = static_cast<double>(K);
  const double screen = 0.81 * kLevelErrorBound * kLevelErrorBound;  // (0.9 x the bound)^2
  std::int64_t run = 1;
  for (std::int64_t k = K - 1; k > 0 && run < K && y[k - 1] == y[k]; --k) ++run;
  for (std::int64_t s0 = 0; s0 < windows; s0 += kLevelCheckSpan) {
    const double shift = y[s0];
    double s1 = 0, s2 = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const double d = y[s0 + k] - shift;
      s1 += d;
      s2 += d * d;
    }
    const std::int64_t end = std::min(windows, s0 + kLevelCheckSpan);
    for (std::int64_t s = s0; s < end; ++s) {
      if (s > s0) {
        const double din = y[s + K - 1] - shift, dout = y[s - 1] - shift;
        s1 += din - dout;
        s2 += din * din - dout * dout;
      }
      if (s > 0) run = y[s + K - 1] == y[s + K - 2] ? std::min(run + 1, K) : 1;
      if (run >= K) continue;
      const double demeaned = s2 - s1 * s1 / kd;
      const double raw = s2 + 2 * shift * s1 + kd * shift * shift;  // sum of y^2
      if (u * u * raw <= screen * demeaned) continue;
      if (const auto kappa = confirmed(y, s, K, offset, u)) return {s, *kappa};
    }
  }
  return {};
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

double level_rounding_unit(Precision precision) {
  // The 16-bit storage formats' units (FP16 2^-11, BF16 2^-8); wider storage is not checked.
  const double u = storage_unit_roundoff(precision);
  return u >= 0x1p-11 ? u : 0.0;
}

bool level_check_applies(const Prepared& p) {
  return p.dims.normalize == MfNormalize::Full && level_rounding_unit(p.precision) > 0;
}

void check_level_rounding(const Prepared& p, const Array& data, std::int64_t first_sample) {
  if (!level_check_applies(p)) return;
  const Dims& d = p.dims;
  const double u = level_rounding_unit(p.precision);
  const std::int64_t C = d.channels, K = d.length;
  if (data.on_device() || data.dtype() != DType::f32 || data.ndim() != 2 || data.shape()[0] != C ||
      !data.is_c_contiguous())
    throw Error("mfilter::check_level_rounding: expected host float32 (" + std::to_string(C) +
                ", n) C-contiguous data, found " + data.describe());
  const std::int64_t n = data.shape()[1];
  if (n < K) return;  // no window inside this stretch
  std::vector<Finding> found(static_cast<std::size_t>(C));
  const float* x = data.data_as<float>();
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t c = 0; c < C; ++c) {
    bool used = !d.network_sum || p.weights.empty();
    for (std::int64_t t = 0; !used && t < d.templates; ++t)
      used = p.weights[static_cast<std::size_t>(t * C + c)] != 0.0f;
    if (!used) continue;  // weighted 0 by every template: it adds nothing to the stack
    const double offset =
        p.channel_offsets.empty() ? 0.0 : p.channel_offsets[static_cast<std::size_t>(c)];
    found[static_cast<std::size_t>(c)] = scan_channel(x + c * n, n, K, offset, u);
  }
  for (std::int64_t c = 0; c < C; ++c) {
    const Finding& f = found[static_cast<std::size_t>(c)];
    if (f.window < 0) continue;
    throw NumericalError(
        "matched_filter: full normalization in " + std::string(precision_name(p.precision)) +
        ": channel " + std::to_string(c) + ", the window of " + std::to_string(K) +
        " samples at sample " + std::to_string(first_sample + f.window) + " sits on a level " +
        number(f.kappa) +
        " times its own fluctuation (sqrt of its raw over its demeaned energy, about the "
        "channel's mean): its 16-bit data operands round relative to that level, so its CC can "
        "be off by up to " +
        number(u * f.kappa) + " (at most " + number(kLevelErrorBound) +
        " accepted); use precision split or single, or remove level steps and trends from the "
        "data (high-pass) first");
  }
}

}  // namespace halfscope::mfilter
