// `halfscope bench cholesky` (include/halfscope/bench/cholesky_bench.hpp): the tile Cholesky per
// precision policy on AO covariance matrices, and cuSOLVER spotrf / dpotrf on the same matrix.
#include "halfscope/bench/cholesky_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ao/reconstructor_tiptilt.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"
#include "linalg/tile_norms.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "bench/cholesky_bench_cuda.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::bench {
namespace {

constexpr std::int64_t kEeltSensorSlopes = 11152;  // 2 x 5,576 valid subapertures per sensor

void say(const CholBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

// One matrix to factor: the system whose Cmm it is and how it is described in the JSON.
struct BenchMatrix {
  ao::AoSystem system;
  std::string label;   // "eelt[:k sensors]" or the preset name
  std::string source;  // what the matrix is, in words
};

ao::CovarianceOptions cmm_options(bool gpu, DType dtype) {
  ao::CovarianceOptions co;
  co.device = gpu ? DeviceKind::Cuda : DeviceKind::Cpu;
  co.dtype = dtype;
  co.memory = gpu ? Memory::device : Memory::host;
  co.noise = true;  // Cmm is SPD only with its noise terms
  return co;
}

// The tile Cholesky, timed: CUDA events on the legacy default stream around a call that
// synchronises before returning (so every stream's work lies between them), else the steady
// clock.
double time_factor(linalg::TileMatrix& a, const linalg::CholeskyOptions& options, bool gpu,
                   linalg::CholeskyReport& report) {
#if HALFSCOPE_WITH_CUDA
  if (gpu) {
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    cuda::EventTimer timer(nullptr);
    timer.start();
    report = linalg::cholesky_tiles(a, options);
    return timer.stop_ms();
  }
#endif
  (void)gpu;
  const auto t0 = std::chrono::steady_clock::now();
  report = linalg::cholesky_tiles(a, options);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void common_params(BenchCase& c, const BenchMatrix& m, std::int64_t n, bool gpu, int layers) {
  c.params["system"] = m.label;
  c.params["matrix"] = m.source;
  c.params["n"] = n;
  c.params["layers"] = static_cast<std::int64_t>(layers);
  c.params["device"] = std::string(gpu ? "cuda" : "cpu");
  c.params["flops"] = std::pow(static_cast<double>(n), 3) / 3.0;
}

// One policy's case. Out of core (GPU, o.device_memory > 0): the input is a pinned host copy of
// `reference` (untimed), factored from there on the listed device (or the current one) within
// the budget; the time covers every copy in and out.
BenchCase policy_case(const CholBenchOptions& o, const BenchMatrix& m, const std::string& text,
                      bool gpu, std::int64_t nb, const linalg::TileMatrix& reference,
                      bool out_of_core) {
  const std::int64_t n = ao::measurement_count(m.system);
  BenchCase c;
  c.implementation = out_of_core ? "halfscope-ooc" : "halfscope";
  c.method = out_of_core ? "tile-cholesky-out-of-core" : "tile-cholesky";
  c.precision = text;
  common_params(c, m, n, gpu, o.layers);
  c.params["tile"] = nb;
  c.params["warmup"] = static_cast<std::int64_t>(o.warmup);
  c.params["peak_memory_method"] =
      std::string(gpu ? "cudaMemGetInfo polled every 1 ms (whole device)" : "not measured (CPU)");
  linalg::CholeskyOptions options;
  options.policy = linalg::parse_policy(text);
  options.devices = o.devices;
  if (out_of_core) {
#if HALFSCOPE_WITH_CUDA
    if (options.devices.empty()) options.devices = {cuda::current_device()};
#endif
    options.device_memory = o.device_memory;
    c.params["device_memory"] = o.device_memory;
    c.params["input"] = std::string("pinned host memory");
  }
  c.params["devices"] = static_cast<std::int64_t>(std::max<std::size_t>(o.devices.size(), 1));
  std::vector<double> times;
  linalg::CholeskyReport report;
  linalg::TileMatrix a;
#if HALFSCOPE_WITH_CUDA
  std::unique_ptr<cholesky_detail::DeviceMemoryPoller> poller;
  if (gpu) poller = std::make_unique<cholesky_detail::DeviceMemoryPoller>();
#endif
  // The peak is recorded for failed cases too (how far a run got is part of the answer).
  const auto record_peak = [&] {
#if HALFSCOPE_WITH_CUDA
    if (poller) {
      c.params["peak_device_bytes"] = poller->stop();
      c.params["baseline_device_bytes"] = poller->baseline();
    }
#endif
  };
  try {
    for (int r = -o.warmup; r < o.repeats; ++r) {  // r < 0: untimed warm-up runs
      a = {};             // the previous factor's memory back before the next input is made
      if (out_of_core) {  // the host copy of the same input: the device shows only the factor
        a.layout = reference.layout;
        a.storage = reference.storage.clone(Memory::pinned);
      } else {
        a = ao::covariance_tiles(m.system, ao::CovarianceKind::cmm, nb,
                                 cmm_options(gpu, DType::f32));
      }
      const double ms = time_factor(a, options, gpu, report);
      if (r >= 0) times.push_back(ms);
    }
  } catch (const NumericalError& e) {  // NotPositiveDefinite or an FP16 overflow: recorded
    c.params["failed"] = std::string(e.what());
    record_peak();
    return c;
  } catch (const CudaError& e) {  // out of device memory at this size: recorded, the run goes on
    c.params["failed"] = std::string(e.what());
    record_peak();
    return c;
  }
  record_peak();
  if (out_of_core && report.out_of_core_slabs == 0) {
    c.params["skipped"] =
        std::string("the matrix and its scratch fit the device memory budget: factored in core");
    return c;
  }
  c.stats = compute_stats(times);
  c.TFLOPs = tflops(std::pow(static_cast<double>(n), 3) / 3.0, c.stats.median_ms);
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    c.params["tiles_" + std::string(linalg::gemm_variant_name(v))] = report.count(v);
  report.for_each_count([&](const char* name, std::int64_t value) { c.params[name] = value; });
  if (out_of_core) {
    // Where the time beyond the in-core run goes: the link's average use, and the input checks
    // the call makes on the host (norms and finiteness of every tile), timed once here alone.
    c.params["link_GBps"] =
        static_cast<double>(report.host_to_device_bytes + report.device_to_host_bytes) /
        (c.stats.median_ms * 1e6);
    const auto t0 = std::chrono::steady_clock::now();
    linalg::detail::require_finite(reference, linalg::detail::tile_norms(reference), "bench");
    c.params["host_checks_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const BackwardError e = cholesky_backward_error(a, reference, o.error_tiles);
  c.error["backward"] = e.relative;
  c.error["max_tile_backward"] = e.max_tile_relative;
  c.params["error_tiles_checked"] = e.tiles_checked;
  c.params["error_tiles_total"] = e.tiles_total;
  say(o, m.label + " n = " + std::to_string(n) + " " + text + ": median " +
             std::to_string(c.stats.median_ms) + " ms, backward error " +
             std::to_string(e.relative));
  return c;
}

#if HALFSCOPE_WITH_CUDA
BenchCase cusolver_case(const CholBenchOptions& o, const BenchMatrix& m, DType dtype) {
  const std::int64_t n = ao::measurement_count(m.system);
  BenchCase c;
  c.implementation = "cusolver";
  c.params["warmup"] = static_cast<std::int64_t>(o.warmup);
  c.method = dtype == DType::f64 ? "dpotrf" : "spotrf";
  c.precision = dtype == DType::f64 ? "double" : "single";
  common_params(c, m, n, true, o.layers);
  c.params["layout"] = std::string("dense lower");
  c.params["peak_memory_method"] = std::string("cudaMemGetInfo polled every 1 ms (whole device)");
  // The dense matrix plus cuSOLVER's workspace (small) and 10 % headroom must fit.
  const double need = 1.1 * static_cast<double>(n) * static_cast<double>(n) *
                      static_cast<double>(dtype_size(dtype));
  if (need > static_cast<double>(cholesky_detail::device_free_bytes())) {
    c.params["skipped"] = "the dense " + std::to_string(n) + " x " + std::to_string(n) + " " +
                          std::string(dtype_name(dtype)) + " matrix (" +
                          std::to_string(static_cast<std::int64_t>(need / 1e9)) +
                          " GB with headroom) does not fit in the free device memory";
    return c;
  }
  cholesky_detail::DeviceMemoryPoller poller;
  std::vector<double> times;
  try {
    for (int r = -o.warmup; r < o.repeats; ++r) {  // r < 0: untimed warm-up runs
      Array dense = ao::covariance(m.system, ao::CovarianceKind::cmm, cmm_options(true, dtype));
      const double ms = cholesky_detail::cusolver_potrf_ms(dense);
      if (r >= 0) times.push_back(ms);
    }
  } catch (const NumericalError& e) {
    c.params["failed"] = std::string(e.what());
    return c;
  } catch (const CudaError& e) {  // out of device memory: recorded, the run goes on
    c.params["failed"] = std::string(e.what());
    return c;
  }
  c.params["peak_device_bytes"] = poller.stop();
  c.params["baseline_device_bytes"] = poller.baseline();
  c.stats = compute_stats(times);
  c.TFLOPs = tflops(std::pow(static_cast<double>(n), 3) / 3.0, c.stats.median_ms);
  say(o, m.label + " n = " + std::to_string(n) + " cuSOLVER " + c.method + ": median " +
             std::to_string(c.stats.median_ms) + " ms");
  return c;
}
#endif

// Speed-ups against cuSOLVER spotrf / dpotrf of the same matrix, on the halfscope cases, and of
// each out-of-core case its rate against the in-core case of its policy.
void add_ratios(std::vector<BenchCase>& cases, std::size_t first) {
  double sp = NAN, dp = NAN;
  for (std::size_t i = first; i < cases.size(); ++i)
    if (cases[i].implementation == "cusolver" && cases[i].stats.repeats > 0)
      (cases[i].method == "spotrf" ? sp : dp) = cases[i].stats.median_ms;
  for (std::size_t i = first; i < cases.size(); ++i) {
    BenchCase& c = cases[i];
    if (c.implementation.rfind("halfscope", 0) != 0 || c.stats.repeats == 0) continue;
    if (std::isfinite(sp)) c.params["speedup_vs_spotrf"] = sp / c.stats.median_ms;
    if (std::isfinite(dp)) c.params["speedup_vs_dpotrf"] = dp / c.stats.median_ms;
    if (c.implementation != "halfscope-ooc") continue;
    for (std::size_t j = first; j < cases.size(); ++j)
      if (cases[j].implementation == "halfscope" && cases[j].precision == c.precision &&
          cases[j].stats.repeats > 0)
        c.params["rate_vs_in_core"] = cases[j].stats.median_ms / c.stats.median_ms;
  }
}

}  // namespace

ao::AoSystem eelt_first_sensors(std::int64_t k, int layers) {
  ao::AoSystem s = ao::ao_preset("eelt", layers);
  if (k < 1 || k > static_cast<std::int64_t>(s.sensors.size()))
    throw InvalidInput("eelt_first_sensors: expected 1 to " + std::to_string(s.sensors.size()) +
                       " sensors, found " + std::to_string(k));
  s.sensors.resize(static_cast<std::size_t>(k));
  s.name += " (first " + std::to_string(k) + " sensors)";
  return ao::detail::without_lgs_tiptilt(s);
}

BenchReport run_cholesky_bench(const CholBenchOptions& o) {
  if (o.repeats < 1) throw InvalidInput("bench cholesky: repeats must be >= 1");
  if (o.warmup < 0) throw InvalidInput("bench cholesky: warmup must be >= 0");
  if (o.policies.empty()) throw InvalidInput("bench cholesky: at least one policy is needed");
  if (o.device_memory < 0)
    throw InvalidInput("bench cholesky: device_memory must be >= 0 bytes, found " +
                       std::to_string(o.device_memory));
  for (const std::string& p : o.policies) (void)linalg::parse_policy(p);  // fail before any work
  std::vector<BenchMatrix> matrices;
  for (const std::int64_t n : o.sizes) {
    if (n % kEeltSensorSlopes != 0 || n < kEeltSensorSlopes || n > 9 * kEeltSensorSlopes)
      throw InvalidInput(
          "bench cholesky: --sizes takes n = 11152 k, k = 1..9 (the E-ELT Cmm of "
          "its first k sensors: 11152, 22304, ..., 100368), found " +
          std::to_string(n));
    const std::int64_t k = n / kEeltSensorSlopes;
    matrices.push_back({eelt_first_sensors(k, o.layers), "eelt:" + std::to_string(k),
                        "K = Cmm without the LGS tip-tilt constants (the matrix the "
                        "reconstructor factors) of preset eelt restricted to its first " +
                            std::to_string(k) +
                            " measuring sensors (FP64 generation rounded to FP32, noise on)"});
  }
  for (const std::string& s : o.systems)
    matrices.push_back({ao::detail::without_lgs_tiptilt(ao::ao_preset(s, o.layers)), s,
                        "K = Cmm without the LGS tip-tilt constants (the matrix the "
                        "reconstructor factors) of preset " +
                            s + " (FP64 generation rounded to FP32, noise on)"});
  if (matrices.empty()) throw InvalidInput("bench cholesky: give --sizes or --systems");
  const DeviceKind device = resolve_device(o.device);
  const bool gpu = device == DeviceKind::Cuda;
  if (o.device_memory > 0 && o.devices.size() > 1)
    throw InvalidInput(
        "bench cholesky: the out-of-core cases (a device memory budget) run on one "
        "device, found " +
        std::to_string(o.devices.size()) + " devices");
  if (o.device_memory > 0 && !gpu)
    throw InvalidInput(
        "bench cholesky: a device memory budget (out-of-core cases) needs the GPU, "
        "but the bench runs on the CPU");
  const std::int64_t nb = o.tile > 0 ? o.tile : gpu ? 1024 : 512;
  BenchReport report =
      BenchReport::start("cholesky", gpu ? describe_cuda_device(0) : describe_cpu());
  for (const BenchMatrix& m : matrices) {
    const std::size_t first = report.cases.size();
    say(o, "cholesky: " + m.label + ", n = " + std::to_string(ao::measurement_count(m.system)));
    // The input kept on the host for the backward error (every repeat factors the same matrix:
    // the generator is deterministic), made by the same backend as the factored copies.
    linalg::TileMatrix reference =
        ao::covariance_tiles(m.system, ao::CovarianceKind::cmm, nb, cmm_options(gpu, DType::f32));
    if (reference.storage.on_device()) reference.storage = reference.storage.to(Memory::host);
    for (const std::string& p : o.policies) {
      report.cases.push_back(policy_case(o, m, p, gpu, nb, reference, false));
      if (gpu && o.device_memory > 0)
        report.cases.push_back(policy_case(o, m, p, gpu, nb, reference, true));
    }
#if HALFSCOPE_WITH_CUDA
    if (gpu && o.cusolver) {
      report.cases.push_back(cusolver_case(o, m, DType::f32));
      report.cases.push_back(cusolver_case(o, m, DType::f64));
    }
#endif
    add_ratios(report.cases, first);
  }
  return report;
}

}  // namespace halfscope::bench
