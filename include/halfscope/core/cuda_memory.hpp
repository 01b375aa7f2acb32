// Device-memory helpers for backend code (CUDA builds only): stream-ordered scratch, a per-thread
// pinned mailbox for small results the host must read back, launch sizing. One copy of each for
// every operation (conv, mfilter, linalg ...).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "halfscope/core/cuda.hpp"

namespace halfscope::cuda {

/// Raises the release threshold of the current device's default memory pool, once per device, to
/// kPoolRetainedBytes: by default the pool returns every freed byte to the driver at each
/// synchronisation, and the next call's cudaMallocAsync maps it again. For a 64 MB scratch that
/// was 0.15-0.25 ms per call on an H100 (the separable and FFT convolutions of a 4096^2 image),
/// more than their kernels. Memory beyond the threshold is still returned.
void retain_pool_memory();
inline constexpr std::uint64_t kPoolRetainedBytes = 512ull << 20;

/// Byte offsets of several arrays in one StreamScratch, each 256-byte aligned: one allocation (and
/// its host time) per call instead of one per array. add(bytes) returns the next array's offset;
/// total() is the scratch to allocate.
class ScratchCarve {
 public:
  std::int64_t add(std::int64_t bytes) {
    const std::int64_t at = total_;
    total_ += (bytes + 255) / 256 * 256;
    return at;
  }
  [[nodiscard]] std::int64_t total() const noexcept { return total_; }

 private:
  std::int64_t total_ = 0;
};

/// Device memory allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync): cheap to
/// take per call from the device's memory pool (which keeps up to kPoolRetainedBytes of freed
/// memory mapped, retain_pool_memory), and safe to free while work is still queued, also when a
/// launch throws.
class StreamScratch {
 public:
  StreamScratch(std::int64_t bytes, cudaStream_t stream) : stream_(stream) {
    retain_pool_memory();
    HS_CUDA_CHECK(
        cudaMallocAsync(&ptr_, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)), stream));
  }
  ~StreamScratch() {
    if (ptr_ && cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  [[nodiscard]] void* get() const noexcept { return ptr_; }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(ptr_);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

/// Page-locked host memory of this thread (256 bytes, portable across devices) that device
/// results are copied into with cudaMemcpyAsync, so the host waits for exactly that copy while
/// the stream goes on working. One mailbox per thread: a call reads it before returning, so
/// calls on one thread never overlap in it.
void* pinned_mailbox();

/// Blocks for a grid-stride kernel over `work` items with `threads` per block: enough to cover
/// the work once, at most `blocks_per_sm` waves' worth per SM of the current device.
int grid_blocks(std::int64_t work, int threads, int blocks_per_sm);

/// True when `p` is aligned to `bytes`.
inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace halfscope::cuda
