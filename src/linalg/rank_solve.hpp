// The triangular solves of a GPU rank (internal; issue 9): the MPI solve (src/mpi/solve.cpp)
// broadcasts the distributed factor one tile column at a time through host memory; a GPU rank
// copies each column into a whole copy of L on its device while the next one travels, then solves
// its rows there with the one-process GPU substitutions (solve_cuda.hpp). One copy of L per rank
// (n^2 / 2 floats: 20 GB at the E-ELT's n = 100,368), like solve_rows_devices' per-device copies:
// the GPU solve reads spans of tile rows and columns that a column-streaming solve would not have.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// A copy of a lower tile factor on one CUDA device, filled column by column from host memory.
class DeviceFactor {
 public:
  virtual ~DeviceFactor() = default;

  /// Starts copying tile column k (tiles (k .. NT-1, k)) to the device: tiles[i - k] is tile
  /// (i, k) in host memory (column-major, ld its height), read on another host thread until the
  /// next load_column or solve returns (so two buffers, alternated, keep the copies going). Waits
  /// for the previous column first; its copy's error, if any, is thrown here.
  virtual void load_column(std::int64_t k, const std::vector<const float*>& tiles) = 0;

  /// Waits for the last column, then X A = B in place for `rows` (r x n row-major float32, r >= 1,
  /// on the host or already on this device) with the variant of tile (i, j) in
  /// variants[i * NT + j] through solve_right_cuda; host rows go up and come back. Errors as
  /// solve_right_cuda.
  virtual void solve(Array& rows, const std::vector<GemmVariant>& variants) = 0;
};

/// Allocates the copy of a factor of `layout` (lower, float32) on CUDA device `device`; `threads`
/// host threads stage each column's copy. Unsupported in a build without CUDA; CudaError when the
/// device lacks the memory (the message gives the bytes).
std::unique_ptr<DeviceFactor> make_device_factor(int device, const TileLayout& layout, int threads);

}  // namespace halfscope::linalg::detail
