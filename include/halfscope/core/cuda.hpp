// CUDA helpers for backend code (.cu and CUDA-only .cpp files): the one check macro, RAII for
// streams and events, a CUDA-event timer. Include only where HALFSCOPE_WITH_CUDA is set.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);
[[noreturn]] void throw_library_error(const char* library, int code, const char* expr,
                                      const char* file, int line);

/// Scheduling priority of a stream's kernels when streams compete for the multiprocessors.
enum class StreamPriority { normal, raised, high };

/// RAII CUDA stream (non-blocking).
class Stream {
 public:
  /// `high`: the device's greatest priority (a critical path, e.g. the Cholesky's panels, whose
  /// kernels then get multiprocessors before the trailing updates queued beside them); `raised`:
  /// midway between the default and `high` (work that feeds a critical path, ahead of bulk work).
  explicit Stream(StreamPriority priority = StreamPriority::normal);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

/// RAII CUDA event.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  void record(cudaStream_t stream) const;

 private:
  cudaEvent_t event_ = nullptr;
};

/// Waits for `stream` when it leaves scope, normally or by an exception (an error is swallowed: a
/// destructor), so the memory its queued copies and kernels use outlives them.
struct StreamDrain {
  cudaStream_t stream;
  ~StreamDrain();
};

/// The calling thread's current device.
int current_device();
/// The device that holds device memory `p` (cudaPointerGetAttributes).
int device_of(const void* p);

/// Restores the calling thread's current device when it leaves scope (also on an exception): for
/// code that moves between the devices of a host.
class DeviceGuard {
 public:
  DeviceGuard();
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// Times regions of one stream with a pair of CUDA events: `start()`, enqueue work, `stop()`
/// returns the elapsed milliseconds after synchronising on the stop event.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream = nullptr) : stream_(stream) {}
  void start();
  float stop_ms();

 private:
  cudaStream_t stream_;
  Event begin_;
  Event end_;
};

}  // namespace halfscope::cuda

/// Checks a CUDA runtime call; throws halfscope::CudaError with the expression, file and line.
#define HS_CUDA_CHECK(expr)                                                            \
  do {                                                                                 \
    const cudaError_t hs_cuda_status_ = (expr);                                        \
    if (hs_cuda_status_ != cudaSuccess)                                                \
      ::halfscope::cuda::throw_cuda_error(hs_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Checks the last kernel launch (call right after every `<<<...>>>`).
#define HS_CHECK_LAUNCH() HS_CUDA_CHECK(cudaGetLastError())

/// Checks a cuBLAS / cuFFT / cuSOLVER / cuDNN status (success is 0 in all of them).
#define HS_CUDA_LIBRARY_CHECK(library, expr)                                                      \
  do {                                                                                            \
    const int hs_lib_status_ = static_cast<int>(expr);                                            \
    if (hs_lib_status_ != 0)                                                                      \
      ::halfscope::cuda::throw_library_error(library, hs_lib_status_, #expr, __FILE__, __LINE__); \
  } while (0)
#define HS_CUBLAS_CHECK(expr) HS_CUDA_LIBRARY_CHECK("cuBLAS", expr)
#define HS_CUFFT_CHECK(expr) HS_CUDA_LIBRARY_CHECK("cuFFT", expr)
#define HS_CUSOLVER_CHECK(expr) HS_CUDA_LIBRARY_CHECK("cuSOLVER", expr)
