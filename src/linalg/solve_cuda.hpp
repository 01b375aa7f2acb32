// GPU triangular solves behind solve_right for device tile factors (internal header, CUDA builds
// only). Owner: the GPU Cholesky work; called by solve.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/solve_devices.hpp"

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

/// What solve_right_streamed did.
struct StreamedSolve {
  std::int64_t slabs = 0;       // slabs of tile columns L was cut into
  std::int64_t row_blocks = 0;  // blocks of B's rows solved one after the other (1: B at once)
  std::int64_t host_to_device = 0, device_to_host = 0;  // bytes: L's slabs, B's rows
  std::int64_t workspace = 0;                           // device bytes allocated
  // Linear index into b of its first non-finite entry before the solve (b left as it was) or in
  // the solution (the solve stopped after that block of rows), -1 for none.
  std::int64_t input_non_finite = -1, output_non_finite = -1;
};

/// X A = B in place on CUDA device `device` with a lower float32 factor `l` in host memory
/// (pageable, pinned for the call, or pinned), using at most `budget` bytes of device memory
/// (solve_ooc_cuda.cu): L streamed by slabs of tile columns, forward then backward, two slabs
/// resident at a time; `b` (r x n float32) on `device`, solved in place, or in host memory,
/// solved by blocks of rows that fit the budget beside two slabs (each block streams L twice).
/// The same roundings per tile as solve_right_cuda (the backward sums in another order) and the
/// same NumericalErrors, checked after each block of rows (b then holds partial results).
/// InvalidInput when the budget cannot hold two slabs of one tile column, their scratch and one
/// row of b (all of b's rows for b on the device), naming both; or when b is on another device.
/// b's entries are checked to be finite first (on the device for b there or in one block of
/// rows, else on the host) and each block's solution before it goes back: see StreamedSolve.
/// `hook` (may be empty) runs on each solved, finite block before it goes back (RowBlockHook:
/// blocks then cut from the end of b).
/// The device memory solve_right_streamed needs besides `rows` right-hand sides already on the
/// device, at its preferred shape (the tiles' inverses where rows >= nb, slabs of at least one
/// span of columns): a caller that keeps b on the device adds b's own bytes.
std::int64_t streamed_solve_need(const TileLayout& layout, const std::vector<GemmVariant>& variants,
                                 std::int64_t rows);

StreamedSolve solve_right_streamed(const TileMatrix& l, Array& b,
                                   const std::vector<GemmVariant>& variants, int device,
                                   std::int64_t budget, const RowBlockHook& hook = {});

}  // namespace halfscope::linalg::detail
