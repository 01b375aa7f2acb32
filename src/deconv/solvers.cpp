// The one-backend solvers (fixed, optimal, backtracking, CG), half-then-float, and the dispatch
// of run_solver (split lives in solvers_split.cpp). Conventions in solvers.hpp.
#include "deconv/solvers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "deconv/normal_scale.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

Array image_of(Backend& b, Vec v) {
  return b.view(v).to(Memory::host).astype(DType::f64);
}

double scaled_normal(Backend& b, Vec x, Vec tmp, Vec out, double norm_q) {
  if (storage_dtype(b.precision()) != DType::f16) {
    b.normal(x, out);
    return 1.0;
  }
  const double m = b.max_abs(x);
  if (m == 0) {
    b.normal(x, out);
    return 1.0;
  }
  const double e = normal_scale(m, normal_scale_bias(norm_q));
  b.axpby(1.0 / e, x, 0.0, tmp);
  b.normal(tmp, out);
  return e;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// A scalar of the iteration that is NaN or infinite: the operator or a reduction overflowed the
// backend's arithmetic (a PSF of 1e20 in single: deconvolve scales the dirty image itself, not
// the PSF), which no step length can recover from, so the run ends with an error rather than as
// a "stall" with a blank image.
[[noreturn]] void overflowed(const Backend& b, const std::string& what, std::int64_t iteration) {
  throw NumericalError(what + " is not finite at iteration " + std::to_string(iteration) +
                       ": the " + std::string(precision_name(b.precision())) +
                       " arithmetic overflowed (normalize the PSF to peak 1, scaling lambda by the "
                       "same factor squared, or use a wider precision)");
}

/// One phase on one backend: f (the iterate, already set) and b = H^T g.
struct Phase {
  Backend& b;
  Tracer& tracer;
  const SolverSetup& setup;
  std::string name;
  std::int64_t& it;    // operator iterations done, over every phase
  std::int64_t limit;  // the phase ends when `it` reaches this
  Vec f, rhs;
  bool record_start;  // record the row of the starting image

  bool record(double criterion, double step) {
    // The evaluator takes the backend's own storage (device memory on the GPU): traced iterates
    // are neither copied to the host nor converted there.
    return tracer.record(it, name, criterion, step, [&] { return b.view(f); });
  }
  /// k = Q f - b.
  void gradient(Vec k) {
    b.normal(f, k);
    b.axpby(-1.0, rhs, 1.0, k);
  }
  double scaled_normal(Vec x, Vec tmp, Vec out) {
    return detail::scaled_normal(b, x, tmp, out, setup.lipschitz / 2);
  }
};

struct Ending {
  StopReason stop = StopReason::Iterations;
  std::string detail;
};

Ending target(const Phase& p) {
  return {StopReason::TargetReached,
          "target distance reached at iteration " + std::to_string(p.it)};
}

Ending fixed(Phase& p) {
  if (p.record_start && p.record(kNaN, kNaN)) return target(p);
  const Vec k = p.b.create(), prev = p.b.create();
  const double alpha = p.setup.step;
  p.b.copy(p.f, prev);
  std::int64_t since = 0;
  while (p.it < p.limit) {
    p.gradient(k);
    p.b.axpby(-2.0 * alpha, k, 1.0, p.f);
    ++p.it;
    if (p.record(kNaN, alpha)) return target(p);
    // In FP16 the steps can fall below half an ulp of f: f stops moving and the run would spin
    // to its limit. Compared every kResidualRefresh iterations (an exact difference: zero only
    // for equal values), such a run ends as a stall.
    if (++since == kResidualRefresh) {
      since = 0;
      p.b.axpby(-1.0, p.f, 1.0, prev);
      if (p.b.max_abs(prev) == 0)
        return {StopReason::Stalled, "fixed: the image has not changed in " +
                                         std::to_string(kResidualRefresh) +
                                         " iterations (steps below the precision's resolution) "
                                         "at iteration " +
                                         std::to_string(p.it)};
      p.b.copy(p.f, prev);
    }
  }
  return {};
}

Ending optimal(Phase& p) {
  if (p.record_start && p.record(kNaN, kNaN)) return target(p);
  const Vec k = p.b.create(), q = p.b.create(), tmp = p.b.create();
  p.gradient(k);
  std::int64_t since = 0;
  while (p.it < p.limit) {
    if (since == kResidualRefresh) {  // the recursive k drifts from Q f - b in low precision
      p.gradient(k);
      since = 0;
    }
    const double e = p.scaled_normal(k, tmp, q);  // q = Q k / e
    const double kk = p.b.dot(k, k), kq = e * p.b.dot(k, q);
    if (!std::isfinite(kk) || !std::isfinite(kq)) overflowed(p.b, "optimal: k.Qk", p.it + 1);
    if (kk == 0)
      return {StopReason::Converged, "optimal: zero gradient at iteration " + std::to_string(p.it)};
    if (!(kq > 0))
      return {StopReason::Stalled, "optimal: k.Qk = " + fmt(kq) + " is not positive at iteration " +
                                       std::to_string(p.it + 1) + " (the precision is exhausted)"};
    const double move = kk / kq;
    p.b.axpby(-move, k, 1.0, p.f);
    p.b.axpby(-move * e, q, 1.0, k);
    ++p.it;
    ++since;
    if (p.record(kNaN, move / 2)) return target(p);
  }
  return {};
}

Ending backtracking(Phase& p) {
  const Vec k = p.b.create();
  Vec trial = p.b.create();
  double J = p.b.criterion(p.f);
  if (!std::isfinite(J)) overflowed(p.b, "backtracking: the criterion J", p.it);
  if (p.record_start && p.record(J, kNaN)) return target(p);
  p.gradient(k);
  const double first = p.setup.step;
  const int retries = p.setup.options.backtrack_retries;
  double last = first;
  while (p.it < p.limit) {
    double alpha = std::min(2 * last, first);
    bool accepted = false;
    double Jt = 0;
    for (int halvings = 0;; ++halvings) {
      p.b.copy(p.f, trial);
      p.b.axpby(-2.0 * alpha, k, 1.0, trial);
      try {
        Jt = p.b.criterion(trial);
      } catch (const NumericalError&) {
        // A trial step that overflows FP16 is a step too long, not the end of the run: the
        // study's rule halves it (the backend has dropped the pending overflow when throwing).
        Jt = std::numeric_limits<double>::infinity();
      }
      if (Jt < J) {  // strict: an equal or larger J (or NaN) is never accepted
        accepted = true;
        break;
      }
      if (halvings == retries) break;
      alpha /= 2;
    }
    if (!accepted)
      return {StopReason::Stalled, "backtracking: no decrease after " + std::to_string(retries) +
                                       " halvings at iteration " + std::to_string(p.it + 1)};
    std::swap(p.f, trial);
    J = Jt;
    last = alpha;
    p.gradient(k);
    ++p.it;
    if (p.record(J, alpha)) return target(p);
  }
  return {};
}

Ending cg(Phase& p) {
  if (p.record_start && p.record(kNaN, kNaN)) return target(p);
  Backend& b = p.b;
  const Vec r = b.create(), d = b.create(), q = b.create(), tmp = b.create();
  auto true_residual = [&] {  // r = b - Q f
    b.normal(p.f, q);
    b.copy(p.rhs, r);
    b.axpby(-1.0, q, 1.0, r);
  };
  true_residual();
  b.copy(r, d);
  double rr = b.dot(r, r);
  // The residual an iterate can reach in this arithmetic: ||b - Q f|| ~ u (||b|| + ||Q|| ||f||),
  // ||Q|| <= L / 2. Below 4 times that (on the explicitly recomputed residual) nothing is left;
  // CG run on past it diverges (FP32 went from 5e-6 back to 1.6 of ||f*||). With FP16 storage
  // (half, mixed) this bound is too loose to be a stopping rule (it stopped mixed at 4e-2 of
  // ||f*|| where 9e-3 was within reach): those runs stop on divergence instead (below).
  const bool fp16 = storage_dtype(b.precision()) == DType::f16;
  const double u = compute_unit_roundoff(b.precision());
  const double norm_b = std::sqrt(b.dot(p.rhs, p.rhs)), norm_q = p.setup.lipschitz / 2;
  double norm_f = 0;  // refreshed with every true residual
  auto at_floor = [&](double r2) {
    const double floor = 4 * u * (norm_b + norm_q * norm_f);
    return !fp16 && r2 <= floor * floor;
  };
  // FP16-stored residuals drift within tens of iterations: refresh them more often.
  const std::int64_t refresh = fp16 ? kResidualRefreshFp16 : kResidualRefresh;
  const Vec best = b.create();  // the iterate with the smallest true residual so far
  b.copy(p.f, best);
  double best_rr = rr;
  std::int64_t best_it = p.it, since = 0;
  if (!std::isfinite(rr)) overflowed(b, "cg: the residual r.r", p.it);
  if (rr == 0) return {StopReason::Converged, "cg: zero residual at the start"};
  while (p.it < p.limit) {
    const double e = p.scaled_normal(d, tmp, q);  // q = Q d / e
    const double dq = e * b.dot(d, q);
    if (!std::isfinite(dq)) overflowed(b, "cg: p.Qp", p.it + 1);
    if (!(dq > 0))
      return {StopReason::Stalled, "cg: p.Qp = " + fmt(dq) + " is not positive at iteration " +
                                       std::to_string(p.it + 1) + " (the precision is exhausted)"};
    const double alpha = rr / dq;
    b.axpby(alpha, d, 1.0, p.f);
    ++p.it;
    double rn = 0, beta = 0;
    bool check = ++since == refresh;
    if (!check) {
      b.axpby(-alpha * e, q, 1.0, r);
      rn = b.dot(r, r);
      check = at_floor(rn);
    }
    if (check) {  // replace the recursive residual by the true one
      true_residual();
      rn = b.dot(r, r);
      norm_f = std::sqrt(b.dot(p.f, p.f));
      since = 0;
      // CG's residual norm need not fall monotonically, but a fourfold growth of its square
      // since the best iterate is divergence: rounding has broken the recursion.
      if (rn > 4 * best_rr) {
        b.copy(best, p.f);
        return {StopReason::Stalled,
                "cg: the true residual grew from " + fmt(std::sqrt(best_rr) / norm_b) + " to " +
                    fmt(std::sqrt(rn) / norm_b) + " of ||H^T g|| by iteration " +
                    std::to_string(p.it) +
                    " (the precision is exhausted); the image is the iterate of iteration " +
                    std::to_string(best_it)};
      }
      if (rn < best_rr) {
        best_rr = rn;
        best_it = p.it;
        b.copy(p.f, best);
      }
      if (rn == 0 || at_floor(rn))
        return {StopReason::Converged, "cg: residual at the rounding level of " +
                                           std::string(precision_name(b.precision())) +
                                           " at iteration " + std::to_string(p.it)};
      // A true residual larger than the recursive one it replaces: the recursion had drifted
      // and beta = rn / rr would blow the direction up, so CG restarts from it.
      beta = rn > rr ? 0.0 : rn / rr;
    } else {
      beta = rn / rr;
    }
    b.axpby(1.0, r, beta, d);
    rr = rn;
    if (p.record(kNaN, alpha)) return target(p);
  }
  return {};
}

Ending run_phase(Solver s, Phase& p) {
  switch (s) {
    case Solver::Fixed:
      return fixed(p);
    case Solver::Optimal:
      return optimal(p);
    case Solver::Backtracking:
      return backtracking(p);
    case Solver::CG:
      return cg(p);
    default:
      throw InvalidInput("deconvolve: solver " + std::string(solver_name(s)) +
                         " has no iterative phase");
  }
}

SolverOutcome run_single(const SolverSetup& setup, Tracer& tracer, std::int64_t& it) {
  const DeconvOptions& o = setup.options;
  const bool htf = o.solver == Solver::HalfThenFloat;
  auto first = setup.make_backend(htf ? Precision::Half : o.precision);
  tracer.watch(first.get());
  Phase p{*first, tracer,       setup,           std::string(precision_name(first->precision())),
          it,     o.iterations, first->create(), first->create(),
          true};
  first->rhs(p.rhs);
  if (!htf) {
    const Ending e = run_phase(o.solver, p);
    if (!tracer.recorded(it))
      p.tracer.record(
          it, p.name, kNaN, kNaN, [&] { return p.b.view(p.f); }, true);
    tracer.stop();
    return {image_of(*first, p.f), e.stop, e.detail, it};
  }
  // Half then float: backtracking in half until it stalls or its share of iterations passes,
  // then the optimal step in single from the half result.
  p.limit = o.half_iterations > 0 ? std::min(o.half_iterations, o.iterations) : o.iterations / 2;
  const Ending e1 = backtracking(p);
  if (e1.stop == StopReason::TargetReached) {
    tracer.stop();
    return {image_of(*first, p.f), e1.stop, e1.detail, it};
  }
  auto second = setup.make_backend(Precision::Single);
  tracer.watch(second.get());
  Phase s{*second,          tracer,           setup, "single", it, o.iterations,
          second->create(), second->create(), false};
  second->rhs(s.rhs);
  second->assign(first->view(p.f), 1.0, 0.0, s.f);
  Ending e2 = optimal(s);
  if (!tracer.recorded(it))
    tracer.record(
        it, s.name, kNaN, kNaN, [&] { return s.b.view(s.f); }, true);
  if (e1.stop == StopReason::Stalled)
    e2.detail = "half phase: " + e1.detail + (e2.detail.empty() ? "" : "; ") + e2.detail;
  tracer.stop();
  return {image_of(*second, s.f), e2.stop, e2.detail, it};
}

}  // namespace

SolverOutcome run_solver(const SolverSetup& setup, Tracer& tracer) {
  std::int64_t it = 0;
  try {
    const bool split = setup.options.precision == Precision::Split &&
                       setup.options.solver != Solver::HalfThenFloat;  // fixed precisions
    SolverOutcome out = split ? run_split(setup, tracer, it) : run_single(setup, tracer, it);
    // Backends report non-finite results of the operations they check; this catches any other
    // path (fixed steps compute no scalar), so a NaN image is never returned as a result.
    const double* v = out.image.data_as<double>();
    for (std::int64_t k = 0; k < out.image.size(); ++k)
      if (!std::isfinite(v[k]))
        throw NumericalError("the final image holds a non-finite value at pixel " +
                             std::to_string(k) + " (" + std::to_string(v[k]) + ")");
    return out;
  } catch (const NumericalError& e) {
    throw NumericalError(std::string(e.what()) + " (" +
                         std::string(solver_name(setup.options.solver)) + ", iteration " +
                         std::to_string(it + 1) + ")");
  }
}

}  // namespace halfscope::deconv::detail
