// What the out-of-core paths share (internal header, CUDA builds only): pinning of host storage,
// the size of a run of tile columns, the gigabytes in their messages. Users: cholesky_ooc_cuda.cu,
// solve_ooc_cuda.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/tiles.hpp"

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

/// Elements of tile columns [c0, c1) of a lower layout, each from its diagonal tile down: one
/// contiguous range, so a slab of columns is one copy.
inline std::int64_t column_elements(const TileLayout& l, std::int64_t c0, std::int64_t c1) {
  const std::int64_t end = c1 < l.tile_cols() ? l.tile_offset(c1, c1) : l.element_count();
  return end - l.tile_offset(c0, c0);
}

/// "5.31 MB", "20.4 GB": a byte count for the budget messages, three significant digits in the
/// largest decimal unit under it (the tiny budgets of tests read as KB or MB, not 0.0000 GB).
inline std::string gb(std::int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  const char* unit = b >= 1e9 ? " GB" : b >= 1e6 ? " MB" : b >= 1e3 ? " KB" : " bytes";
  const double scaled = b >= 1e9 ? b / 1e9 : b >= 1e6 ? b / 1e6 : b >= 1e3 ? b / 1e3 : b;
  char text[32];
  std::snprintf(text, sizeof text,
                scaled >= 100 || b < 1e3 ? "%.0f"
                : scaled >= 10           ? "%.1f"
                                         : "%.2f",
                scaled);
  return text + std::string(unit);
}

}  // namespace halfscope::linalg::detail
