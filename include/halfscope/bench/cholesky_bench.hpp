// `halfscope bench cholesky` and `halfscope bench tor` (issue 6): the mixed-precision tile
// Cholesky (linalg/cholesky.hpp) and the tomographic reconstructor (ao/reconstructor.hpp) per
// precision policy, next to cuSOLVER in the same run, in the one benchmark schema (report.hpp).
//
// Matrices of `bench cholesky`: the AO slope covariance Cmm (FP32 lower tiles, noise on, so SPD)
// of the E-ELT preset restricted to its first k measuring sensors, n = 11,152 k (k = 1..9: the
// MOAO system sizes 11k, 22k, 45k, 67k, 78k, 100k), or the whole Cmm of a named preset. A case
// regenerates its input before every repeat (untimed) since the factorization works in place.
//
// What is timed: the cholesky_tiles call (on the GPU between CUDA events on the legacy default
// stream around a call that synchronises before returning, so the span covers the norms, the
// policy and every stream's work; on the CPU the steady clock), and cuSOLVER Xpotrf in FP32
// (spotrf) and FP64 (dpotrf) on the same matrix stored dense (lower), between CUDA events on the
// solver's stream. Rates: n^3 / 3 flops over the median. Peak device memory: a poller thread
// reads cudaMemGetInfo every millisecond during the case (whole-device use, so the baseline
// before the case is reported too).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/bench/report.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::bench {

/// The relative backward error ||A - L L^T||_F / ||A||_F of a tile factor, computed in FP64.
struct BackwardError {
  double relative = 0;           // the estimate (exact when every tile was checked)
  double max_tile_relative = 0;  // max over checked tiles of ||E_ij||_F / ||A_ij||_F
  std::int64_t tiles_checked = 0;
  std::int64_t tiles_total = 0;  // stored tiles (i >= j)
  [[nodiscard]] bool sampled() const noexcept { return tiles_checked < tiles_total; }
};

/// ||A - L L^T||_F / ||A||_F for `l` (a factor from cholesky_tiles) and `a` (the matrix it
/// factored), both lower float32 tile matrices of one layout, host or device (device storage is
/// copied to the host). Tile (i, j) of E = A - L L^T is A_ij - sum_{k <= j} L_ik L_jk^T, every
/// product and sum in FP64 (the upper half of L's diagonal tiles read as zero). ||A||_F is exact
/// (every tile, off-diagonal ones twice). With `max_tiles` > 0 and fewer than the stored tiles,
/// only a deterministic random sample is checked (a quarter diagonal tiles, the rest strictly
/// lower) and ||E||_F^2 is estimated stratum by stratum: NT / s_d times the diagonal sum plus
/// 2 (NT (NT - 1) / 2) / s_o times the off-diagonal sum. InvalidInput for mismatched layouts.
BackwardError cholesky_backward_error(const linalg::TileMatrix& l, const linalg::TileMatrix& a,
                                      std::int64_t max_tiles = 0);

/// Options of `bench cholesky`.
struct CholBenchOptions {
  /// Sizes n = 11,152 k (k = 1..9) of the E-ELT Cmm restricted to its first k sensors.
  std::vector<std::int64_t> sizes;
  /// Preset names whose whole Cmm is factored ("check": n = 912); used in addition to `sizes`.
  std::vector<std::string> systems;
  std::vector<std::string> policies = {"uniform:SP"};  // parse_policy strings
  std::int64_t tile = 0;                               // 0: 1024 on the GPU, 512 on the CPU
  int repeats = 3;  // timed factorizations per case (each on a fresh input)
  /// Untimed factorizations before them (lazy module loading, library handles and heuristics,
  /// the memory pool on every device; on 4 x H200 a cold first run took twice a warm one).
  int warmup = 1;
  DeviceKind device = DeviceKind::Auto;
  bool cusolver = true;           // also cuSOLVER spotrf / dpotrf (GPU only)
  std::int64_t error_tiles = 64;  // tiles checked for the backward error (0: all)
  int layers = 10;                // atmosphere profile of the presets (10 or 60)
  /// CUDA devices the policies' factorizations run on (CholeskyOptions::devices; empty: the
  /// current device); the input is generated on the current device, the cuSOLVER peers run there.
  std::vector<int> devices{};
  /// Device memory in bytes the policies' factorizations may use on each device
  /// (CholeskyOptions::device_memory; 0: what the device has free, less 5 %). A budget below the
  /// matrix and its scratch makes a one-device factorization run out of core.
  std::int64_t device_memory = 0;
  std::function<void(const std::string&)> progress;
};

/// Runs `bench cholesky`. Failures of a case (NotPositiveDefinite, FP16 overflow, a CudaError such
/// as running out of device memory) are recorded in it (params "failed") rather than thrown.
BenchReport run_cholesky_bench(const CholBenchOptions& options);

/// Options of `bench tor`.
struct TorBenchOptions {
  std::vector<std::string> systems = {"check", "mid"};  // ao_preset names
  std::vector<std::string> policies = {"uniform:SP"};   // factorization policies
  std::string solve_policy = "uniform:SP";              // the substitutions' policy
  /// LGS tip-tilt constants (ao/reconstructor.hpp); the cuSOLVER peer uses the same formulation.
  ao::TiptiltMethod tiptilt = ao::TiptiltMethod::woodbury;
  std::int64_t tile = 0;  // 0: 1024 GPU, 512 CPU
  int repeats = 3;
  int warmup = 1;  // untimed reconstructors before them (CholBenchOptions::warmup)
  DeviceKind device = DeviceKind::Auto;
  bool cusolver = true;  // cuSOLVER FP32 spotrf + spotrs reconstructor (GPU only)
  /// The FP64 reference reconstructor and the evaluation hold FP64 n x n matrices: systems with
  /// more measurement slopes are scored without the FP64 reference (skipped, with the reason).
  std::int64_t max_fp64_n = 50000;
  int layers = 10;
  double wavelength_m = 1.65e-6;
  /// CUDA devices of the reconstructor (ReconstructorOptions::devices; empty: the current one).
  std::vector<int> devices{};
  /// Each policy runs once per entry (ReconstructorOptions::device_memory, bytes; 0: in device
  /// memory as usual, > 0: Cmm in host memory streamed through the device within that budget).
  std::vector<std::int64_t> device_memories = {0};
  std::function<void(const std::string&)> progress;
};

/// Runs `bench tor`: per system and policy the factor and solve times (the library's CUDA events /
/// steady clock), the total with the covariance generation, the Strehl ratio of R and its
/// difference to the FP64 reconstructor's. A policy that fails is recorded (params "failed").
BenchReport run_tor_bench(const TorBenchOptions& options);

/// The E-ELT preset (10 or 60 layers) with only its first `k` measuring sensors: Cmm of n =
/// 11,152 k. InvalidInput unless 1 <= k <= 9.
ao::AoSystem eelt_first_sensors(std::int64_t k, int layers = 10);

}  // namespace halfscope::bench
