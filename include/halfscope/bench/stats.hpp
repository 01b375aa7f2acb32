// Summary statistics of benchmark timings (DESIGN.md section 5: median of repeats).
#pragma once

#include <functional>
#include <span>

namespace halfscope::bench {

/// Median, minimum and maximum of the repeats of one measurement, in milliseconds.
struct Stats {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int repeats = 0;
};

/// Statistics of `samples_ms`; the median of an even count is the mean of the two middle values.
/// Throws InvalidInput for an empty span or a NaN / negative sample.
Stats compute_stats(std::span<const double> samples_ms);

/// Times `run` on the host with a steady clock: `warmup` untimed calls, then `repeats` timed ones.
Stats time_host(const std::function<void()>& run, int warmup, int repeats);

/// Rate helpers for a measurement that took `ms`: bytes -> GB/s (1e9), flops -> TFLOP/s (1e12).
double gbps(double bytes, double ms) noexcept;
double tflops(double flops, double ms) noexcept;

}  // namespace halfscope::bench
