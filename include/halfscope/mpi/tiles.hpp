// Tile matrices spread over the ranks of a communicator, 2D block-cyclic (issue 9): the storage
// the MPI tile Cholesky (halfscope/mpi/cholesky.hpp) and the distributed AO reconstructor work on.
//
// The ranks form a P x Q process grid; tile (i, j) of a linalg::TileLayout lives on the rank at
// grid position (i mod P, j mod Q), as in ScaLAPACK / SLATE: every rank holds a share of every
// part of the matrix, so the shrinking trailing matrix of a factorization stays spread over all
// ranks. Each owned tile is stored exactly as in a linalg::TileMatrix (column-major, ld = the tile
// row's height), so the BLAS calls and GEMM variants of src/linalg apply to it unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "halfscope/linalg/tiles.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/npy_write.hpp"

namespace halfscope::mpi {

/// A P x Q grid of the ranks of a communicator: rank r sits at (r / cols, r % cols).
struct ProcessGrid {
  int rows = 1, cols = 1;
  /// P x Q = ranks with P <= Q and P as large as possible (1 x 1, 1 x 2, 1 x 3, 2 x 2, 2 x 3 ...).
  static ProcessGrid for_ranks(int ranks);
  /// Throws InvalidInput unless rows, cols >= 1 and rows * cols == ranks (message: the grid and
  /// the rank count).
  void check(int ranks) const;
  /// Rank owning tile (ti, tj): 2D block-cyclic.
  [[nodiscard]] int owner(std::int64_t ti, std::int64_t tj) const noexcept {
    return static_cast<int>(ti % rows) * cols + static_cast<int>(tj % cols);
  }
};

/// The tiles of a linalg::TileLayout this rank owns (float32, host): tile (i, j) (stored per the
/// layout's fill) lives on grid.owner(i, j), contiguous column-major with ld = tile_height(i),
/// exactly as in a TileMatrix, so every BLAS call and GEMM variant of src/linalg applies.
/// This rank's tiles follow one another in the layout's order (column by column of tiles, top to
/// bottom). Move-only.
class DistTileMatrix {
 public:
  /// Collective over comm (checks the grid against comm.size()); allocates this rank's tiles
  /// (uninitialised). Keeps a pointer to comm: comm must outlive the matrix.
  DistTileMatrix(const Comm& comm, linalg::TileLayout layout, ProcessGrid grid);

  [[nodiscard]] const Comm& comm() const noexcept { return *comm_; }
  [[nodiscard]] const linalg::TileLayout& layout() const noexcept { return layout_; }
  [[nodiscard]] const ProcessGrid& grid() const noexcept { return grid_; }
  /// Whether tile (ti, tj) is stored by the layout and owned by this rank (false out of range).
  [[nodiscard]] bool owns(std::int64_t ti, std::int64_t tj) const noexcept;
  /// An owned tile; InvalidInput naming (ti, tj), its owner and this rank otherwise.
  [[nodiscard]] float* tile(std::int64_t ti, std::int64_t tj);
  [[nodiscard]] const float* tile(std::int64_t ti, std::int64_t tj) const;
  /// Elements this rank stores (the sum of its tiles' sizes).
  [[nodiscard]] std::int64_t local_elements() const noexcept { return local_elements_; }
  /// This rank's tiles, one after another in the layout's order (for copies of the whole share).
  [[nodiscard]] float* local_data() noexcept { return data_.get(); }
  [[nodiscard]] const float* local_data() const noexcept { return data_.get(); }

  /// Each rank copies its tiles out of `whole` (the same float32 host TileMatrix on every rank,
  /// layout equal to `whole.layout`): for tests and inputs read from one file by every rank.
  /// Throws InvalidInput for another dtype or device memory (the same on every rank).
  static DistTileMatrix scatter(const Comm& comm, const linalg::TileMatrix& whole,
                                ProcessGrid grid);
  /// The whole matrix on `root` (float32 host TileMatrix); an empty TileMatrix on the other ranks.
  /// Collective over comm.
  [[nodiscard]] linalg::TileMatrix gather(int root) const;

  /// The lower triangle as a dense n x n float32 .npy file (upper triangle zero, as a gathered
  /// factor is written), each rank writing the rows of its own tiles (through SharedNpy,
  /// halfscope/mpi/npy_write.hpp), so that no rank holds the whole matrix; gathered on `root` and
  /// written there when some rank cannot open root's file. Collective; a failed write throws on
  /// every rank and leaves nothing under `path`. Returns root's uncommitted output (NpyWrite).
  [[nodiscard]] NpyWrite write_lower_npy(const std::filesystem::path& path, int root) const;

 private:
  [[nodiscard]] std::int64_t offset_of(std::int64_t ti, std::int64_t tj) const;

  const Comm* comm_;
  linalg::TileLayout layout_;
  ProcessGrid grid_;
  std::vector<std::int64_t> offsets_;  // per tile (i * tile_cols + j): offset in data_, or -1
  std::int64_t local_elements_ = 0;
  std::unique_ptr<float[]> data_;
};

}  // namespace halfscope::mpi
