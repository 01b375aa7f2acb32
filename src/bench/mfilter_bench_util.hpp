// Internal pieces shared by the two cases of `halfscope bench mfilter`: the FP64 CPU reference
// (every build) and, in CUDA builds, device memory accounting and reading back the leading block
// of a device result.
#pragma once

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::bench::detail {

/// The FP64 reference of the leading `n_ref` correlation times: direct_cpu in Double on the
/// host (compensated running sums), on the data prefix those times read. templates (T, C, K),
/// data (C, L) float32 host; moveouts (T, C) int64 and weights (T, C) float32 may be empty
/// (0 and 1). Returns (T, n_ref) (network sum) or (T, C, n_ref) float32: direct_cpu writes
/// float32, so the reference itself carries at most 2^-25 relative rounding.
Array fp64_reference(const Array& templates, const Array& data, const Array& moveouts,
                     const Array& weights, std::int64_t n_ref, bool network_sum,
                     MfNormalize normalize = MfNormalize::Short);

}  // namespace halfscope::bench::detail

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "halfscope/bench/mfilter_bench.hpp"
#include "halfscope/bench/report.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::bench::detail {

/// Peak device memory of one call, measured two ways because neither sees everything:
/// - the high-water mark of the device's default memory pool, which every stream-ordered
///   scratch buffer (cuda::StreamScratch, cudaMallocAsync) comes from: exact, pool only;
/// - device memory in use (cudaMemGetInfo: total - free) sampled every 0.5 ms by a host thread,
///   above its level when the watch started: also sees cudaMalloc'd arrays and library
///   workspaces (cuFFT plans, cuBLAS), but can miss a peak shorter than the sampling period.
/// Only warm-up calls are watched, never timed ones (the sampling thread would perturb them).
class MemoryWatch {
 public:
  MemoryWatch();
  ~MemoryWatch();
  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;
  /// Stops sampling and records both peaks into `c.params` next to `resident_bytes` (the inputs
  /// and outputs the benchmark itself holds on the device): resident_bytes, pool_high_bytes,
  /// polled_extra_bytes and peak_device_bytes = resident + max(pool high, polled extra).
  void finish(BenchCase& c, double resident_bytes);

 private:
  static std::int64_t used_now() noexcept;
  cudaMemPool_t pool_ = nullptr;
  std::int64_t baseline_ = 0;
  std::atomic<std::int64_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The first `n_ref` columns of the rows of a device (rows, n_corr) float32 result, on the host.
Array leading_block(const float* device_out, std::int64_t rows, std::int64_t n_corr,
                    std::int64_t n_ref, cudaStream_t stream);

/// max |x - ref| over finite entries, and the count of non-finite entries of x, into c.error
/// as `<prefix>max_abs` and `<prefix>nonfinite` (the max is +inf, JSON null, when any is).
void record_error(BenchCase& c, const std::string& prefix, const Array& ref, const Array& x);

/// Bytes of device memory free now.
std::int64_t device_free_bytes();

}  // namespace halfscope::bench::detail

namespace halfscope::bench {
/// Case (a) and case (b), appended to `report`.
void run_mfilter_study_case(const MfBenchOptions& o, BenchReport& report);
void run_mfilter_network_case(const MfBenchOptions& o, BenchReport& report);
}  // namespace halfscope::bench
#endif
