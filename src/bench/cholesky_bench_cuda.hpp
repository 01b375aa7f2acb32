// GPU pieces of `bench cholesky` / `bench tor` (internal header; the functions exist only in CUDA
// builds, src/bench/cholesky_bench_cusolver.cu): cuSOLVER's dense Cholesky peers and the device
// memory poller.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "halfscope/core/array.hpp"

namespace halfscope::bench::cholesky_detail {

/// Peak device memory in use while it lives: a thread reads cudaMemGetInfo (total - free, the
/// whole device, other processes included) every millisecond. The reading before the thread
/// starts is the baseline.
class DeviceMemoryPoller {
 public:
  DeviceMemoryPoller();
  ~DeviceMemoryPoller();
  DeviceMemoryPoller(const DeviceMemoryPoller&) = delete;
  DeviceMemoryPoller& operator=(const DeviceMemoryPoller&) = delete;
  /// Stops the thread (idempotent) and returns the peak bytes in use seen.
  std::int64_t stop();
  [[nodiscard]] std::int64_t baseline() const noexcept { return baseline_; }

 private:
  std::int64_t baseline_ = 0;
  std::atomic<std::int64_t> peak_{0};
  std::atomic<bool> running_{true};
  std::thread thread_;
};

/// Device bytes free now (cudaMemGetInfo).
std::int64_t device_free_bytes();

/// cuSOLVER Xpotrf (lower) in place on `dense`, an n x n symmetric C-contiguous float32 (spotrf)
/// or float64 (dpotrf) device array, timed by CUDA events on the solver's stream (workspace
/// allocated before the start event). Returns milliseconds. NotPositiveDefinite naming the order
/// of the failing minor when info > 0; CudaError when info < 0.
double cusolver_potrf_ms(Array& dense);

/// Times of the cuSOLVER FP32 reconstructor.
struct CusolverTorTimes {
  double potrf_ms = 0;
  double potrs_ms = 0;
};

/// R = Ctm Cmm^-1 in FP32 by cuSOLVER: Xpotrf (spotrf) of `cmm` (n x n float32, device, both
/// triangles, overwritten) then Xpotrs (spotrs) with the m right-hand sides of `ctm` (m x n
/// C-contiguous float32 device array = the column-major n x m Ctm^T), overwritten with R. Errors
/// as cusolver_potrf_ms.
CusolverTorTimes cusolver_reconstructor_f32(Array& cmm, Array& ctm);

}  // namespace halfscope::bench::cholesky_detail
