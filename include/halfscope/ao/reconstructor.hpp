// The mixed-precision tomographic reconstructor R = Ctm Cmm^-1 (issue 6, study 002 sections VI-
// VIII): Cmm generated in FP32 lower tiles, factored by the tile Cholesky under a precision policy,
// then two triangular solves of Ctm. The FP64 reference is reconstructor_fp64 (evaluation.hpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/solve.hpp"

namespace halfscope::ao {

/// How the LGS tip-tilt constants of Cmm (Sensor::lgs_tiptilt_arcsec2, MOAO's lgsCst) enter.
///  - woodbury (default): Cmm = K + U C U^T with U the indicators of each LGS's x and y slopes;
///    the tile Cholesky factors K and the rank-2-per-LGS term is applied exactly by Woodbury's
///    identity in FP64 (U^T rides along as q extra right-hand sides). The constants make Cmm
///    ill-conditioned (kappa 5.4e7 on preset mid, 1.9e5 without them): an FP32 Cholesky of Cmm
///    itself fails there, of K it does not.
///  - direct: Cmm with the constants is factored as it is (study 002's formulation).
enum class TiptiltMethod { woodbury, direct };

/// "woodbury" / "direct"; parse throws InvalidInput naming `field` and the choices.
std::string_view tiptilt_method_name(TiptiltMethod m) noexcept;
TiptiltMethod parse_tiptilt_method(std::string_view text, std::string_view field);

/// How to build the reconstructor.
struct ReconstructorOptions {
  linalg::Policy policy;        // the factorization's GEMMs (default uniform:SP)
  linalg::Policy solve_policy;  // the substitutions' GEMMs (default uniform:SP)
  std::int64_t tile = 1024;     // tile size nb of Cmm
  bool recover = false;         // promote failing regions instead of throwing (cholesky.hpp)
  DeviceKind device = DeviceKind::Auto;
  Memory result_memory = Memory::host;  // where R is returned (device keeps it on the GPU)
  TiptiltMethod tiptilt = TiptiltMethod::woodbury;  // see TiptiltMethod
  /// CUDA devices of this host (device cuda only; empty: the current device): Cmm and Ctm are
  /// generated on the current device, the factorization deals its tile columns over the listed
  /// devices (CholeskyOptions::devices) and the solves split the rows of Ctm over them
  /// (SolveOptions::devices).
  std::vector<int> devices{};
  /// Device memory, in bytes, the GPU run may use (0: none given). Given, or where Cmm's tiles
  /// and the right-hand sides alone exceed the device's free memory (less 5 %), Cmm is generated
  /// on the GPU piece by piece into pinned host memory and the factorization and the solves
  /// stream it through the device within that budget (CholeskyOptions::device_memory,
  /// SolveOptions::device_memory: out of core where it does not fit). Ctm and the tip-tilt rows
  /// stay on the device where they fit beside the streamed solve (rhs_memory device), else they
  /// go to pinned host memory too and are solved by blocks of rows. One device only (the listed
  /// one, or the current); negative: InvalidInput.
  std::int64_t device_memory = 0;
};

/// The reconstructor and what building it took.
struct Reconstructor {
  Array matrix;                     // R, m x n float32 (truth slopes x measured slopes)
  linalg::CholeskyReport factor;    // tiles per variant, recoveries
  linalg::SolveReport solve;        // tiles per variant of the substitutions
  double covariance_ms = 0;         // generating Cmm (tiles) and Ctm
  double factor_ms = 0;             // the tile Cholesky of Cmm
  double solve_ms = 0;              // the two triangular solves (and the tip-tilt correction)
  std::int64_t tiptilt_groups = 0;  // q, LGS slope groups corrected by Woodbury (0: none/direct)
  DeviceKind device = DeviceKind::Cpu;  // where it ran
  /// Where [Ctm; U^T] were generated and solved: device (GPU runs in core, and with
  /// device_memory where they fit beside the streamed solve), pinned (device_memory: solved by
  /// blocks of rows from host memory) or host (CPU runs).
  Memory rhs_memory = Memory::host;
};

/// Builds R = Ctm Cmm^-1 for the system with the tile Cholesky (times by CUDA events on the GPU,
/// the steady clock on the CPU). Errors as covariance_tiles, cholesky_tiles and solve_right:
/// NotPositiveDefinite names the tile and the policy (Cmm needs noise to be SPD).
[[nodiscard]] Reconstructor tomographic_reconstructor(const AoSystem& system,
                                                      const ReconstructorOptions& options = {});

}  // namespace halfscope::ao
