// Case definitions and inputs of `halfscope bench mfilter` (host only, no GPU): sizes, flop and
// byte counts, the real trace tiled to the study's length, templates cut from it, random data.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "halfscope/bench/mfilter_bench.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::bench {

std::int64_t MfBenchSize::correlation_count() const {
  if (length < 1 || step < 1 || length > samples)
    throw InvalidInput("bench mfilter: a case needs 1 <= K <= L and step >= 1, found K = " +
                       std::to_string(length) + ", L = " + std::to_string(samples) +
                       ", step = " + std::to_string(step));
  return (samples - length) / step + 1;
}

double MfBenchSize::flops() const {
  return 2.0 * static_cast<double>(templates) * static_cast<double>(channels) *
         static_cast<double>(length) * static_cast<double>(correlation_count());
}

double MfBenchSize::min_bytes(bool network_sum) const {
  const double t = static_cast<double>(templates), c = static_cast<double>(channels);
  const double out = t * (network_sum ? 1.0 : c) * static_cast<double>(correlation_count());
  return 4.0 * (c * static_cast<double>(samples) + t * c * static_cast<double>(length) + out);
}

MfBenchSize study_case_size() {
  return {16, 1, 256, 4'320'000, 1};
}

MfBenchSize network_case_size(bool quick) {
  return quick ? MfBenchSize{64, 8, 256, std::int64_t{1} << 22, 1}
               : MfBenchSize{1000, 30, 256, 4'320'000, 1};
}

std::vector<MfBenchMethod> study_methods() {
  std::vector<MfBenchMethod> out = {{MfMethod::Naive, "naive", Precision::Single, false}};
  const MfMethod cublas[] = {MfMethod::Cublas1, MfMethod::Cublas2, MfMethod::Cublas3,
                             MfMethod::Cublas4};
  // Study 001, Table I: ver.1 FP32; ver.2 FP16 in, FP32 out; ver.3 FP16 in and out, FP32
  // compute (both "mixed" here: FP16 storage, FP32 arithmetic); ver.4 all FP16.
  const Precision types[] = {Precision::Single, Precision::Mixed, Precision::Mixed,
                             Precision::Half};
  for (int v = 0; v < 4; ++v)
    for (bool gemm_only : {true, false})
      out.push_back({cublas[v], "cublas" + std::to_string(v + 1), types[v], gemm_only});
  for (Precision p : {Precision::Mixed, Precision::BF16, Precision::Split})
    out.push_back({MfMethod::Tensor, "tensor", p, false});
  out.push_back({MfMethod::FFT, "fft", Precision::Single, false});
  return out;
}

std::vector<MfBenchMethod> study_public_methods() {
  std::vector<MfBenchMethod> out;
  for (Precision p : {Precision::Mixed, Precision::BF16, Precision::Split})
    out.push_back({MfMethod::Tensor, "tensor", p, false, true});
  return out;
}

std::int64_t study_reference_times(std::int64_t n_corr, std::int64_t requested, bool quick) {
  const std::int64_t want = requested > 0 ? requested : quick ? std::int64_t{1} << 20 : n_corr;
  return std::min(want, n_corr);
}

std::int64_t network_reference_times(const MfBenchSize& size) {
  const double macs_per_time = static_cast<double>(size.templates) *
                               static_cast<double>(size.channels) *
                               static_cast<double>(size.length);
  const auto budget = static_cast<std::int64_t>(std::ldexp(1.0, 30) / macs_per_time);
  return std::min(std::max<std::int64_t>(budget, 256), size.correlation_count());
}

Array load_real_trace(const std::filesystem::path& path, std::int64_t min_length) {
  if (!std::filesystem::is_regular_file(path))
    throw InvalidInput("bench mfilter: --real-data " + path.string() +
                       ": no such file (stage it with tools/stage-deps.sh)");
  Array a = io::read_npy(path);
  const bool row = a.ndim() == 2 && a.dim(0) == 1;
  if (a.ndim() != 1 && !row)
    throw InvalidInput("bench mfilter: --real-data " + path.string() +
                       ": expected a 1-D trace or shape (1, n), found " + a.describe());
  if (a.dtype() != DType::f32 && a.dtype() != DType::f64 && a.dtype() != DType::f16 &&
      a.dtype() != DType::i32 && a.dtype() != DType::i16 && a.dtype() != DType::i64)
    throw InvalidInput("bench mfilter: --real-data " + path.string() +
                       ": expected a real or integer dtype, found " + a.describe());
  Array t = a.reshape({a.size()}).astype(DType::f32);
  if (t.size() < min_length)
    throw InvalidInput("bench mfilter: --real-data " + path.string() + ": expected at least " +
                       std::to_string(min_length) + " samples, found " + std::to_string(t.size()));
  const float* x = t.data_as<float>();
  for (std::int64_t i = 0; i < t.size(); ++i)
    if (!std::isfinite(x[i]))
      throw InvalidInput("bench mfilter: --real-data " + path.string() +
                         ": expected finite samples, found " + std::to_string(x[i]) +
                         " at sample " + std::to_string(i));
  return t;
}

Array tile_trace(const Array& trace, std::int64_t samples) {
  if (trace.ndim() != 1 || trace.dtype() != DType::f32 || trace.size() < 1 || trace.on_device())
    throw InvalidInput("tile_trace: expected a non-empty 1-D float32 host trace, found " +
                       trace.describe());
  const Array src = trace.contiguous();
  const float* x = src.data_as<float>();
  const std::int64_t n = src.size();
  Array out(DType::f32, {samples});
  float* y = out.data_as<float>();
  for (std::int64_t i = 0; i < samples; i += n) std::copy(x, x + std::min(n, samples - i), y + i);
  return out;
}

std::vector<std::int64_t> loudest_window_starts(const Array& trace, std::int64_t count,
                                                std::int64_t length) {
  if (trace.ndim() != 1 || trace.dtype() != DType::f32 || trace.on_device() || length < 1 ||
      length > trace.size())
    throw InvalidInput("loudest_window_starts: expected a 1-D float32 host trace of at least " +
                       std::to_string(length) + " samples, found " + trace.describe());
  const Array src = trace.contiguous();
  const float* x = src.data_as<float>();
  const std::int64_t n = src.size();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [x](std::int64_t a, std::int64_t b) {
    return std::fabs(x[a]) > std::fabs(x[b]);
  });
  std::vector<std::int64_t> starts;
  for (std::int64_t peak : order) {
    if (static_cast<std::int64_t>(starts.size()) == count) break;
    const bool covered = std::any_of(starts.begin(), starts.end(), [&](std::int64_t s) {
      return peak >= s && peak < s + length;
    });
    if (covered) continue;
    const std::int64_t s = std::clamp<std::int64_t>(peak - length / 2, 0, n - length);
    // A window clamped at an edge, or centred between two chosen ones, must not overlap them.
    const bool overlaps = std::any_of(starts.begin(), starts.end(), [&](std::int64_t t) {
      return s < t + length && t < s + length;
    });
    if (!overlaps) starts.push_back(s);
  }
  if (static_cast<std::int64_t>(starts.size()) < count)
    throw InvalidInput("loudest_window_starts: " + std::to_string(count) + " disjoint windows of " +
                       std::to_string(length) + " samples do not fit a trace of " +
                       std::to_string(n));
  std::sort(starts.begin(), starts.end());
  return starts;
}

Array cut_windows(const Array& trace, const std::vector<std::int64_t>& starts,
                  std::int64_t length) {
  const Array src = trace.contiguous();
  const float* x = src.data_as<float>();
  Array out(DType::f32, {static_cast<std::int64_t>(starts.size()), length});
  float* y = out.data_as<float>();
  for (std::size_t j = 0; j < starts.size(); ++j) {
    if (starts[j] < 0 || starts[j] + length > src.size())
      throw InvalidInput("cut_windows: window [" + std::to_string(starts[j]) + ", +" +
                         std::to_string(length) + ") outside a trace of " +
                         std::to_string(src.size()));
    std::copy(x + starts[j], x + starts[j] + length, y + static_cast<std::int64_t>(j) * length);
  }
  return out;
}

Array uniform_array(const Shape& shape, float lo, float hi, std::uint64_t seed) {
  Array out(DType::f32, shape);
  const std::int64_t rows = shape.empty() ? 1 : shape[0];
  const std::int64_t per_row = rows > 0 ? out.size() / rows : 0;
  float* y = out.data_as<float>();
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::mt19937_64 rng(seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(r + 1));
    std::uniform_real_distribution<float> dist(lo, hi);
    for (std::int64_t i = 0; i < per_row; ++i) y[r * per_row + i] = dist(rng);
  }
  return out;
}

MfNetworkInputs make_network_inputs(const MfBenchSize& size, std::int64_t max_moveout,
                                    std::uint64_t seed) {
  const std::int64_t n_corr = size.correlation_count();
  const std::int64_t T = size.templates, C = size.channels, K = size.length;
  if (max_moveout < 0 || max_moveout >= n_corr)
    throw InvalidInput("make_network_inputs: max_moveout " + std::to_string(max_moveout) +
                       " must lie in [0, n_corr = " + std::to_string(n_corr) + ")");
  MfNetworkInputs in;
  in.data = uniform_array({C, size.samples}, -1.0f, 1.0f, seed);
  in.moveouts = Array(DType::i64, {T, C});
  in.weights = uniform_array({T, C}, 0.5f, 1.0f, seed + 1);
  in.templates = Array(DType::f32, {T, C, K});
  std::mt19937_64 rng(seed + 2);
  std::uniform_int_distribution<std::int64_t> mv(0, max_moveout);
  // Origins keep every planted window inside the data: o + moveout + K <= L.
  std::uniform_int_distribution<std::int64_t> origin(0, n_corr - 1 - max_moveout);
  auto* m = in.moveouts.data_as<std::int64_t>();
  for (std::int64_t i = 0; i < T * C; ++i) m[i] = mv(rng);
  const float* d = in.data.data_as<float>();
  float* tp = in.templates.data_as<float>();
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t o = origin(rng) * size.step;
    in.origins.push_back(o / size.step);
    for (std::int64_t c = 0; c < C; ++c) {
      const float* w = d + c * size.samples + o + m[t * C + c];
      std::copy(w, w + K, tp + (t * C + c) * K);
    }
  }
  return in;
}

double planted_found_fraction(const std::vector<Detection>& detections,
                              const std::vector<std::int64_t>& origins, std::int64_t tolerance) {
  if (origins.empty()) return NAN;
  std::int64_t found = 0;
  for (std::size_t t = 0; t < origins.size(); ++t) {
    const auto it = std::find_if(detections.begin(), detections.end(), [&](const Detection& d) {
      return d.template_index == static_cast<std::int64_t>(t) &&
             std::llabs(d.correlation_index - origins[t]) <= tolerance;
    });
    found += it != detections.end();
  }
  return static_cast<double>(found) / static_cast<double>(origins.size());
}

BenchCase study_case_template(const MfBenchMethod& method, const MfBenchSize& size,
                              std::int64_t n_ref, const std::string& real_note) {
  BenchCase c;
  c.implementation = "halfscope";
  c.method = method.name;
  c.precision = std::string(precision_name(method.precision));
  c.params = {{"case", std::string("a")},
              {"templates", size.templates},
              {"channels", size.channels},
              {"length", size.length},
              {"samples", size.samples},
              {"step", size.step},
              {"n_corr", size.correlation_count()},
              {"normalize", std::string("short")},
              {"timing", std::string(method.gemm_only     ? "gemm"
                                     : method.public_call ? "public"
                                                          : "call")},
              {"timed_data", "uniform [-50, 50], seed " + std::to_string(kMfUniformSeed)},
              {"real_data", real_note},
              {"reference", std::string("direct_cpu double (float32 output) on the first "
                                        "reference_times correlation times")},
              {"reference_times", n_ref},
              {"bytes_model", std::string("4 (C L + T C K + T C n_corr): FP32 traffic floor")},
              {"memory", std::string("peak_device_bytes = resident + max(pool high-water, "
                                     "cudaMemGetInfo sampled every 0.5 ms)")}};
  return c;
}

BenchCase network_case_template(const MfBenchSize& size, const std::string& method,
                                Precision precision, std::int64_t n_ref) {
  BenchCase c;
  c.implementation = "halfscope";
  c.method = method;
  c.precision = std::string(precision_name(precision));
  c.params = {{"case", std::string("b")},
              {"templates", size.templates},
              {"channels", size.channels},
              {"length", size.length},
              {"samples", size.samples},
              {"step", size.step},
              {"n_corr", size.correlation_count()},
              {"normalize", std::string("short")},
              {"network_sum", true},
              {"data", "uniform [-1, 1), templates copied at planted origins, seed " +
                           std::to_string(kMfNetworkSeed)},
              {"moveouts", "uniform integers in [0, " + std::to_string(kMfMaxMoveout) + "]"},
              {"weights", std::string("uniform [0.5, 1)")},
              {"reference", std::string("direct_cpu double (float32 output) on the first "
                                        "reference_times correlation times")},
              {"reference_times", n_ref},
              {"bytes_model", std::string("4 (C L + T C K + T n_corr): FP32 traffic floor")},
              {"memory", std::string("peak_device_bytes = resident + max(pool high-water, "
                                     "cudaMemGetInfo sampled every 0.5 ms)")}};
  return c;
}

}  // namespace halfscope::bench
