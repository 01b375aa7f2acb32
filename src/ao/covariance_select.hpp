// Parts of a covariance generated on the CPU: the tiles or the rows one MPI rank owns (issue 9:
// the covariance generated where it is owned, never gathered). Internal header; the MPI layer
// (src/mpi/covariance.cpp) is its user.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::ao::detail {

/// FP32 tiles of `layout` (the layout covariance_tiles(system, kind, layout.tile_size()) makes):
/// tile (ti, tj) is written at tiles[ti * layout.tile_cols() + tj] (column-major, leading dimension
/// its height) when that pointer is non-null, and not computed otherwise. Each tile written is bit
/// for bit the same tile of covariance_tiles(system, kind, nb, {cpu, f32, host, noise}): the same
/// plan and the same per-element evaluation, only the work units of other tiles are skipped.
/// InvalidInput for a layout or pointer table that does not fit the system and kind.
void covariance_tiles_selected(const AoSystem& system, CovarianceKind kind,
                               const linalg::TileLayout& layout, const std::vector<float*>& tiles,
                               bool noise);

/// Rows [row_begin, row_end) of Ctm in FP32 into `out` ((row_end - row_begin) x cols, row-major),
/// bit for bit those rows of covariance(system, ctm, {cpu, f32, host, noise}). InvalidInput for
/// another kind or a range outside [0, rows].
void covariance_rows_selected(const AoSystem& system, CovarianceKind kind, std::int64_t row_begin,
                              std::int64_t row_end, float* out, bool noise);

}  // namespace halfscope::ao::detail
