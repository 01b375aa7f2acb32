// Internal (CUDA builds only): small host-side helpers shared by the GPU FFT and GEMM convolution
// backends: argument checks, stream-ordered scratch memory, a per-thread pinned mailbox for
// results the host must read back, launch sizing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "conv/geometry.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv::fftgemm_util {

/// Checks what dispatch promises (backends.hpp): device arrays of the storage dtype, C-contiguous,
/// shaped as the geometry says. Throws InvalidInput naming `method` otherwise.
inline void check_arrays(const char* method, const Geometry& g, Precision p, const Array& image,
                         const Array& kernel, const Array& out) {
  const DType want = storage_dtype(p);
  const auto check = [&](const Array& a, const char* what, std::int64_t r, std::int64_t c) {
    if (a.empty() || !a.on_device() || a.dtype() != want || !a.is_c_contiguous() || a.ndim() != 2 ||
        a.dim(0) != r || a.dim(1) != c)
      throw InvalidInput(std::string(method) + ": " + what + " must be a C-contiguous device " +
                         std::string(dtype_name(want)) + "[" + std::to_string(r) + ", " +
                         std::to_string(c) + "] for precision " + std::string(precision_name(p)) +
                         ", got " + (a.empty() ? std::string("an empty array") : a.describe()));
  };
  if (g.rows < 1 || g.cols < 1 || g.krows < 1 || g.kcols < 1 || g.out_rows < 1 || g.out_cols < 1)
    throw InvalidInput(std::string(method) + ": empty geometry");
  check(image, "image", g.rows, g.cols);
  check(kernel, "kernel", g.krows, g.kcols);
  check(out, "output", g.out_rows, g.out_cols);
}

/// Device memory allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync): cheap to
/// take per call from the device's memory pool, and safe to free while work is queued.
class StreamScratch {
 public:
  StreamScratch(std::int64_t bytes, cudaStream_t stream) : stream_(stream) {
    HS_CUDA_CHECK(
        cudaMallocAsync(&ptr_, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)), stream));
  }
  ~StreamScratch() {
    if (ptr_ && cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(ptr_);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

/// Page-locked host memory of this thread (256 bytes, portable across devices) that device
/// results are copied into with cudaMemcpyAsync, so the host can wait on an event for exactly
/// that copy while the stream goes on working. One mailbox per thread: a call reads it before
/// returning, so calls on one thread never overlap in it.
inline void* pinned_mailbox() {
  struct Mailbox {
    void* ptr = nullptr;
    Mailbox() { HS_CUDA_CHECK(cudaHostAlloc(&ptr, 256, cudaHostAllocPortable)); }
    ~Mailbox() {
      if (ptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
    }
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;
  };
  thread_local Mailbox box;
  return box.ptr;
}

/// Blocks for a grid-stride kernel over `work` items with `threads` per block: enough to cover
/// the work once, at most `blocks_per_sm` waves' worth per SM.
inline int grid_blocks(std::int64_t work, int threads, int blocks_per_sm) {
  int device = 0;
  int sms = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t need = (work + threads - 1) / threads;
  return static_cast<int>(std::clamp<std::int64_t>(need, 1, std::int64_t{sms} * blocks_per_sm));
}

/// True when `p` is aligned to `bytes`.
inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace halfscope::conv::fftgemm_util
