// Pinning of host storage for the out-of-core paths (internal header, CUDA builds only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "halfscope/core/array.hpp"

namespace halfscope::linalg::detail {

// Pins pageable host storage for the call (DMA at full speed, copies asynchronous) and unpins it
// after; storage already pinned is left alone. A refusal to pin (a locked-memory limit) leaves
// the copies pageable: slower and synchronous with the host, still correct.
class HostPin {
 public:
  HostPin(void* data, std::int64_t bytes, Memory memory) {
    if (memory != Memory::host || bytes == 0) return;
    if (cudaHostRegister(data, static_cast<std::size_t>(bytes), cudaHostRegisterPortable) ==
        cudaSuccess)
      data_ = data;
    else
      (void)cudaGetLastError();
  }
  ~HostPin() {
    if (data_ && cudaHostUnregister(data_) != cudaSuccess) (void)cudaGetLastError();
  }
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;

 private:
  void* data_ = nullptr;
};

}  // namespace halfscope::linalg::detail
