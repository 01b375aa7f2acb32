// One attempt of the MPI tile Cholesky: the steps, their broadcasts and the tile kernels
// (cholesky_steps.cpp), behind halfscope/mpi/cholesky.hpp (internal header).
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/mpi/cholesky.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/tiles.hpp"
#include "linalg/cholesky_cpu.hpp"
#include "linalg/rank_kernels.hpp"

namespace halfscope::mpi::detail {

/// No failure: larger than every failure key.
inline constexpr std::int64_t kNoFailure = std::numeric_limits<std::int64_t>::max();

/// Returns when `code` is MPI_SUCCESS, else ends the job (abort_job) naming `call`: a failed MPI
/// call in the middle of the factorization leaves the other ranks waiting on this one, and no
/// collective can tell them any more.
void check_mpi(int code, const char* call);

/// Orders failures as the algorithm meets them: step k, then the tile (i, j) (POTRF of step k is
/// (k, k), before every GEMM of step k, which updates tiles with i > j > k).
[[nodiscard]] inline std::int64_t failure_key(std::int64_t nt, std::int64_t k, std::int64_t i,
                                              std::int64_t j) noexcept {
  return (k * nt + i) * nt + j;
}

/// This rank's earliest own failure in one attempt (key kNoFailure when none).
struct RankFailure {
  std::int64_t key = kNoFailure;
  std::exception_ptr error;
  linalg::detail::FailedTile tile;
};

/// The row and column communicators of a process grid: this rank's process row (ranked by
/// column) and process column (ranked by row). Collective over the grid's communicator.
struct GridComms {
  GridComms(const Comm& world, const ProcessGrid& grid);
  int row = 0, col = 0;  // this rank's grid position
  Comm row_comm, col_comm;
  /// OpenMP threads for this rank's tile kernels: OMP_NUM_THREADS when set, else this rank's
  /// share of the processors it may run on (those processors divided by the ranks of its host,
  /// at least 1), so that ranks started on one host do not oversubscribe it with spinning
  /// threads.
  int threads = 1;
};

/// A CPU rank's kernels (cholesky_tile_ops.cpp): those of cholesky_cpu, called as it calls
/// them (POTRF with cholesky_tiles' text naming `policy`; SYRK on the diagonal, the GEMM in the
/// tile's variant elsewhere; after a failed GEMM, which of its inputs did not fit FP16), the
/// updates spread over `threads` OpenMP threads, the panels in plain host buffers.
std::unique_ptr<linalg::detail::RankKernels> make_host_rank_kernels(
    const linalg::detail::RankShare& share, const std::vector<linalg::GemmVariant>& variants,
    const std::string& policy, int threads, linalg::detail::RecordFailure record);

/// Runs every step of the factorization of `a` once, the GEMMs updating tile (i, j) in
/// variants[i * NT + j], on this rank's CPU (device < 0) or on CUDA device `device` (a GPU rank:
/// its tiles copied there and back); adds its communication to `traffic` and raises *scratch to
/// the bytes of buffers and device memory it took. Never throws a failure of the arithmetic: the
/// earliest one this rank met is returned, after every broadcast of the schedule has been
/// completed (a failing rank marks what it sends and stops computing, so no rank waits for it).
/// A failed MPI, CUDA or cuBLAS call during the steps ends the job (abort_job): the other ranks
/// could wait on it forever.
RankFailure factor_steps(DistTileMatrix& a, const GridComms& comms,
                         const std::vector<linalg::GemmVariant>& variants,
                         const std::string& policy_name, int device, CholeskyTraffic& traffic,
                         std::int64_t* scratch);

}  // namespace halfscope::mpi::detail
