// The mixed-precision tile Cholesky over MPI ranks (issue 9): linalg::cholesky_tiles on a
// DistTileMatrix spread 2D block-cyclic over a P x Q process grid, with the same algorithm and
// the same precision semantics, so the factor equals the one-process factor bit for bit.
#pragma once

#include <cstdint>

#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {

/// What the distributed factorization moved and how long its ranks waited (this rank's figures).
struct CholeskyTraffic {
  /// Payload bytes this rank sent (as a broadcast root: the tile once per receiving rank) and
  /// received, over all attempts.
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  /// Broadcasts this rank took part in.
  std::int64_t broadcasts = 0;
  /// Seconds this rank spent in MPI waits (the communication not hidden behind computation).
  double wait_seconds = 0.0;
};

/// Factors the symmetric positive definite matrix held in `a` (lower layout; every rank holds its
/// tiles) in place, collectively over a.comm(): on return each rank's tiles hold its part of L
/// with A = L L^T. Right-looking, step k: POTRF of (k, k) on its owner, L(k, k) broadcast down its
/// process column (with a status word), TRSM of the panel tiles (i, k) on their owners, each
/// L(i, k) broadcast along process row i mod P and then down process column i mod Q (non-blocking
/// broadcasts, all of a panel's in flight together), SYRK / GEMM updates of the owned trailing
/// tiles (OpenMP within the rank) in the variant options.policy chooses from the input's tile and
/// matrix norms (the same NT x NT table on every rank as on one process). Look-ahead: the updates
/// of the next panel's column run first, so panel k + 1 is factored and its row broadcasts are
/// posted before the rest of step k's updates, between which the OpenMP master thread moves them
/// on (MPI is called from that thread only: MPI_THREAD_FUNNELED). No global collective per step.
/// OpenMP threads per rank: OMP_NUM_THREADS when set, else the rank's processors divided by the
/// ranks on its host.
///
/// Each tile receives the same kernels with the same operands in the same order as in
/// linalg::cholesky_tiles, so the factor is identical to the one-process CPU factor (under the
/// same BLAS thread count: OpenBLAS's threaded POTRF rounds differently from its serial one).
///
/// Failures reach every rank: InvalidInput for another layout or non-finite input (naming the
/// entry); NotPositiveDefinite naming the tile, the pivot and the policy as cholesky_tiles does;
/// NumericalError on an FP16 overflow or a non-finite factor. A failing rank marks every later
/// message it sends, ranks that learn of a failure stop computing but keep the communication
/// schedule, and one reduction at the end picks the earliest failure (by step, then tile) and
/// throws it on every rank (its message prefixed "MPI rank r: " by agree). With options.recover
/// the retry of cholesky_tiles runs on every rank: the same promotion of the same variant table,
/// the input restored from this rank's copy of its tiles. `traffic`, when given, receives this
/// rank's communication figures.
linalg::CholeskyReport cholesky(DistTileMatrix& a, const linalg::CholeskyOptions& options,
                                CholeskyTraffic* traffic = nullptr);

}  // namespace halfscope::mpi
