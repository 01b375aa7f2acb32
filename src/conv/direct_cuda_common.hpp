// Host helpers shared by the direct GPU convolutions (naive_cuda.cu, register_cuda*.cu,
// separable_cuda.cu): the argument check, launch sizing, cached device limits, and the lock that
// keeps a __constant__ kernel upload from racing a launch on another stream (the FP16/BF16 overflow
// check is overflow_check.hpp's). Include only from .cu files (CUDA builds).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conv/cuda_backend_util.hpp"
#include "conv/geometry.hpp"
#include "conv/kernels/direct_common.cuh"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv::detail {

/// check_gpu_call (cuda_backend_util.hpp), plus the direct kernels' own limit: kernel extents
/// fit the kernels' 32-bit tap loops.
inline void check_direct_call(std::string_view method, const Geometry& g, Precision p,
                              const Array& image, const Array& kernel, const Array& out,
                              std::span<const Precision> supported) {
  check_gpu_call(method, g, p, image, kernel, out, supported);
  if (g.krows > INT_MAX / 2 || g.kcols > INT_MAX / 2)
    throw Unsupported(std::string(method) + ": kernel extent above 2^30 (" +
                      std::to_string(g.krows) + " x " + std::to_string(g.kcols) + ")");
}

/// Sets the dynamic shared-memory limit of `kernel` when it needs more than the default 48 KB.
template <class K>
void allow_shared_memory(K* kernel, std::int64_t bytes) {
  if (bytes > 48 * 1024)
    HS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

/// The kernel arguments of a call (pointers and geometry; the overflow counter is set later).
inline kernels::ConvArgs make_conv_args(const Geometry& g, const Array& image, const Array& kernel,
                                        Array& out) {
  kernels::ConvArgs a;
  a.image = image.data();
  a.kernel = kernel.data();
  a.out = out.data();
  a.rows = g.rows;
  a.cols = g.cols;
  a.out_rows = g.out_rows;
  a.out_cols = g.out_cols;
  a.row0 = g.row0;
  a.col0 = g.col0;
  a.krows = static_cast<int>(g.krows);
  a.kcols = static_cast<int>(g.kcols);
  a.circular = g.boundary == Boundary::Circular ? 1 : 0;
  return a;
}

/// True when `p` and every row start (p + k * row_bytes) are 16-byte aligned.
inline bool rows_aligned16(const void* p, std::int64_t row_bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && row_bytes % 16 == 0;
}

/// A grid x extent, or Unsupported when the output is too wide for one launch.
inline unsigned grid_x(std::int64_t blocks, std::string_view method) {
  if (blocks > INT_MAX)
    throw Unsupported(std::string(method) + ": output too wide for one launch (" +
                      std::to_string(blocks) + " blocks)");
  return static_cast<unsigned>(std::max<std::int64_t>(blocks, 1));
}

/// Grid y extent: the kernels loop over the rest (grid-stride), so 65535 is enough.
inline unsigned grid_y(std::int64_t blocks) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 65535));
}

/// Multiprocessors and opt-in shared memory per block of a device.
struct DeviceLimits {
  int sms = 0;
  int smem_optin = 0;
};
/// The current device's limits, queried once per device and thread (attribute queries are cheap
/// but not free, and a call's host time before its launch is GPU idle time on an empty stream).
inline DeviceLimits current_device_limits() {
  thread_local std::vector<DeviceLimits> cache;
  int dev = 0;
  HS_CUDA_CHECK(cudaGetDevice(&dev));
  if (cache.size() <= static_cast<std::size_t>(dev))
    cache.resize(static_cast<std::size_t>(dev) + 1);
  DeviceLimits& d = cache[static_cast<std::size_t>(dev)];
  if (d.sms == 0) {
    HS_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
    HS_CUDA_CHECK(
        cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  }
  return d;
}

/// Serialises the use of a __constant__ kernel buffer across streams: the constructor takes a
/// process-wide mutex and makes `stream` wait for the event recorded by the previous holder on
/// this device (whose launch may still be reading the buffer); `release()` records this caller's
/// event after its launch. Calls on one stream are ordered anyway; the wait only matters when two
/// streams convolve concurrently. It is not skipped for a repeated stream handle: a destroyed
/// stream's handle value may come back for a new stream while the old one's work still runs.
/// The lock also guards the device's tap staging buffer (staging()). The events and buffers live
/// for the whole process on purpose (freeing them after the runtime has shut down at exit fails).
class ConstantMemoryLock {
 public:
  explicit ConstantMemoryLock(cudaStream_t stream) : lock_(mutex()), stream_(stream) {
    HS_CUDA_CHECK(cudaGetDevice(&device_));
    auto& slots = device_slots();
    if (slots.size() <= static_cast<std::size_t>(device_)) slots.resize(device_ + 1);
    Slot& s = slots[device_];
    if (!s.event) HS_CUDA_CHECK(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming));
    if (s.used) HS_CUDA_CHECK(cudaStreamWaitEvent(stream_, s.event, 0));
  }
  ~ConstantMemoryLock() {
    if (!lock_.owns_lock()) return;
    // Error path: still mark the buffer as in use by whatever was enqueued.
    Slot& s = device_slots()[device_];
    if (cudaEventRecord(s.event, stream_) == cudaSuccess)
      s.used = true;
    else
      (void)cudaGetLastError();
  }
  ConstantMemoryLock(const ConstantMemoryLock&) = delete;
  ConstantMemoryLock& operator=(const ConstantMemoryLock&) = delete;

  /// Call after the launch that reads the buffer.
  void release() {
    Slot& s = device_slots()[device_];
    HS_CUDA_CHECK(cudaEventRecord(s.event, stream_));
    s.used = true;
    lock_.unlock();
  }

  /// This device's staging buffer of `capacity` bytes (the same capacity on every call: the
  /// size of the __constant__ buffer) for taps prepared on the device before their upload.
  [[nodiscard]] void* staging(std::int64_t capacity) {
    Slot& s = device_slots()[device_];
    if (!s.staging) HS_CUDA_CHECK(cudaMalloc(&s.staging, static_cast<std::size_t>(capacity)));
    return s.staging;
  }

 private:
  struct Slot {
    cudaEvent_t event = nullptr;
    bool used = false;
    void* staging = nullptr;
  };
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<Slot>& device_slots() {
    static auto* slots = new std::vector<Slot>();  // process lifetime, see above
    return *slots;
  }
  std::unique_lock<std::mutex> lock_;
  cudaStream_t stream_;
  int device_ = 0;
};

// The register convolution of one precision family (register_cuda_<family>.cu), called by
// register_cuda() after check_direct_call.
void register_run_double(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s);
void register_run_single(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s);
void register_run_half(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s);
void register_run_mixed(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s);
void register_run_bf16(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s);

// The streaming register kernel for a rank-one kernel k(u, v) = col[u] row[v] (separable_cuda,
// FP32 and FP16 storage families): false, with nothing launched, where it does not apply
// (register_launch.cuh's separable_stream_run).
bool separable_stream_single(const Geometry& g, Precision p, kernels::ConvArgs a,
                             const kernels::SepTaps& taps, cudaStream_t s);
bool separable_stream_half(const Geometry& g, Precision p, kernels::ConvArgs a,
                           const kernels::SepTaps& taps, cudaStream_t s);
bool separable_stream_mixed(const Geometry& g, Precision p, kernels::ConvArgs a,
                            const kernels::SepTaps& taps, cudaStream_t s);
bool separable_stream_bf16(const Geometry& g, Precision p, kernels::ConvArgs a,
                           const kernels::SepTaps& taps, cudaStream_t s);

}  // namespace halfscope::conv::detail
