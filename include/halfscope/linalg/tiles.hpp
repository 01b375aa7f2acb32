// Tiled matrix storage shared by the covariance generator (which writes straight into it) and the
// tile Cholesky (which factors it in place).
//
// The matrix is cut into nb x nb tiles (the last tile row / column is smaller when nb does not
// divide the size). Each tile is stored contiguously in column-major order with its own row count
// as leading dimension, so a tile is a ready BLAS / cuBLAS operand (pointer + ld). Tiles follow
// one another column of tiles by column of tiles, top to bottom within a column. A lower layout
// (for symmetric matrices) stores only the tiles on and below the diagonal: the diagonal tiles hold
// both triangles, which the Cholesky reads only the lower half of.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::linalg {

/// Which tiles are stored.
enum class TileFill : std::uint8_t {
  full,   // every tile
  lower,  // tiles (i, j) with i >= j only (symmetric matrices)
};

/// The geometry of a tiled matrix: sizes, tile size, and where each tile starts.
class TileLayout {
 public:
  TileLayout() = default;
  /// Throws InvalidInput unless rows, cols >= 1, nb >= 1, and rows == cols for a lower layout.
  TileLayout(std::int64_t rows, std::int64_t cols, std::int64_t nb, TileFill fill);

  [[nodiscard]] std::int64_t rows() const noexcept { return rows_; }
  [[nodiscard]] std::int64_t cols() const noexcept { return cols_; }
  [[nodiscard]] std::int64_t tile_size() const noexcept { return nb_; }
  [[nodiscard]] TileFill fill() const noexcept { return fill_; }
  [[nodiscard]] std::int64_t tile_rows() const noexcept { return tile_rows_; }  // ceil(rows/nb)
  [[nodiscard]] std::int64_t tile_cols() const noexcept { return tile_cols_; }  // ceil(cols/nb)
  /// Rows of tile row ti (nb, or what is left for the last one); the tile's leading dimension.
  [[nodiscard]] std::int64_t tile_height(std::int64_t ti) const noexcept;
  /// Columns of tile column tj.
  [[nodiscard]] std::int64_t tile_width(std::int64_t tj) const noexcept;
  /// Whether tile (ti, tj) is stored (always for full; ti >= tj for lower).
  [[nodiscard]] bool stored(std::int64_t ti, std::int64_t tj) const noexcept;
  /// Offset, in elements, of the first element of stored tile (ti, tj).
  [[nodiscard]] std::int64_t tile_offset(std::int64_t ti, std::int64_t tj) const;
  /// Offset, in elements, of matrix element (i, j); (i, j) must lie in a stored tile.
  [[nodiscard]] std::int64_t element_offset(std::int64_t i, std::int64_t j) const;
  /// Elements stored in all (the size of the storage array).
  [[nodiscard]] std::int64_t element_count() const noexcept { return count_; }
  /// Number of stored tiles.
  [[nodiscard]] std::int64_t tile_count() const noexcept;

 private:
  std::int64_t rows_ = 0, cols_ = 0, nb_ = 0, tile_rows_ = 0, tile_cols_ = 0, count_ = 0;
  TileFill fill_ = TileFill::full;
  std::vector<std::int64_t> column_start_;  // offset of the first stored tile of each tile column
};

/// What a dense copy of a lower layout holds above the diagonal.
enum class UpperTriangle : std::uint8_t {
  mirror,  // the lower triangle mirrored: the whole symmetric matrix
  zero,    // zeros: a lower-triangular factor L
};

/// A tiled matrix: its layout and its storage, a 1-D Array of layout.element_count() elements of
/// dtype float32 or float64, on the host or on a device.
struct TileMatrix {
  TileLayout layout;
  Array storage;

  /// Uninitialised storage. Throws InvalidInput for a dtype other than f32 / f64.
  TileMatrix(TileLayout layout, DType dtype, Memory memory = Memory::host);
  TileMatrix() = default;

  [[nodiscard]] DType dtype() const noexcept { return storage.dtype(); }
  /// Dense copy (rows x cols, C order, same dtype) in `memory`. A lower layout gets its upper
  /// triangle as `upper` says: mirrored from the lower one (the whole symmetric matrix) or zero.
  /// Storage on the current device copied to device memory is re-laid out on the device.
  [[nodiscard]] Array to_dense(Memory memory = Memory::host,
                               UpperTriangle upper = UpperTriangle::mirror) const;
  /// Tiles a dense 2-D array (any floating dtype, host or device) into float32 / float64 storage in
  /// `memory`; a lower layout takes the lower triangle (the upper half of diagonal tiles mirrored).
  /// A C-contiguous float32 / float64 array on the current device tiled into device memory never
  /// leaves the device.
  [[nodiscard]] static TileMatrix from_dense(const Array& dense, std::int64_t nb, TileFill fill,
                                             DType dtype, Memory memory = Memory::host);
};

/// Where a dense copy of `tiles` should go to come back beside the device array `like`:
/// Memory::device when both are on the current device and its free memory holds the copy (5 %
/// to spare: the tiles are still alive beside it), else Memory::host, from where the caller moves
/// it once the tiles are gone (the peak of the host route is lower).
[[nodiscard]] Memory dense_copy_memory(const TileMatrix& tiles, const Array& like);

}  // namespace halfscope::linalg
