// The matrices of `halfscope cholesky` in and out, apart from the subcommand's flow
// (cmd_cholesky.cpp): the input read and checked, the factor written dense.
#pragma once

#include <cstdint>
#include <string>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::cli {

/// `v` with 9 significant digits ("%.9g"): enough to tell FP32 values apart in messages.
std::string number_text(double v);

/// The .npy file at `path` as a float64 n x n C-contiguous host array, checked: float32 or
/// float64, square with n >= 1, finite, and symmetric to a relative 1e-6 (only the lower triangle
/// is factored). InvalidInput naming the file, and the entry where one is wrong.
Array read_symmetric(const std::string& path);

/// A's .npy file read a tile at a time (the MPI ranks each read only their tiles): the header is
/// checked as read_symmetric checks it, each tile's entries and their mirrors as it checks them.
class SymmetricTileReader {
 public:
  /// Reads and checks the header (InvalidInput as read_symmetric's).
  explicit SymmetricTileReader(std::string path);
  ~SymmetricTileReader();
  SymmetricTileReader(const SymmetricTileReader&) = delete;
  SymmetricTileReader& operator=(const SymmetricTileReader&) = delete;

  [[nodiscard]] std::int64_t n() const noexcept { return n_; }

  /// The first entry (i, j), j <= i, of tile (ti, tj) that read_symmetric would refuse, in its
  /// order (by i, then j), as key i n + j with read_symmetric's message; key -1 when none.
  struct Failure {
    std::int64_t key = -1;
    std::string message;
  };
  /// Tile (ti, tj) of `layout` (ti >= tj) into `out` as float32, column-major with ld its
  /// height, reading it and its mirror (tj, ti).
  Failure read_tile(const linalg::TileLayout& layout, std::int64_t ti, std::int64_t tj,
                    float* out) const;

 private:
  // Rows [r0, r0 + rows) x columns [c0, c0 + cols) of A as float64, row-major.
  void read_block(std::int64_t r0, std::int64_t rows, std::int64_t c0, std::int64_t cols,
                  double* out) const;

  std::string path_;
  int fd_ = -1;
  std::int64_t n_ = 0, data_offset_ = 0, item_ = 0;
  bool f64_ = false, big_endian_ = false, fortran_ = false;
};

/// L of a factored lower tile matrix (host or device) as a dense n x n float32 host array, C
/// order, upper triangle zero (the diagonal tiles' upper halves still hold A, not L).
Array dense_lower(const linalg::TileMatrix& l_any);

}  // namespace halfscope::cli
