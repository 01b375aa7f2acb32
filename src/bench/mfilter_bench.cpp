// `halfscope bench mfilter`: the run (both cases on CUDA device 0) and the measuring helpers they
// share: device memory accounting, the FP64 CPU reference, reading back a result's leading block.
#include "halfscope/bench/mfilter_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "bench/mfilter_bench_util.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::bench {

#if !HALFSCOPE_WITH_CUDA
BenchReport run_mfilter_bench(const MfBenchOptions&) {
  throw Unsupported("bench mfilter: needs CUDA; this halfscope was built without it");
}
#else

namespace detail {

std::int64_t MemoryWatch::used_now() noexcept {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<std::int64_t>(total - free);
}

MemoryWatch::MemoryWatch() {
  HS_CUDA_CHECK(cudaDeviceSynchronize());  // earlier work's memory is settled before the baseline
  HS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, 0));
  std::uint64_t zero = 0;  // the high-water attribute can only be reset to 0
  HS_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  baseline_ = used_now();
  peak_ = baseline_;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      const std::int64_t u = used_now();
      if (u > peak_.load()) peak_ = u;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
}

MemoryWatch::~MemoryWatch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void MemoryWatch::finish(BenchCase& c, double resident_bytes) {
  const cudaError_t sync = cudaDeviceSynchronize();
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  HS_CUDA_CHECK(sync);
  peak_ = std::max(peak_.load(), used_now());
  std::uint64_t high = 0;
  HS_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high));
  const auto pool_high = static_cast<double>(high);
  const auto polled = static_cast<double>(std::max<std::int64_t>(0, peak_.load() - baseline_));
  c.params["resident_bytes"] = resident_bytes;
  c.params["pool_high_bytes"] = pool_high;
  c.params["polled_extra_bytes"] = polled;
  c.params["peak_device_bytes"] = resident_bytes + std::max(pool_high, polled);
}

Array leading_block(const float* device_out, std::int64_t rows, std::int64_t n_corr,
                    std::int64_t n_ref, cudaStream_t stream) {
  Array host(DType::f32, {rows, n_ref});
  const auto row = static_cast<std::size_t>(n_ref) * sizeof(float);
  HS_CUDA_CHECK(cudaMemcpy2DAsync(host.data(), row, device_out,
                                  static_cast<std::size_t>(n_corr) * sizeof(float), row,
                                  static_cast<std::size_t>(rows), cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void record_error(BenchCase& c, const std::string& prefix, const Array& ref, const Array& x) {
  if (ref.size() != x.size())
    throw InvalidInput("bench mfilter: result of " + std::to_string(x.size()) +
                       " values against a reference of " + std::to_string(ref.size()));
  const float* r = ref.data_as<float>();
  const float* v = x.data_as<float>();
  double worst = 0;
  std::int64_t nonfinite = 0;
  for (std::int64_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(v[i])) {
      ++nonfinite;
      continue;
    }
    worst = std::max(worst, std::fabs(static_cast<double>(v[i]) - static_cast<double>(r[i])));
  }
  c.error[prefix + "max_abs"] = nonfinite ? INFINITY : worst;
  c.error[prefix + "nonfinite"] = static_cast<double>(nonfinite);
}

std::int64_t device_free_bytes() {
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(free);
}

}  // namespace detail

BenchReport run_mfilter_bench(const MfBenchOptions& o) {
  BenchReport report = BenchReport::start("mfilter", describe_cuda_device(0));
  HS_CUDA_CHECK(cudaSetDevice(0));
  // A case whose set-up fails (inputs, reference, a sticky CUDA error from an earlier kernel)
  // is recorded as one failed row, so the report of the other case is still written.
  auto guarded = [&](const char* name, void (*run)(const MfBenchOptions&, BenchReport&)) {
    try {
      run(o, report);
    } catch (const Error& e) {
      BenchCase c;
      c.implementation = "halfscope";
      c.method = "setup";
      c.params = {{"case", std::string(name)}, {"failed", std::string(e.what())}};
      report.cases.push_back(std::move(c));
      if (o.progress) o.progress(std::string("mfilter (") + name + "): " + e.what());
    }
  };
  if (o.study) guarded("a", run_mfilter_study_case);
  if (o.network) guarded("b", run_mfilter_network_case);
  return report;
}

#endif

}  // namespace halfscope::bench
