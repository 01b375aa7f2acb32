// Covariances generated where they are owned (include/halfscope/mpi/covariance.hpp): the CPU
// backend, or on a GPU rank the GPU one, handed a selection (src/ao/covariance_select.hpp) of this
// rank's tiles or rows.
//
// Work per rank. Elements are evaluated tile by tile, so a rank computes about 1 / (P Q) of
// Cmm's elements; the per-sensor-pair tables (offset tables, a few thousand structure-function
// values) are built on every rank, and the edge-point blocks (an NGS against an LGS) skip only
// the row chunks without an owned tile, so a rank evaluates about 1 / P of those blocks.
#include "halfscope/mpi/covariance.hpp"

#include <string>
#include <vector>

#include "ao/covariance_select.hpp"
#include "halfscope/core/error.hpp"
#include "mpi/reconstructor_threads.hpp"

namespace halfscope::mpi {

DistTileMatrix covariance_tiles(const Comm& comm, const ao::AoSystem& system,
                                ao::CovarianceKind kind, std::int64_t nb, ProcessGrid grid,
                                bool noise, int device) {
  // The layout is checked on every rank alike (the same arguments everywhere): one agreement
  // covers it and the generation, which can fail on some ranks only (a non-finite element in one
  // rank's tiles).
  const detail::HostThreadShare share(comm);
  linalg::TileLayout layout;
  agree(comm, [&] {
    if (kind == ao::CovarianceKind::ctm)
      throw InvalidInput(
          "mpi::covariance_tiles: kind: expected a symmetric covariance (cmm or ctt), found ctm "
          "(its rows: mpi::covariance_row_range)");
    if (nb < 1)
      throw InvalidInput("mpi::covariance_tiles: nb: expected a tile size >= 1, found " +
                         std::to_string(nb));
    grid.check(comm.size());
    const std::int64_t n = ao::covariance_rows(system, kind);
    layout = linalg::TileLayout(n, n, nb, linalg::TileFill::lower);
  });
  DistTileMatrix out(comm, layout, grid);
  agree(comm, [&] {
    const auto count = static_cast<std::size_t>(layout.tile_rows() * layout.tile_cols());
    std::vector<float*> tiles(count, nullptr);
    std::vector<std::int64_t> offsets(count, -1);
    for (std::int64_t tj = 0; tj < layout.tile_cols(); ++tj)
      for (std::int64_t ti = tj; ti < layout.tile_rows(); ++ti)
        if (out.owns(ti, tj)) {
          const auto t = static_cast<std::size_t>(ti * layout.tile_cols() + tj);
          tiles[t] = out.tile(ti, tj);
          offsets[t] = tiles[t] - out.local_data();
        }
    if (device < 0)
      ao::detail::covariance_tiles_selected(system, kind, layout, tiles, noise);
    else
      ao::detail::covariance_tiles_selected_cuda(system, kind, layout, out.local_data(),
                                                 out.local_elements(), offsets, noise, device);
  });
  return out;
}

Array covariance_row_range(const ao::AoSystem& system, ao::CovarianceKind kind,
                           std::int64_t row_begin, std::int64_t row_end, bool noise) {
  const std::int64_t m = ao::covariance_rows(system, kind), n = ao::covariance_cols(system, kind);
  if (kind != ao::CovarianceKind::ctm)
    throw InvalidInput("mpi::covariance_row_range: kind: expected ctm, found " +
                       std::string(ao::covariance_kind_name(kind)));
  if (row_begin < 0 || row_begin > row_end || row_end > m)
    throw InvalidInput("mpi::covariance_row_range: rows: expected a range within [0, " +
                       std::to_string(m) + "], found [" + std::to_string(row_begin) + ", " +
                       std::to_string(row_end) + ")");
  Array out(DType::f32, {row_end - row_begin, n});
  ao::detail::covariance_rows_selected(system, kind, row_begin, row_end, out.data_as<float>(),
                                       noise);
  return out;
}

RowRange row_block(std::int64_t m, int rank, int ranks) noexcept {
  return {m * rank / ranks, m * (rank + 1) / ranks};
}

}  // namespace halfscope::mpi
