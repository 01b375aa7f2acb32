// The reconstructor with Cmm in host memory (issue 9; reconstructor_host.cpp): the covariances
// generated on the GPU piece by piece into pinned host memory, for the factorization and the
// solves that stream them through the device (internal header).
#pragma once

#include <cstdint>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::ao::detail {

/// The device memory the reconstructor may use on `device`: `requested` (> 0) or the free memory,
/// less 5 % (linalg's device_budget). Unsupported in a build without CUDA.
std::int64_t reconstructor_budget(int device, std::int64_t requested);

/// Cmm (kind cmm, symmetric) as lower float32 tiles of size nb in pinned host memory, generated
/// on `device` by slabs of tile columns of at most a third of `budget` (one column at least; two
/// slab buffers), each element as covariance_tiles on the GPU gives it.
linalg::TileMatrix covariance_tiles_on_host(const AoSystem& system, std::int64_t nb, int device,
                                            std::int64_t budget);

/// Rows [0, rows of Ctm) of a float32 (total_rows x n) array in pinned host memory filled with
/// Ctm, generated on `device` by blocks of rows of at most a third of `budget` (two block
/// buffers); the rows after them are the caller's to write (not initialised).
Array ctm_rows_on_host(const AoSystem& system, std::int64_t total_rows, int device,
                       std::int64_t budget);

/// Rows [0, rows of Ctm) of a float32 (total_rows x n) array on `device` filled with Ctm, in one
/// piece (the rows after them are the caller's to write).
Array ctm_rows_on_device(const AoSystem& system, std::int64_t total_rows, int device);

}  // namespace halfscope::ao::detail
