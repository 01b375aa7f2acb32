// Inputs of the MPI matched-filtering tests (test_mfilter*.cpp): the same on every rank (fixed
// seeds), seismic-like noise with templates planted at chosen correlation times, and comparisons
// that report the first differing element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::mpi::testing {

struct MfInputs {
  Array templates;  // (T, C, K) float64
  Array data;       // (C, L) float64
  MfNetwork network;
};

/// Noise of unit variance whose amplitude changes by powers of two along the day (so the
/// windows' energies vary over orders of magnitude), T random templates, moveouts
/// (t * 3 + c * 5) % 23 - `shift` (negative ones reach outside the data) and weights in
/// [0.5, 1) with channel 1 of template 2 weighted 0. Template t < plants.size() is added at 3x
/// the noise amplitude at every sample of `plants[t]` (its channels at their moveouts), so its
/// stack peaks there.
inline MfInputs make_inputs(std::int64_t T, std::int64_t C, std::int64_t K, std::int64_t L,
                            std::int64_t shift,
                            const std::vector<std::vector<std::int64_t>>& plants = {}) {
  MfInputs in;
  std::mt19937_64 rng(20261122);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(0.5, 1.0);
  in.templates = Array(DType::f64, {T, C, K});
  in.data = Array(DType::f64, {C, L});
  in.network.moveouts = Array(DType::i64, {T, C});
  in.network.weights = Array(DType::f64, {T, C});
  double* x = in.data.data_as<double>();
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t s = 0; s < L; ++s)
      x[c * L + s] = normal(rng) * std::ldexp(1.0, static_cast<int>((s / 1500 + c) % 5) - 2);
  double* tp = in.templates.data_as<double>();
  for (std::int64_t i = 0; i < T * C * K; ++i) tp[i] = normal(rng);
  auto* mo = in.network.moveouts.data_as<std::int64_t>();
  double* w = in.network.weights.data_as<double>();
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t c = 0; c < C; ++c) {
      mo[t * C + c] = (t * 3 + c * 5) % 23 - shift;
      w[t * C + c] = t == 2 && c == 1 ? 0.0 : uniform(rng);
    }
  for (std::int64_t t = 0; t < std::min<std::int64_t>(T, std::ssize(plants)); ++t)
    for (const std::int64_t i : plants[static_cast<std::size_t>(t)])
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t s = i + mo[t * C + c];
        if (s < 0 || s + K > L) continue;
        const double amplitude = 3 * std::ldexp(1.0, static_cast<int>((s / 1500 + c) % 5) - 2);
        for (std::int64_t k = 0; k < K; ++k)
          x[c * L + s + k] += amplitude * tp[(t * C + c) * K + k];
      }
  return in;
}

/// Bit-for-bit equality of two float32 arrays of one shape, naming the first differing element.
inline ::testing::AssertionResult bit_identical(const Array& expected, const Array& got) {
  if (expected.shape() != got.shape())
    return ::testing::AssertionFailure()
           << "shapes differ: expected " << expected.describe() << ", got " << got.describe();
  const float* a = expected.data_as<float>();
  const float* b = got.data_as<float>();
  for (std::int64_t i = 0; i < expected.size(); ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << " of " << expected.size()
                                           << ": expected " << a[i] << ", got " << b[i];
  return ::testing::AssertionSuccess();
}

/// Detections equal field by field; values exactly (they come from equal stacks), or within
/// `tolerance` for stacks that round otherwise (another tiling of time).
inline ::testing::AssertionResult same_detections(const std::vector<Detection>& expected,
                                                  const std::vector<Detection>& got,
                                                  double tolerance = 0) {
  if (expected.size() != got.size())
    return ::testing::AssertionFailure()
           << expected.size() << " detections expected, " << got.size() << " found";
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Detection &e = expected[i], &g = got[i];
    if (e.template_index != g.template_index || e.correlation_index != g.correlation_index ||
        e.sample != g.sample || !(std::fabs(e.value - g.value) <= tolerance) ||
        e.threshold != g.threshold || e.channels_used != g.channels_used)
      return ::testing::AssertionFailure()
             << "detection " << i << ": expected template " << e.template_index << " at "
             << e.correlation_index << " (" << e.value << ", threshold " << e.threshold << ", "
             << e.channels_used << " channels), found template " << g.template_index << " at "
             << g.correlation_index << " (" << g.value << ", threshold " << g.threshold << ", "
             << g.channels_used << " channels), values within " << tolerance;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace halfscope::mpi::testing
