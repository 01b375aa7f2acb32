// DistTileMatrix::write_lower_npy (halfscope/mpi/tiles.hpp): a distributed factor written as one
// dense .npy file by the ranks that own its tiles.
#include <vector>

#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {
namespace {

// The rows of tile (ti, tj) (column-major, ld = its height) at their places in the n x n
// row-major data, a diagonal tile's only up to the diagonal (the file's zeros stay above it).
void write_tile_rows(const SharedNpy& out, const linalg::TileLayout& layout, std::int64_t ti,
                     std::int64_t tj, const float* tile, std::vector<float>& row) {
  const std::int64_t h = layout.tile_height(ti), w = layout.tile_width(tj);
  const std::int64_t n = layout.rows(), nb = layout.tile_size();
  for (std::int64_t r = 0; r < h; ++r) {
    const std::int64_t cols = ti == tj ? r + 1 : w;
    for (std::int64_t c = 0; c < cols; ++c) row[static_cast<std::size_t>(c)] = tile[c * h + r];
    out.write(row.data(), cols, (ti * nb + r) * n + tj * nb);
  }
}

}  // namespace

NpyWrite DistTileMatrix::write_lower_npy(const std::filesystem::path& path, int root) const {
  const std::int64_t n = layout_.rows();
  std::vector<float> row(static_cast<std::size_t>(layout_.tile_size()));
  return write_by_ranks(
      *comm_, path, {n, n}, root,
      [&](const SharedNpy& out) {
        for (std::int64_t j = 0; j < layout_.tile_cols(); ++j)
          for (std::int64_t i = j; i < layout_.tile_rows(); ++i)
            if (owns(i, j)) write_tile_rows(out, layout_, i, j, tile(i, j), row);
      },
      [&] { return gather(root); },
      [&](const SharedNpy& out, const linalg::TileMatrix& whole) {
        const float* base = whole.storage.data_as<float>();
        for (std::int64_t j = 0; j < layout_.tile_cols(); ++j)
          for (std::int64_t i = j; i < layout_.tile_rows(); ++i)
            if (layout_.stored(i, j))
              write_tile_rows(out, layout_, i, j, base + layout_.tile_offset(i, j), row);
      });
}

}  // namespace halfscope::mpi
