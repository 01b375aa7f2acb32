// GPU triangular solves behind solve_right for device tile factors (internal header, CUDA builds
// only). Owner: the GPU Cholesky work; called by solve.cpp.
#pragma once

#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// X A = B in place on the device, A = L L^T: `l` lower float32 device tiles, `b` r x n
/// C-contiguous float32 on the same device (memory: column-major n x r, ld n, so each tile row of
/// L meets a contiguous row block). Y L^T = B then X L = Y; diagonal tiles by strict FP32 strsm, or
/// when r >= nb by their FP32 inverses applied as 3xTF32 GEMMs; the off-diagonal updates with tile
/// (i, j) of L in variants[i * NT + j]. Low-precision copies of L's tiles and of each solved block
/// are made once. Throws NumericalError naming the tile when an operand overflows FP16 (or the
/// format of its variant), when a diagonal tile's inverse is not finite, or when a block of the
/// right-hand sides is not finite (or past TF32's range) before its solve by the inverse;
/// synchronises before returning.
void solve_right_cuda(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants);

}  // namespace halfscope::linalg::detail
