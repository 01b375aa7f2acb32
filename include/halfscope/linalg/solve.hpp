// Solves with a tile Cholesky factor (issue 6, study 002 Algorithm 2): the tomographic
// reconstructor X A = B (R = Ctm Cmm^-1) by two triangular solves whose GEMMs follow a precision
// policy, a generic SPD solve A X = B, and for comparison an FP16 factor refined to FP32.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg {

/// How the triangular solves run.
struct SolveOptions {
  /// Variant of the GEMMs of both substitutions, chosen per tile (i, j), i > j, of the factor L
  /// they read (queried with the Frobenius norms of L's tiles and of L). Diagonal tiles are solved
  /// by FP32 TRSM. Default uniform:SP; study 002 runs HP1 here.
  Policy policy;
  /// CUDA devices of this host to split the rows of B over (empty: the factor's device). The
  /// factor's device solves its rows in place; every other device solves a copy of its rows with
  /// a copy of L (peer to peer), the same arithmetic per row. L and B on one device.
  std::vector<int> devices{};
  /// With `l` in host memory and one listed device, the solve runs on that device with L
  /// streamed through it by slabs of tile columns (the out-of-core factor of cholesky_tiles is
  /// solved where it was factored; src/linalg/solve_ooc_cuda.cu), `b` in host memory (solved by
  /// blocks of rows that fit) or on that device (solved in place). The device memory, in bytes,
  /// it may use there (0, or more than the device has free: what it has free, less 5 %). Ignored
  /// for `l` in device memory. Negative, or a budget that cannot hold two slabs of one tile
  /// column and one row of b: InvalidInput, naming both.
  std::int64_t device_memory = 0;
};

/// What a solve did.
struct SolveReport {
  std::string policy;                   // the policy's name
  std::array<std::int64_t, 7> tiles{};  // off-diagonal tiles of L per variant (GemmVariant order)
  /// A factor in host memory solved on a device (SolveOptions::device_memory): the slabs of tile
  /// columns it was streamed in (1: L went over once and stayed), the blocks of b's rows solved
  /// one after the other (each streams L twice), the bytes copied each way and the device memory
  /// allocated. All 0 otherwise.
  std::int64_t slabs = 0;
  std::int64_t row_blocks = 0;
  std::int64_t host_to_device_bytes = 0;
  std::int64_t device_to_host_bytes = 0;
  std::int64_t workspace_bytes = 0;

  /// Tiles of one variant.
  [[nodiscard]] std::int64_t count(GemmVariant v) const noexcept {
    return tiles[static_cast<std::size_t>(v)];
  }

  /// Calls f(name, value) for each count above, under the names the CLI's reports give them.
  template <class F>
  void for_each_count(F&& f) const {
    f("slabs", slabs);
    f("row_blocks", row_blocks);
    f("host_to_device_bytes", host_to_device_bytes);
    f("device_to_host_bytes", device_to_host_bytes);
    f("workspace_bytes", workspace_bytes);
  }
};

/// X A = B in place, A = L L^T: `l` is a factor from cholesky_tiles (lower float32 tiles), `b` an
/// r x n C-contiguous float32 array (each row one right-hand side) in the same memory as `l`
/// (host, or the same device; with `l` on the host and one listed device, host or that device),
/// overwritten with B A^-1: first Y L^T = B
/// (Y = B L^-T), then X L = Y, each over the tile columns of L: FP32 TRSM on the diagonal tiles,
/// the off-diagonal updates in the policy's variant. InvalidInput for another dtype, shape (the
/// message gives n and b's shape), layout or memory; NumericalError when an FP16 conversion of an
/// operand overflows (naming the tile).
SolveReport solve_right(const TileMatrix& l, Array& b, const SolveOptions& options = {});

/// A X = B for a symmetric positive definite A: factors `a` in place (cholesky_tiles with
/// `factor`), then solves. `b` is n (one right-hand side) or n x r, C-contiguous float32, in the
/// memory of `a`; overwritten with X. Since A is symmetric, A X = B is X^T A = B^T, solve_right's
/// row form: a vector (or n x 1) b is solved in place as one row; an n x r b is transposed into
/// an r x n scratch array, solved, and transposed back. Errors as cholesky_tiles and
/// solve_right.
CholeskyReport solve_spd(TileMatrix& a, Array& b, const CholeskyOptions& factor = {},
                         const SolveOptions& solve = {});

/// Options of the mixed-precision solve with iterative refinement.
struct RefinementOptions {
  CholeskyOptions factor;  // the low-precision factorization (for instance uniform:HP1)
  SolveOptions solve;      // the substitutions of each correction
  std::int64_t max_iterations = 10;
  /// Stop once the relative residual ||B - X A||_F / (||B||_F) is below this (default: a few
  /// FP32 unit roundoffs times sqrt(n) is what FP32 working precision can reach).
  double tolerance = 0.0;  // 0: 8 * 2^-24 * sqrt(n)
};

/// What the refinement did.
struct RefinementReport {
  CholeskyReport factor;
  std::int64_t iterations = 0;    // corrections kept (an undone one is not counted)
  std::vector<double> residuals;  // relative residual of the first solve and after each kept
                                  // correction: residuals.back() is that of the returned X
  bool converged = false;         // residuals.back() <= tolerance
  double tolerance = 0.0;         // the tolerance used (the default resolved)
  /// Why the loop stopped: "converged", "not converged after k corrections (max_iterations)", or
  /// "stagnated: correction k raised the relative residual from x to y and was undone ...".
  std::string stop_reason;
};

/// X A = B in place (b as in solve_right) for SPD `a` (lower float32 tiles, diagonal tiles holding
/// both triangles as covariance_tiles and TileMatrix::from_dense make them; not modified): factor
/// a copy with options.factor, solve, then correct with the residual B - X A computed from the
/// original A (FP64 on the CPU, cuBLAS SGEMMs on the GPU) until options.tolerance or
/// max_iterations. A correction that does not lower the residual (cond(A) u_factor >~ 1) is
/// undone and ends the loop. Reports non-convergence in the report (never throws for it);
/// errors of the factorization as cholesky_tiles; InvalidInput as solve_right and for a negative
/// max_iterations or tolerance.
RefinementReport solve_right_refined(const TileMatrix& a, Array& b,
                                     const RefinementOptions& options = {});

}  // namespace halfscope::linalg
