// Covariances of an AO system generated where they are owned (issue 9): the tiles of Cmm a rank
// owns in the 2D block-cyclic layout, or a range of rows of Ctm, computed on this rank's CPU (or
// its CUDA device: a GPU rank) and never gathered. Each element is the one covariance_tiles /
// covariance computes on the same kind of device (FP32, every element in FP64 rounded once), bit
// for bit.
#pragma once

#include <cstdint>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {

/// Cmm or Ctt (the symmetric kinds: lower tiles of size nb) spread over `grid`: each rank computes
/// only the tiles it owns, each equal bit for bit to the same tile of
/// ao::covariance_tiles(system, kind, nb, {cpu, float32, noise}). With device >= 0 (a GPU rank)
/// the GPU backend generates them on that CUDA device of this host, each tile equal to the GPU's
/// ao::covariance_tiles, and they are copied into the rank's host storage. Collective over comm
/// (the allocation, and the agreement on failures: an invalid system, kind or nb throws the same
/// typed error on every rank; CudaError, Unsupported without CUDA).
[[nodiscard]] DistTileMatrix covariance_tiles(const Comm& comm, const ao::AoSystem& system,
                                              ao::CovarianceKind kind, std::int64_t nb,
                                              ProcessGrid grid, bool noise = true, int device = -1);

/// Rows [row_begin, row_end) of Ctm as a (row_end - row_begin) x n float32 host array, equal bit
/// for bit to those rows of ao::covariance(system, ctm, {cpu, float32, noise}). Local (not
/// collective). InvalidInput for another kind or a range outside [0, m].
[[nodiscard]] Array covariance_row_range(const ao::AoSystem& system, ao::CovarianceKind kind,
                                         std::int64_t row_begin, std::int64_t row_end,
                                         bool noise = true);

/// The rows of an m-row matrix that `rank` of `ranks` holds when they are split in contiguous,
/// balanced blocks: [m rank / ranks, m (rank + 1) / ranks).
struct RowRange {
  std::int64_t begin = 0, end = 0;
  [[nodiscard]] std::int64_t count() const noexcept { return end - begin; }
};
[[nodiscard]] RowRange row_block(std::int64_t m, int rank, int ranks) noexcept;

}  // namespace halfscope::mpi
