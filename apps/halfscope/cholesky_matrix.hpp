// The matrices of `halfscope cholesky` in and out, apart from the subcommand's flow
// (cmd_cholesky.cpp): the input read and checked, the factor written dense.
#pragma once

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

/// L of a factored lower tile matrix (host or device) as a dense n x n float32 host array, C
/// order, upper triangle zero (the diagonal tiles' upper halves still hold A, not L).
Array dense_lower(const linalg::TileMatrix& l_any);

}  // namespace halfscope::cli
