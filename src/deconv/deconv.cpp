// Deconvolution dispatch: names, validation (every bad input named with what was expected and
// found), device resolution, the exact solution, the solver run and its timing (deconv.hpp).
#include "halfscope/deconv.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/name_table.hpp"
#include "deconv/backend_cpu.hpp"
#include "deconv/exact.hpp"
#include "deconv/solvers.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv {

namespace {

using halfscope::detail::name_of;
using halfscope::detail::parse_name;

constexpr halfscope::detail::NameTable<Solver, 6> kSolvers{
    {{"fixed", Solver::Fixed},
     {"optimal", Solver::Optimal},
     {"backtracking", Solver::Backtracking},
     {"half-then-float", Solver::HalfThenFloat},
     {"cg", Solver::CG},
     {"wiener", Solver::Wiener}}};
constexpr halfscope::detail::NameTable<StopReason, 4> kStops{
    {{"iterations", StopReason::Iterations},
     {"target", StopReason::TargetReached},
     {"stalled", StopReason::Stalled},
     {"converged", StopReason::Converged}}};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Host float64 copy of a 2-D array; InvalidInput naming `what` and the first non-finite pixel.
Array host_f64(const Array& a, const char* what, const char* who) {
  if (!dtype_is_float(a.dtype()) && !dtype_is_signed_int(a.dtype()) && a.dtype() != DType::u8 &&
      a.dtype() != DType::u16 && a.dtype() != DType::u32 && a.dtype() != DType::u64)
    throw InvalidInput(std::string(who) + ": the " + what + " must be real, got " + a.describe());
  Array h = a.to(Memory::host).astype(DType::f64).contiguous();
  const double* p = h.data_as<double>();
  const std::int64_t cols = h.shape()[1];
  for (std::int64_t i = 0; i < h.size(); ++i)
    if (!std::isfinite(p[i]))
      throw InvalidInput(std::string(who) + ": the " + what + " has a non-finite value (" +
                         fmt(p[i]) + ") at row " + std::to_string(i / cols) + ", column " +
                         std::to_string(i % cols) + "; expected finite values everywhere");
  return h;
}

/// The validated problem (shapes, values, lambda), converted to float64 on the host.
detail::Problem make_problem(const Array& dirty, const Array& psf, double lambda, Boundary boundary,
                             const char* who) {
  if (dirty.ndim() != 2 || psf.ndim() != 2)
    throw InvalidInput(std::string(who) + ": the dirty image and the PSF must be 2-D, got " +
                       dirty.describe() + " and " + psf.describe());
  if (dirty.size() == 0 || psf.size() == 0)
    throw InvalidInput(std::string(who) + ": empty input: dirty image " + dirty.describe() +
                       ", PSF " + psf.describe());
  if (dirty.shape() != psf.shape())
    throw InvalidInput(std::string(who) +
                       ": the PSF must have the dirty image's shape, got dirty " +
                       shape_to_string(dirty.shape()) + " and PSF " + shape_to_string(psf.shape()));
  if (!std::isfinite(lambda) || lambda < 0)
    throw InvalidInput(std::string(who) + ": lambda must be finite and >= 0, got " + fmt(lambda));
  detail::Problem p{host_f64(dirty, "dirty image", who), host_f64(psf, "PSF", who), lambda,
                    boundary};
  const double* h = p.psf.data_as<double>();
  if (std::all_of(h, h + p.psf.size(), [](double v) { return v == 0; }))
    throw InvalidInput(
        std::string(who) +
        ": the PSF is zero everywhere (its spectrum is zero): nothing to deconvolve");
  return p;
}

/// Replaces g by g 2^-e with max |g 2^-e| in [0.5, 1) and returns e (0 for a zero image). Exact
/// (a power of two; a new array: p.dirty may share the caller's memory). Tikhonov's minimiser is
/// linear in g, so the solvers then return f* 2^-e and see criteria J 2^-2e: FP16 and FP32
/// storage work on the data's scale whatever the caller's units (a dirty image of 1e-6 Jy came
/// back all zero from half and mixed, 1e20 overflowed FP16).
int normalize_dirty(detail::Problem& p) {
  const double* g = p.dirty.data_as<double>();
  const std::int64_t n = p.dirty.size();
  double m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(g[i]));
  if (m == 0) return 0;
  int e = 0;
  (void)std::frexp(m, &e);  // m = fr 2^e, fr in [0.5, 1)
  if (e == 0) return 0;
  Array scaled(DType::f64, p.dirty.shape());
  double* out = scaled.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::ldexp(g[i], -e);
  p.dirty = std::move(scaled);
  return e;
}

/// Brings a result of the normalized problem back to the caller's units, in place: the image is
/// the solver's own (or the exact solution's, read by nothing after this).
void restore_units(DeconvResult& r, int e) {
  if (e == 0) return;
  if (!r.image.empty()) {
    r.image = r.image.contiguous();
    double* f = r.image.data_as<double>();
    for (std::int64_t i = 0; i < r.image.size(); ++i) f[i] = std::ldexp(f[i], e);
  }
  for (TraceRow& row : r.trace) {
    row.criterion = std::ldexp(row.criterion, 2 * e);
    row.criterion_solver = std::ldexp(row.criterion_solver, 2 * e);
  }
}

/// Throws for lambda = 0 with a numerically singular H^T H (a zero of the PSF spectrum).
void check_singular(const detail::Problem& p, double max_h, double min_h, const char* who) {
  // The cropped (zero-boundary) operator has H^T H singular whatever the spectrum on its padded
  // grid says (the pixels it never sees), so lambda must regularise it.
  if (p.lambda == 0 && p.boundary == Boundary::Zero)
    throw InvalidInput(std::string(who) +
                       ": lambda = 0 with the zero boundary leaves H^T H singular; use lambda > 0");
  // |h^|^2 below 2^-52 max|h^|^2: the FP64 spectrum of an exactly zero frequency.
  if (p.lambda == 0 && min_h * min_h <= 0x1p-52 * max_h * max_h)
    throw InvalidInput(std::string(who) + ": lambda = 0 needs a PSF spectrum without zeros, but " +
                       "min |h^| = " + fmt(min_h) + " against max |h^| = " + fmt(max_h) +
                       ": H^T H is singular; use lambda > 0");
}

void check_options(const DeconvOptions& o, double lipschitz) {
  auto bad = [](const std::string& m) { throw InvalidInput("deconvolve: " + m); };
  const auto& ps = deconv_precisions();
  if (std::find(ps.begin(), ps.end(), o.precision) == ps.end())
    bad("precision " + std::string(precision_name(o.precision)) + " is not supported; expected " +
        precision_list(ps));
  if (o.solver == Solver::HalfThenFloat && o.precision != Precision::Half &&
      o.precision != Precision::Single)
    bad("half-then-float runs half, then single: precision must be half or single, got " +
        std::string(precision_name(o.precision)));
  if (o.iterations < 0) bad("iterations must be >= 0, got " + std::to_string(o.iterations));
  if (o.backtrack_retries < 0)
    bad("backtrack_retries must be >= 0, got " + std::to_string(o.backtrack_retries));
  if (o.half_iterations < 0)
    bad("half_iterations must be >= 0, got " + std::to_string(o.half_iterations));
  if (o.trace_every < 0) bad("trace_every must be >= 0, got " + std::to_string(o.trace_every));
  if (!std::isfinite(o.target_distance) || o.target_distance < 0)
    bad("target_distance must be finite and >= 0, got " + fmt(o.target_distance));
  if (!std::isfinite(o.step) || o.step < 0 || o.step >= 2 / lipschitz)
    bad("step must be in [0, 2/L) = [0, " + fmt(2 / lipschitz) +
        ") (L = 2 (max|h^|^2 + lambda) = " + fmt(lipschitz) + "), got " + fmt(o.step));
}

}  // namespace

std::string_view solver_name(Solver s) noexcept {
  return name_of(s, kSolvers);
}
Solver parse_solver(std::string_view text) {
  return parse_name(text, kSolvers, "solver");
}
std::string_view stop_reason_name(StopReason r) noexcept {
  return name_of(r, kStops);
}

std::vector<Precision> deconv_precisions() {
  return {Precision::Double, Precision::Single, Precision::Half, Precision::Mixed,
          Precision::Split};
}

namespace {

detail::BackendFactory factory_for(const detail::Problem& p, DeviceKind device) {
  return [&p, device](Precision pr) -> std::unique_ptr<detail::Backend> {
#if HALFSCOPE_WITH_CUDA
    if (device == DeviceKind::Cuda) return detail::make_cuda_backend(p, pr);
#endif
    (void)device;
    return detail::make_cpu_backend(p, pr);
  };
}

std::unique_ptr<detail::Evaluator> evaluator_for(const detail::Problem& p, const Array& exact,
                                                 DeviceKind device) {
#if HALFSCOPE_WITH_CUDA
  if (device == DeviceKind::Cuda) return detail::make_cuda_evaluator(p, exact);
#endif
  (void)device;
  return detail::make_cpu_evaluator(p, exact);
}

/// Sets result.condition and appends the ill-conditioning warning of deconv.hpp: a run can stop
/// "converged" on a residual at rounding level while its forward error is up to kappa u.
void warn_condition(DeconvResult& result, const DeconvOptions& o, double max_h, double min_h,
                    double lambda) {
  // Circular: Q's eigenvalues are |h^|^2 + lambda. Zero boundary: the cropped H^T H is not
  // bounded below by min |h^|^2 on the padded grid, only by 0, so lambda is the floor.
  const double floor = o.boundary == Boundary::Zero ? lambda : min_h * min_h + lambda;
  result.condition = (max_h * max_h + lambda) / floor;
  const bool fp32 = o.solver == Solver::HalfThenFloat || o.precision == Precision::Split;
  const Precision working = o.solver == Solver::Wiener ? Precision::Double
                            : fp32                     ? Precision::Single
                                                       : o.precision;
  const double u = storage_unit_roundoff(working);
  if (result.condition * u <= 0.01) return;
  result.stop_detail +=
      "; warning: kappa(Q) = " + fmt(result.condition) + " with " +
      std::string(precision_name(working)) + " rounding (u = " + fmt(u) +
      "): relative errors up to kappa u = " + fmt(result.condition * u) +
      " are possible whatever the stop reason (normalise the PSF or raise lambda)";
}

}  // namespace

DeconvResult deconvolve(const Array& dirty, const Array& psf, const DeconvOptions& options) {
  detail::Problem p = make_problem(dirty, psf, options.lambda, options.boundary, "deconvolve");
  const int dirty_exponent = normalize_dirty(p);
  // Half runs on power-of-two grids, whose spectrum samples differ from FFTW's grid's: L (and
  // so the step bound) comes from the grid the operator really uses.
  const bool pow2 = options.precision == Precision::Half || options.solver == Solver::HalfThenFloat;
  const auto [max_h, min_h] = detail::spectrum_range(p, pow2);
  check_singular(p, max_h, min_h, "deconvolve");
  const double L = 2 * (max_h * max_h + p.lambda);
  check_options(options, L);
  const DeviceKind device = resolve_device(options.device);
  const detail::BackendFactory make = factory_for(p, device);

  DeconvResult result;
  result.device = device;
  result.lipschitz = L;
  const double step = options.step > 0 ? options.step : 1 / L;
  const bool fixed_step = options.solver == Solver::Fixed ||
                          options.solver == Solver::Backtracking ||
                          options.solver == Solver::HalfThenFloat;
  result.step = fixed_step ? step : std::numeric_limits<double>::quiet_NaN();

  Array exact;
  const bool wiener = options.solver == Solver::Wiener;
  // f* only where something reads it: a distance in the trace, a target, or Wiener itself.
  if (wiener || options.target_distance > 0 ||
      (options.trace_distance && options.trace_every > 0)) {
    const auto t0 = std::chrono::steady_clock::now();
    exact = detail::exact_solution(p, device, make);
    result.exact_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const bool evaluate = options.trace_every > 0 || options.target_distance > 0;
  const Array reference = options.trace_distance || options.target_distance > 0 ? exact : Array();
  std::unique_ptr<detail::Evaluator> evaluator =
      evaluate ? evaluator_for(p, reference, device) : nullptr;

  if (wiener) {
    result.image = exact;
    result.stop = StopReason::Converged;
    result.stop_detail = "exact solution (" + std::string(boundary_name(p.boundary)) +
                         (p.boundary == Boundary::Circular ? ": Wiener filter)" : ": FP64 CG)");
    result.solver_ms = result.exact_ms;
    warn_condition(result, options, max_h, min_h, p.lambda);
    if (evaluator && options.trace_every > 0) {
      const detail::Evaluation e = evaluator->evaluate(exact);
      result.trace.push_back({0, "double", e.criterion, std::numeric_limits<double>::quiet_NaN(),
                              std::numeric_limits<double>::quiet_NaN(), result.exact_ms,
                              e.distance});
    }
    restore_units(result, dirty_exponent);
    return result;
  }

  detail::Tracer tracer(options, evaluator.get());
  const detail::SolverSetup setup{options, L, step, make};
  detail::SolverOutcome out = detail::run_solver(setup, tracer);
  result.image = std::move(out.image);
  result.trace = std::move(tracer.rows());
  result.stop = out.stop;
  result.stop_detail = std::move(out.detail);
  result.iterations = out.iterations;
  result.solver_ms = tracer.elapsed_ms();
  warn_condition(result, options, max_h, min_h, p.lambda);
  restore_units(result, dirty_exponent);
  return result;
}

Array tikhonov_exact(const Array& dirty, const Array& psf, double lambda, Boundary boundary,
                     DeviceKind device) {
  const detail::Problem p = make_problem(dirty, psf, lambda, boundary, "tikhonov_exact");
  const auto [max_h, min_h] = detail::spectrum_range(p, false);
  check_singular(p, max_h, min_h, "tikhonov_exact");
  const DeviceKind d = resolve_device(device);
  return detail::exact_solution(p, d, factory_for(p, d));
}

double tikhonov_criterion(const Array& dirty, const Array& psf, const Array& image, double lambda,
                          Boundary boundary) {
  const detail::Problem p = make_problem(dirty, psf, lambda, boundary, "tikhonov_criterion");
  if (image.ndim() != 2 || image.shape() != p.dirty.shape())
    throw InvalidInput("tikhonov_criterion: the image must have the dirty image's shape " +
                       shape_to_string(p.dirty.shape()) + ", got " + image.describe());
  return detail::criterion_fp64(p, image);
}

}  // namespace halfscope::deconv
