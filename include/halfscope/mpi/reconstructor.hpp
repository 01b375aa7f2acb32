// The tomographic reconstructor R = Ctm Cmm^-1 over MPI ranks (issue 9): ao::tomographic_
// reconstructor with Cmm generated, factored and used 2D block-cyclic (mpi/covariance.hpp,
// mpi/cholesky.hpp, mpi/solve.hpp), never gathered. Each rank generates and solves its own block
// of R's rows (Ctm's rows), so R ends distributed by rows; tomographic_reconstructor gathers it
// on rank 0.
//
// The same arithmetic as one process: the same FP32 tiles and rows of the covariances, the factor
// of mpi::cholesky (equal to cholesky_tiles'), and the triangular solves of mpi::solve_right, so
// R equals ao::tomographic_reconstructor's on the CPU bit for bit with the same BLAS thread count
// (see mpi/solve.hpp). GPU ranks (device cuda: one CUDA device per rank) generate their parts of
// the covariances, factor and solve on their devices with the GPU kernels of one process (the
// same covariance elements bit for bit), so R agrees with the one-process GPU R within the
// precision's tolerance.
#pragma once

#include <cstdint>
#include <filesystem>

#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/mpi/cholesky.hpp"
#include "halfscope/mpi/covariance.hpp"
#include "halfscope/mpi/npy_write.hpp"
#include "halfscope/mpi/solve.hpp"
#include "halfscope/mpi/tiles.hpp"

namespace halfscope::mpi {

/// This rank's part of the reconstructor.
struct ReconstructorPart {
  /// matrix: rows [rows.begin, rows.end) of R (count x n float32, host; an empty Array when this
  /// rank holds none). factor / solve: the reports (the same on every rank). Times: the slowest
  /// rank's, per phase. tiptilt_groups: q.
  ao::Reconstructor local;
  RowRange rows;              // which rows of R this rank holds (row_block of m)
  std::int64_t m = 0, n = 0;  // R's shape
  ProcessGrid grid;
  int device = -1;                 // this rank's CUDA device (GPU ranks), -1 on CPU ranks
  CholeskyTraffic factor_traffic;  // this rank's communication in the factorization
  SolveTraffic solve_traffic;      // and in the triangular solves
  /// Payload bytes received by all ranks together, factorization and solves.
  std::int64_t bytes_moved = 0;
};

/// Builds R over the ranks of comm (collective) on the grid (ProcessGrid::for_ranks(comm.size())
/// is the usual choice). Options as ao::tomographic_reconstructor: both tip-tilt methods (with
/// woodbury the q rows of U^T are solved on every rank besides its own rows, and the FP64
/// correction of its rows done there), policies, tile, recover. device cpu or auto: CPU ranks;
/// cuda: GPU ranks, each on options.devices' one device or else on rank_device(comm) (Unsupported
/// where its host has none; InvalidInput for more than one). result_memory must be the host
/// (Unsupported otherwise). Errors reach every rank alike (InvalidInput, NotPositiveDefinite
/// naming the tile and the policy, CudaError, ...).
[[nodiscard]] ReconstructorPart tomographic_reconstructor_rows(
    const Comm& comm, const ao::AoSystem& system, const ao::ReconstructorOptions& options,
    ProcessGrid grid);

/// R (m x n float32) on `root` from every rank's part; an empty Array on the other ranks.
/// Collective.
[[nodiscard]] Array gather_rows(const Comm& comm, const ReconstructorPart& part, int root);

/// R written as one .npy file (m x n float32) by every rank, each its own rows in one pwrite
/// (collective, through SharedNpy, halfscope/mpi/npy_write.hpp), so that no rank holds all of R
/// (4.5 GB at the E-ELT size); when some rank cannot open root's file, R is gathered on `root` and
/// written there. A failed write throws on every rank and leaves nothing under `path`. Returns
/// root's uncommitted output and the count of ranks without the file (NpyWrite).
NpyWrite write_rows_npy(const Comm& comm, const ReconstructorPart& part,
                        const std::filesystem::path& path, int root);

/// tomographic_reconstructor_rows, then R gathered on rank 0: there `matrix` is all of R, on the
/// other ranks an empty Array; the reports and times are the same on every rank.
[[nodiscard]] ao::Reconstructor tomographic_reconstructor(const Comm& comm,
                                                          const ao::AoSystem& system,
                                                          const ao::ReconstructorOptions& options,
                                                          ProcessGrid grid);

}  // namespace halfscope::mpi
