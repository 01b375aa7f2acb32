// halfscope._core.deconvolve and tikhonov_exact: the deconvolution solvers of study 000 behind
// hs.deconvolve (python/halfscope/deconv.py builds the result object).
#include <nanobind/stl/string.h>

#include <cmath>

#include "arrays.hpp"
#include "bindings.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::python {

namespace {

// The trace as columns, ready for NumPy (python/halfscope/deconv.py makes them arrays).
nb::dict trace_columns(const std::vector<deconv::TraceRow>& trace) {
  nb::list iteration, phase, criterion, criterion_solver, step, elapsed_ms, distance;
  for (const auto& r : trace) {
    iteration.append(r.iteration);
    phase.append(r.phase);
    criterion.append(r.criterion);
    criterion_solver.append(r.criterion_solver);
    step.append(r.step);
    elapsed_ms.append(r.elapsed_ms);
    distance.append(r.distance);
  }
  nb::dict d;
  d["iteration"] = iteration;
  d["phase"] = phase;
  d["criterion"] = criterion;
  d["criterion_solver"] = criterion_solver;
  d["step"] = step;
  d["elapsed_ms"] = elapsed_ms;
  d["distance"] = distance;
  return d;
}

nb::dict run(const AnyArray& dirty, const AnyArray& psf, const std::string& solver,
             const std::string& precision, double lambda, std::int64_t iterations,
             const std::string& boundary, const std::string& device, double step,
             int backtrack_retries, std::int64_t half_iterations, double target_distance,
             std::int64_t trace_every, bool trace_distance, std::uintptr_t stream) {
  deconv::DeconvOptions o;
  o.solver = deconv::parse_solver(solver);
  o.precision = parse_precision(precision);
  o.lambda = lambda;
  o.iterations = iterations;
  o.boundary = parse_boundary(boundary);
  o.device = parse_device_kind(device);
  o.step = step;
  o.backtrack_retries = backtrack_retries;
  o.half_iterations = half_iterations;
  o.target_distance = target_distance;
  o.trace_every = trace_every;
  o.trace_distance = trace_distance;
  const Array g = view_of(dirty, "dirty");
  const Array h = view_of(psf, "psf");
  const deconv::DeconvResult r =
      released(stream, g.on_device() || h.on_device(), [&] { return deconv::deconvolve(g, h, o); });
  nb::dict d;
  d["image"] = to_python(r.image, Framework::numpy);
  d["trace"] = trace_columns(r.trace);
  d["stop"] = std::string(deconv::stop_reason_name(r.stop));
  d["stop_detail"] = r.stop_detail;
  d["iterations"] = r.iterations;
  d["solver_ms"] = r.solver_ms;
  d["exact_ms"] = r.exact_ms;
  d["device"] = r.device == DeviceKind::Cuda ? "cuda" : "cpu";
  d["lipschitz"] = r.lipschitz;
  d["step"] = r.step;
  d["condition"] = r.condition;
  return d;
}

nb::object exact(const AnyArray& dirty, const AnyArray& psf, double lambda,
                 const std::string& boundary, const std::string& device, std::uintptr_t stream) {
  const Array g = view_of(dirty, "dirty");
  const Array h = view_of(psf, "psf");
  const Boundary b = parse_boundary(boundary);
  const DeviceKind d = parse_device_kind(device);
  const Array f = released(stream, g.on_device() || h.on_device(),
                           [&] { return deconv::tikhonov_exact(g, h, lambda, b, d); });
  return to_python(f, Framework::numpy);
}

}  // namespace

void bind_deconv(nb::module_& m) {
  m.def("deconvolve", &run, nb::arg("dirty"), nb::arg("psf"), nb::arg("solver"),
        nb::arg("precision"), nb::arg("lam"), nb::arg("iterations"), nb::arg("boundary"),
        nb::arg("device"), nb::arg("step"), nb::arg("backtrack_retries"),
        nb::arg("half_iterations"), nb::arg("target_distance"), nb::arg("trace_every"),
        nb::arg("trace_distance"), nb::arg("stream"),
        "halfscope::deconv::deconvolve; see halfscope.deconvolve.");
  m.def("tikhonov_exact", &exact, nb::arg("dirty"), nb::arg("psf"), nb::arg("lam"),
        nb::arg("boundary"), nb::arg("device"), nb::arg("stream"),
        "The exact Tikhonov minimiser in float64 (host).");
  m.def(
      "tikhonov_criterion",
      [](const AnyArray& dirty, const AnyArray& psf, const AnyArray& image, double lambda,
         const std::string& boundary) {
        const Array g = view_of(dirty, "dirty"), h = view_of(psf, "psf"),
                    f = view_of(image, "image");
        const Boundary b = parse_boundary(boundary);
        nb::gil_scoped_release unlocked;
        return deconv::tikhonov_criterion(g, h, f, lambda, b);
      },
      nb::arg("dirty"), nb::arg("psf"), nb::arg("image"), nb::arg("lam"), nb::arg("boundary"),
      "J(f) = ||g - H f||^2 + lambda ||f||^2 in FP64 on the CPU.");
  m.def(
      "apply_psf",
      [](const AnyArray& image, const AnyArray& psf, const std::string& boundary) {
        const Array f = view_of(image, "image"), h = view_of(psf, "psf");
        const Boundary b = parse_boundary(boundary);
        Array out;
        {
          nb::gil_scoped_release unlocked;
          out = deconv::apply_psf(f, h, b);
        }
        return to_python(out, Framework::numpy);
      },
      nb::arg("image"), nb::arg("psf"), nb::arg("boundary"), "The forward model H f in FP64.");
}

}  // namespace halfscope::python
