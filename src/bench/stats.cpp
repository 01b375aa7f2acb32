#include "halfscope/bench/stats.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"

namespace halfscope::bench {

Stats compute_stats(std::span<const double> samples_ms) {
  if (samples_ms.empty()) throw InvalidInput("benchmark statistics: no samples");
  std::vector<double> s(samples_ms.begin(), samples_ms.end());
  for (const double x : s)
    if (!(x >= 0))
      throw InvalidInput("benchmark statistics: invalid sample " + std::to_string(x) + " ms");
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  Stats st;
  st.median_ms = n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  st.min_ms = s.front();
  st.max_ms = s.back();
  st.repeats = static_cast<int>(n);
  return st;
}

Stats time_host(const std::function<void()>& run, int warmup, int repeats) {
  if (repeats < 1)
    throw InvalidInput("time_host: repeats must be at least 1, got " + std::to_string(repeats));
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return compute_stats(ms);
}

double gbps(double bytes, double ms) noexcept {
  return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : NAN;
}

double tflops(double flops, double ms) noexcept {
  return ms > 0 ? flops / (ms * 1e-3) / 1e12 : NAN;
}

}  // namespace halfscope::bench
