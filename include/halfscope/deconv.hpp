// Tikhonov deconvolution of a radio-interferometric dirty image (study 000, sections II, IV, V).
//
//   auto result = deconv::deconvolve(dirty, psf, {.solver = deconv::Solver::CG,
//                                                 .precision = Precision::Mixed});
//
// The criterion is J(f) = ||g - H f||^2 + lambda ||f||^2 with gradient 2 (H^T H f - H^T g +
// lambda f). (Algorithm 1 of the study writes `+ lambda ||f||^2` inside the gradient: a misprint;
// the correct term is lambda f.) H convolves with the PSF, whose origin is pixel (rows / 2,
// cols / 2) (integer division: the centre of an fftshifted PSF); the PSF has the image's shape.
// Boundary `Circular`: H is circulant on the image grid (the exact solution is the Wiener filter);
// `Zero`: H is the linear convolution of the zero-extended sky, cropped to the image (the PSF
// sees no wrap-around; the exact solution is computed by FP64 conjugate gradient).
//
// Precisions (DESIGN.md section 2): `double` (reference), `single`, `half` (FP16 storage, every
// operation and the FFTs in FP16 with the study's 1/sqrt(N) pre-scaling; reductions accumulate
// in FP32), `mixed` (FP16 storage, FP32 arithmetic and FFTs), `split` (FP32 solution and
// residual, the operator applied in `mixed` to the residual's correction scaled into FP16's range,
// with reliable updates: the true residual is recomputed in FP32 whenever the low-precision one
// has dropped by a fixed factor, so the result reaches FP32 accuracy while most operator
// applications read and write FP16).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/conv.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::deconv {

/// The solvers of study 000 and two beyond it.
///  Fixed:         gradient descent with a constant step (default 1 / L, L = 2 (max|h^|^2 +
///                 lambda) from the PSF spectrum; any step below 2 / L converges). Steps are
///                 always those of f <- f - step grad J (grad J = 2 (Q f - H^T g)).
///  Optimal:       exact line search alpha = k^T k / k^T Q k (Q = H^T H + lambda I).
///  Backtracking:  halves alpha until J decreases; the run stops after `backtrack_retries`
///                 consecutive halvings fail (the study's rule), reporting a stall.
///  HalfThenFloat: backtracking in `half` until it stalls or `half_iterations` pass, then the
///                 optimal step in `single` from its result (the study's "half then float");
///                 `precision` does not change it (its phases fix theirs).
///  CG:            conjugate gradient on the normal equations Q f = H^T g.
///  Wiener:        the exact minimiser (circular: one FFT filter; zero boundary: FP64 CG to a
///                 relative residual of 1e-12); the accuracy reference of every other solver.
enum class Solver { Fixed, Optimal, Backtracking, HalfThenFloat, CG, Wiener };

std::string_view solver_name(Solver s) noexcept;  // "fixed", "optimal", "backtracking", ...
/// Parses the names above ("half-then-float" for HalfThenFloat); throws InvalidInput listing them.
Solver parse_solver(std::string_view text);

struct DeconvOptions {
  Solver solver = Solver::CG;
  /// double, single, half, mixed or split (others: InvalidInput listing these).
  Precision precision = Precision::Single;
  double lambda =
      0.01;  // the study's value; must be >= 0 (0 only with a PSF spectrum without zeros)
  std::int64_t iterations = 200;  // operator iterations (HalfThenFloat: both phases together)
  Boundary boundary = Boundary::Circular;
  DeviceKind device = DeviceKind::Auto;
  /// Fixed step; 0 means 1 / L (see Solver). Must be in [0, 2 / L).
  double step = 0;
  /// Backtracking: halvings tried per iteration before the run is declared stalled.
  int backtrack_retries = 20;
  /// HalfThenFloat: the most iterations of the half-precision phase (0: iterations / 2).
  std::int64_t half_iterations = 0;
  /// Stop early once the relative distance to the exact solution is below this (0: never).
  /// Needs the exact solution (computed when this is positive or `trace_distance` is set).
  double target_distance = 0;
  /// Trace every k-th iteration (and always the first and the last); 0 records no trace.
  std::int64_t trace_every = 1;
  /// Compute the exact solution once and record the distance to it in the trace.
  bool trace_distance = true;
};

/// One row of the trace. The FP64 columns are computed from the iterate, outside the timed region,
/// so precisions are compared fairly; `criterion_solver` is J as the solver computed it in its own
/// precision (NaN where the solver did not compute J at that iteration, e.g. CG and fixed).
struct TraceRow {
  std::int64_t iteration = 0;   // operator iterations done (0: the initial image)
  std::string phase;            // the precision running: "single", "half", ... ("half" then
                                // "single" for HalfThenFloat)
  double criterion = 0;         // J(f_k) in FP64
  double criterion_solver = 0;  // J(f_k) as the solver saw it (NaN when not computed)
  double step = 0;              // the step taken to reach f_k (NaN for the initial image;
                                // CG: its step along its own direction)
  double elapsed_ms = 0;        // solver time since the start (tracing excluded)
  double distance = 0;          // ||f_k - f*|| / ||f*|| (NaN without the exact solution)
};

/// Why the run ended.
enum class StopReason { Iterations, TargetReached, Stalled, Converged };
std::string_view stop_reason_name(StopReason r) noexcept;  // "iterations", "target", "stalled", ...

struct DeconvResult {
  Array image;  // the restored sky, float64, on the host, the dirty image's shape
  std::vector<TraceRow> trace;
  StopReason stop = StopReason::Iterations;
  std::string stop_detail;  // e.g. "backtracking: no decrease after 20 halvings at iteration 41"
  std::int64_t iterations = 0;          // operator iterations done
  double solver_ms = 0;                 // total solver time (tracing excluded)
  double exact_ms = 0;                  // time to compute the exact solution (0 when not computed)
  DeviceKind device = DeviceKind::Cpu;  // where it ran
  double lipschitz = 0;                 // L = 2 (max|h^|^2 + lambda)
  double step = 0;                      // the fixed / initial step used, in the convention f <- f -
                                        // step grad J (NaN for optimal, CG and Wiener)
  /// kappa(Q) = (max|h^|^2 + lambda) / (min|h^|^2 + lambda) over the operator's grid. When
  /// kappa u exceeds 0.01 for the working precision's unit roundoff u (FP32 for single, split and
  /// half-then-float; FP16 storage for half and mixed) `stop_detail` ends with a warning: no
  /// solver in that precision can promise a relative error below kappa u, whatever its stopping
  /// rule says (a peak-1 interferometric PSF with lambda = 0.01 has kappa ~ 1e8: docs/deconv.md).
  double condition = 0;
};

/// Runs a solver. `dirty` and `psf`: 2-D, the same shape, any real dtype, host or device; the
/// result is on the host. The dirty image is scaled to max 1 by a power of two for the solvers
/// and the result scaled back (exact: any units work, docs/deconv.md); the PSF is used as given.
/// Throws InvalidInput (different shapes, empty, non-finite values, a PSF
/// whose spectrum is zero, lambda < 0 or lambda = 0 with a singular operator, a precision or
/// solver the device does not support: the message says which are), NumericalError for an FP16
/// overflow (naming the operation and the iteration), Unsupported for a GPU request without CUDA.
DeconvResult deconvolve(const Array& dirty, const Array& psf, const DeconvOptions& options = {});

/// The exact Tikhonov minimiser f* in float64 on the host (Solver::Wiener).
Array tikhonov_exact(const Array& dirty, const Array& psf, double lambda, Boundary boundary,
                     DeviceKind device = DeviceKind::Auto);

/// J(f) = ||g - H f||^2 + lambda ||f||^2 in FP64 on the CPU (for tests and tools).
double tikhonov_criterion(const Array& dirty, const Array& psf, const Array& image, double lambda,
                          Boundary boundary);

/// The forward model H f in FP64 on the CPU (what `simulate observation` applies; tests).
Array apply_psf(const Array& image, const Array& psf, Boundary boundary);

/// The precisions `deconvolve` accepts: double, single, half, mixed, split.
std::vector<Precision> deconv_precisions();

}  // namespace halfscope::deconv
