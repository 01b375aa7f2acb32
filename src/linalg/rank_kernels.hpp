// The tile kernels of one rank of a distributed tile Cholesky (internal): the MPI factorization
// (src/mpi/cholesky_steps.cpp) schedules the steps and their broadcasts, a RankKernels runs the
// rank's POTRF, TRSM and updates where its tiles live: on the CPU (src/mpi) or on one CUDA
// device (rank_kernels_cuda.cu, a GPU rank). The broadcasts go through the host buffers this
// object hands out (page-locked for a GPU rank, so the copies to and from the device are
// asynchronous), each with one status word after the tile.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "linalg/cholesky_cpu.hpp"

namespace halfscope::linalg::detail {

/// This rank's place in a P x Q process grid and its tiles: tile (i, j), i >= j, is owned when
/// i mod P == row and j mod Q == col, stored at local + offsets[i * NT + j] (-1 when not owned),
/// column-major with ld = its height, as in a TileMatrix.
struct RankShare {
  const TileLayout* layout = nullptr;
  int p = 1, q = 1, row = 0, col = 0;
  float* local = nullptr;
  std::int64_t local_elements = 0;
  std::vector<std::int64_t> offsets;
  /// Host threads this rank may use (its share of its host's cores).
  int threads = 1;

  [[nodiscard]] bool in_row(std::int64_t i) const { return i % p == row; }
  [[nodiscard]] bool in_col(std::int64_t i) const { return i % q == col; }
  /// Whether this rank holds panel tile L(i, k) during a step (its row's or its column's copy).
  [[nodiscard]] bool needs_panel_row(std::int64_t i) const { return in_row(i) || in_col(i); }
};

/// A failure of one tile task: step k, the tile (i, j) the task wrote (its order among failures
/// is (k, i, j)), the exception to throw and the tile the recover rule promotes.
using RecordFailure = std::function<void(std::int64_t k, std::int64_t i, std::int64_t j,
                                         std::exception_ptr error, const FailedTile& tile)>;

/// What a rank computes in each step. Failures of the arithmetic are never thrown: they go to
/// the RecordFailure given at creation, immediately (CPU) or when the device reports them (at
/// poll or finish); errors of the machinery (CUDA, cuBLAS) are thrown.
class RankKernels {
 public:
  virtual ~RankKernels() = default;
  /// Host buffer of panel tile L(i, k) for steps of parity `parity` (height(i) * nb floats and a
  /// status word), for every i with needs_panel_row(i); the diagonal tile's (nb^2 + 1 floats).
  [[nodiscard]] virtual float* panel_buffer(int parity, std::int64_t i) = 0;
  [[nodiscard]] virtual float* diagonal_buffer() = 0;
  /// Waits until the buffers of parity `parity` and the diagonal buffer may be written again
  /// (a device may still be reading them into its own copies).
  virtual void reuse_buffers(int parity) = 0;
  /// POTRF of owned tile (k, k) in place, then L(k, k) into diagonal_buffer() (its first
  /// height(k)^2 floats). A non-positive pivot is recorded (NotPositiveDefinite).
  virtual void factor_diagonal(std::int64_t k) = 0;
  /// L(k, k) is in diagonal_buffer() (this rank is in process column k mod Q).
  virtual void diagonal_arrived(std::int64_t k) = 0;
  /// L(i, k) = A(i, k) L(k, k)^-T for the owned panel tiles i in `rows`, each then copied into
  /// panel_buffer(k % 2, i). Returns once the buffers hold them.
  virtual void solve_panel(std::int64_t k, const std::vector<std::int64_t>& rows) = 0;
  /// Every panel tile L(i, k), i > k, this rank needs is in its panel buffer.
  virtual void panel_arrived(std::int64_t k) = 0;
  /// Step k's updates of the owned tiles (i, j), j in [j_first, j_last], i >= j: SYRK on the
  /// diagonal, the GEMM in the tile's variant elsewhere, with L(i, k) and L(j, k) from the panel
  /// buffers (or their device copies). `progress` is called from time to time while they run on
  /// the host (the caller's MPI progress); a device only queues them.
  virtual void update(std::int64_t k, std::int64_t j_first, std::int64_t j_last,
                      const std::function<void()>& progress) = 0;
  /// Whether a failure has been seen so far (a device reports what it has found, without
  /// waiting); recorded failures are already in the caller's hands.
  virtual bool poll() = 0;
  /// Waits for every queued task, records what failed, and leaves the factor in share.local.
  virtual void finish() = 0;
  /// Bytes of scratch this rank allocated (device and page-locked host).
  [[nodiscard]] virtual std::int64_t scratch_bytes() const = 0;
};

/// A GPU rank's kernels on CUDA `device`: share.local is copied to the device (and back by
/// finish); the updates batch each step's tiles by variant (strict FP32 SYRK and TRSM, cuSOLVER's
/// POTRF, the GEMM variants of the one-process GPU path with their FP16 overflow flags). Throws
/// Unsupported in a build without CUDA, CudaError when the device cannot hold the rank's tiles
/// and panels.
std::unique_ptr<RankKernels> make_device_rank_kernels(int device, const RankShare& share,
                                                      const std::vector<GemmVariant>& variants,
                                                      const std::string& policy,
                                                      RecordFailure record);

}  // namespace halfscope::linalg::detail
