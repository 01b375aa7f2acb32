// Host helpers shared by the direct GPU convolutions (naive_cuda.cu, register_cuda*.cu): argument
// checks, the FP16/BF16 overflow counter, and the lock that keeps a __constant__ kernel upload
// from racing a launch on another stream. Include only from .cu files (CUDA builds).
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

#include "conv/geometry.hpp"
#include "conv/kernels/direct_common.cuh"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv::detail {

/// Checks what dispatch promises (backends.hpp): a supported precision, device arrays of the
/// storage dtype, C-contiguous, shaped as the geometry says. Throws Unsupported / InvalidInput.
inline void check_direct_call(std::string_view method, const Geometry& g, Precision p,
                              const Array& image, const Array& kernel, const Array& out,
                              std::span<const Precision> supported) {
  const std::string m(method);
  if (std::find(supported.begin(), supported.end(), p) == supported.end())
    throw Unsupported(m + ": precision " + std::string(precision_name(p)) +
                      " is not supported; supported: " + precision_list(supported));
  if (g.rows < 1 || g.cols < 1 || g.krows < 1 || g.kcols < 1 || g.out_rows < 0 || g.out_cols < 0)
    throw InvalidInput(m + ": empty image or kernel, or negative output extent");
  if (g.krows > INT_MAX / 2 || g.kcols > INT_MAX / 2)
    throw Unsupported(m + ": kernel extent above 2^30 (" + std::to_string(g.krows) + " x " +
                      std::to_string(g.kcols) + ")");
  const DType want = storage_dtype(p);
  const struct {
    const Array* a;
    const char* name;
    std::int64_t r, c;
  } args[] = {{&image, "image", g.rows, g.cols},
              {&kernel, "kernel", g.krows, g.kcols},
              {&out, "output", g.out_rows, g.out_cols}};
  for (const auto& x : args) {
    if (x.a->empty() && !(x.a == &out && g.out_rows * g.out_cols == 0))
      throw InvalidInput(m + ": " + x.name + " array is empty");
    if (x.a->empty()) continue;
    if (x.a->dtype() != want)
      throw InvalidInput(m + ": " + x.name + " is " + x.a->describe() + ", precision " +
                         std::string(precision_name(p)) + " stores " +
                         std::string(dtype_name(want)));
    if (!x.a->on_device())
      throw InvalidInput(m + ": " + x.name + " must be in device memory, got " + x.a->describe());
    if (x.a->ndim() != 2 || x.a->dim(0) != x.r || x.a->dim(1) != x.c || !x.a->is_c_contiguous())
      throw InvalidInput(m + ": " + x.name + " must be a C-contiguous " + std::to_string(x.r) +
                         " x " + std::to_string(x.c) + " array, got " + x.a->describe());
  }
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

/// Multiprocessors and opt-in shared memory per block of the current device.
struct DeviceLimits {
  int sms = 0;
  int smem_optin = 0;
};
inline DeviceLimits current_device_limits() {
  int dev = 0;
  DeviceLimits d;
  HS_CUDA_CHECK(cudaGetDevice(&dev));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  HS_CUDA_CHECK(
      cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return d;
}

/// Device count of outputs that became inf/NaN from finite inputs (FP16/BF16 storage), allocated
/// and zeroed on the stream; `check` waits for the stream and throws NumericalError if any. The
/// wait is the price of never returning an overflowed result silently (a few microseconds).
class OverflowCounter {
 public:
  explicit OverflowCounter(cudaStream_t s) : stream_(s) {
    HS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), sizeof(unsigned int), s));
    HS_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, sizeof(unsigned int), s));
  }
  ~OverflowCounter() {
    if (cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  OverflowCounter(const OverflowCounter&) = delete;
  OverflowCounter& operator=(const OverflowCounter&) = delete;
  [[nodiscard]] unsigned int* get() const noexcept { return ptr_; }

  void check(std::string_view method, Precision p, std::int64_t outputs) const {
    unsigned int n = 0;
    HS_CUDA_CHECK(cudaMemcpyAsync(&n, ptr_, sizeof n, cudaMemcpyDeviceToHost, stream_));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (n == 0) return;
    const bool bf16 = p == Precision::BF16;
    throw NumericalError(std::string(method) + ": " + std::to_string(n) + " of " +
                         std::to_string(outputs) + " output pixels overflowed " +
                         (bf16 ? "BF16" : "FP16 (largest finite 65504)") +
                         " although every input they read is finite; scale the image or the "
                         "kernel down" +
                         (p == Precision::Half ? ", or use precision mixed" : ""));
  }

 private:
  cudaStream_t stream_;
  unsigned int* ptr_ = nullptr;
};

/// Serialises the use of a __constant__ kernel buffer across streams: the constructor takes a
/// process-wide mutex and makes `stream` wait for the event recorded by the previous holder on
/// this device (whose launch may still be reading the buffer); `release()` records this caller's
/// event after its launch. Calls on one stream are ordered anyway; this only matters when two
/// streams convolve concurrently. The events live for the whole process on purpose (destroying
/// them after the runtime has shut down at exit would fail).
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

 private:
  struct Slot {
    cudaEvent_t event = nullptr;
    bool used = false;
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

}  // namespace halfscope::conv::detail
