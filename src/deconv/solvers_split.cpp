// Precision `split`: the solution f and the residual r = b - Q f live in FP32 (a single backend);
// the solver iterates on the correction d of Q d = r / s in a mixed backend (FP16 storage, FP32
// arithmetic), s a power of two with max|r / s| in (1/2, 1], so the correction problem sits in
// FP16's best range whatever the image's units. Reliable updates (Clark et al. 2010, QUDA's
// "reliable updates"): whenever the mixed residual has dropped by 2^-2 since the last update, or
// after 50 iterations (kDrop, kUpdateEvery), f += s d in FP32, r is recomputed from f in FP32
// with the single backend, s is chosen again and d restarts from zero. CG keeps its direction
// across the update, rescaled by s_old / s_new (a power of two: exact) and its beta taken
// against the old residual norm in the new units; the gradient methods restart their gradient
// from the new residual. So the FP16 error of the corrections never accumulates in f: the result
// reaches FP32 accuracy while most operator applications read and write FP16. The trace's
// iterate is f + s d (FP32).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "deconv/solvers.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A reliable update once the mixed residual's norm has dropped by 2^-2 (squared norms are
// compared) or after 50 iterations. The brief's 2^-6 / 100 was measured first: on an
// ill-conditioned problem (64 x 64 beam, lambda = 0.01, kappa ~ 2700) the FP16 correction cannot
// gain 2^-6 before its own rounding dominates, so every update waited for iteration 100 and CG
// slowed to steepest descent (1.2e-3 of f* after 400 iterations, single CG: 9e-5 after 238);
// with 2^-2 / 50, 4.4e-4 after 200 iterations, as single (3.8e-4). QUDA's default delta is 0.1.
constexpr double kDrop = 1.0 / 16;
constexpr std::int64_t kUpdateEvery = 50;
// Once a reliable update finds the FP32 residual at its rounding level, one more correction
// cycle of at most this many iterations runs, then the run ends (see run_split).
constexpr std::int64_t kFloorCycle = 10;

/// The power of two 2^ceil(log2 m) (m > 0 finite).
double pow2_above(double m) {
  int e = 0;
  const double f = std::frexp(m, &e);
  return std::ldexp(1.0, f == 0.5 ? e - 1 : e);
}

}  // namespace

SolverOutcome run_split(const SolverSetup& setup, Tracer& tracer, std::int64_t& it) {
  const DeconvOptions& o = setup.options;
  auto single = setup.make_backend(Precision::Single);
  auto mixed = setup.make_backend(Precision::Mixed);
  Backend& S = *single;
  Backend& M = *mixed;
  tracer.watch(&S);
  tracer.watch(&M);
  const Vec f = S.create(), b = S.create(), r = S.create(), t = S.create();
  const Vec d = M.create(), rho = M.create(), k = M.create(), q = M.create(), trial = M.create();
  const Vec scratch = M.create();
  const double norm_q = setup.lipschitz / 2;
  S.rhs(b);
  double s = 1;
  auto iterate = [&] {
    S.copy(f, t);
    S.assign(M.view(d), s, 1.0, t);
    return S.view(t);  // the evaluator reads the backend's storage where it lives
  };
  auto record = [&](double step) { return tracer.record(it, "split", kNaN, step, iterate); };
  // Where FP32 stops: ||b - Q f|| ~ u32 (||b|| + ||Q|| ||f||), ||Q|| <= L / 2 (measured: the
  // true residual settles at 1.0 +- 0.1 times that). The correction cycle that starts there may
  // still improve f (the FP32 residual is noise, the FP16-stored correction is not yet), but it
  // soon only adds noise (a run on drifted from 2.5e-6 to 1.3e-5 of f*; another, whose next
  // update came 50 iterations later, from 2.9e-6 to 1.1e-4 and never stopped): so the first
  // update at the floor keeps a copy of f, one cycle of at most kFloorCycle iterations follows,
  // and the next update ends the run with whichever f has the smaller FP32 residual.
  const double u32 = compute_unit_roundoff(Precision::Single);
  const double norm_b = std::sqrt(S.dot(b, b));
  const Vec at_floor = S.create();
  double floor_norm = -1;      // ||r|| at the first update at the floor (< 0: not reached yet)
  std::int64_t floor_it = -1;  // its iteration; -1 unless f went back to it at the end
  auto update_every = [&] { return floor_norm < 0 ? kUpdateEvery : kFloorCycle; };
  // f += s d; r = b - Q f; s = 2^ceil(log2 max|r|); rho = r / s; d = 0. Returns s_old / s_new,
  // 0 when the run has converged.
  auto reliable_update = [&]() -> double {
    S.assign(M.view(d), s, 1.0, f);
    M.axpby(0.0, d, 0.0, d);  // folded into f: the iterate stays f + s d on every path
    S.normal(f, t);
    S.copy(b, r);
    S.axpby(-1.0, t, 1.0, r);
    const double m = S.max_abs(r);
    if (!std::isfinite(m))  // a NaN residual must not read as "converged" below
      throw NumericalError("split: the FP32 residual is not finite at a reliable update");
    const double norm = std::sqrt(S.dot(r, r));
    if (floor_norm >= 0) {  // the cycle after the floor is done
      if (norm > floor_norm)
        S.copy(at_floor, f);
      else
        floor_it = -1;
      return 0;
    }
    if (m == 0) return 0;
    if (norm <= 2 * u32 * (norm_b + norm_q * std::sqrt(S.dot(f, f)))) {
      S.copy(f, at_floor);
      floor_norm = norm;
      floor_it = it;
    }
    const double s_new = pow2_above(m);
    M.assign(S.view(r), 1.0 / s_new, 0.0, rho);
    const double ratio = s / s_new;
    s = s_new;
    return ratio;
  };
  auto finish = [&](StopReason stop, std::string detail) {
    // The last row shows the image returned: f went back to the floor's copy after it was traced.
    if (floor_it >= 0 && tracer.recorded(it)) tracer.rows().pop_back();
    if (!tracer.recorded(it)) tracer.record(it, "split", kNaN, kNaN, iterate, true);
    S.assign(M.view(d), s, 1.0, f);
    tracer.stop();  // the copy-out of the result is not solver time
    return SolverOutcome{image_of(S, f), stop, std::move(detail), it};
  };
  auto converged = [&] {
    return finish(
        StopReason::Converged,
        "split: FP32 residual at its rounding level at iteration " + std::to_string(it) +
            (floor_it < 0 ? std::string()
                          : " (the image is the iterate of iteration " + std::to_string(floor_it) +
                                ", whose FP32 residual was smaller)"));
  };
  auto target = [&] {
    return finish(StopReason::TargetReached,
                  "target distance reached at iteration " + std::to_string(it));
  };

  // The clock starts at the first row (f = 0), so the first residual is timed as in the
  // one-backend solvers.
  if (record(kNaN)) return target();
  if (reliable_update() == 0) return converged();
  std::int64_t since = 0;

  if (o.solver == Solver::CG) {
    // The steps' scalars stay in the mixed backend (cg_step), so the solver can queue a step
    // before it reads the previous step's report: on the GPU no step then waits for a host round
    // trip. A reliable update that a step's report calls for (residual drop, or update_every()
    // steps) happens after the step that follows it, queued or not, so the sequence of operations
    // does not depend on how far ahead the solver queued (nor on tracing). Nothing is queued past
    // an iteration where the tracer evaluates the iterate (Tracer::due) or past a scheduled update.
    // A breakdown halts the backend's steps until cg_reset: a step queued behind it moves nothing.
    const Vec p = k;
    M.copy(rho, p);
    double rr_update = M.dot(rho, rho);
    M.cg_reset(rr_update, 0.0);  // the first step's direction: p = rho + 0 p = rho
    double last_rr = rr_update;  // r . r before the last step read
    std::int64_t queued = 0, update_after = -1;
    auto can_queue = [&] {
      const std::int64_t last = it + queued;  // the last step queued (or read)
      if (last + 1 > o.iterations || last == update_after || queued == 2) return false;
      return queued == 0 || !tracer.due(last);
    };
    while (true) {
      while (can_queue()) {
        M.cg_step(d, rho, p, q, scratch, norm_q);
        ++queued;
      }
      if (queued == 0) {
        if (update_after != it) break;  // the iterations are done
        // The reliable update; CG keeps its direction in the new units, beta = (the true
        // residual's r . r) / (the last step's rr).
        update_after = -1;
        const double ratio = reliable_update();
        if (ratio == 0) return converged();
        const double rn = M.dot(rho, rho);
        M.axpby(0.0, p, ratio, p);
        M.cg_reset(rn, rn / (last_rr * ratio * ratio));
        rr_update = rn;
        since = 0;
        continue;
      }
      const CgReport step = M.cg_report();
      --queued;
      if (step.halted) {
        while (queued > 0) {  // queued behind the breakdown: they moved nothing
          M.cg_report();
          --queued;
        }
        if (since == 0)
          return finish(StopReason::Stalled, "split cg: p.Qp = " + std::to_string(step.pq) +
                                                 " right after a reliable update at iteration " +
                                                 std::to_string(it + 1));
        if (reliable_update() == 0) return converged();
        M.copy(rho, p);
        rr_update = M.dot(rho, rho);
        M.cg_reset(rr_update, 0.0);
        update_after = -1;
        since = 0;
        continue;
      }
      ++it;
      ++since;
      last_rr = step.rr;
      if (update_after < 0 && (step.rn <= kDrop * rr_update || since >= update_every()))
        update_after = it + 1;
      if (record(step.alpha)) return target();  // due: nothing was queued behind this step
    }
    return finish(StopReason::Iterations, "");
  }

  // Gradient methods on the correction: k = Q d - rho, J_d(d) = d.Qd - 2 d.rho (J(f + s d) up to
  // a constant, divided by s^2), the same Q, so the same step bounds.
  auto restart = [&] { M.axpby(-1.0, rho, 0.0, k); };  // d = 0: k = -rho
  restart();
  double kk_update = M.dot(k, k), Jd = 0;
  const double step = setup.step;
  double last = step;
  std::int64_t since_refresh = 0;
  while (it < o.iterations) {
    double taken = step;
    if (o.solver == Solver::Fixed) {
      M.axpby(-2.0 * step, k, 1.0, d);
      M.normal(d, q);
      M.copy(q, k);
      M.axpby(-1.0, rho, 1.0, k);
    } else if (o.solver == Solver::Optimal) {
      if (since_refresh == kResidualRefresh) {
        M.normal(d, k);
        M.axpby(-1.0, rho, 1.0, k);
        since_refresh = 0;
      }
      const double e = scaled_normal(M, k, scratch, q, norm_q);  // q = Q k / e
      const double kk = M.dot(k, k), kq = e * M.dot(k, q);
      if (!(kq > 0) || kk == 0) {
        if (since == 0)
          return finish(StopReason::Stalled, "split optimal: k.Qk = " + std::to_string(kq) +
                                                 " right after a reliable update at iteration " +
                                                 std::to_string(it + 1));
        if (reliable_update() == 0) return converged();
        restart();
        kk_update = M.dot(k, k);
        since = since_refresh = 0;
        continue;
      }
      const double move = kk / kq;
      M.axpby(-move, k, 1.0, d);
      M.axpby(-move * e, q, 1.0, k);
      taken = move / 2;
      ++since_refresh;
    } else {  // backtracking
      double alpha = std::min(2 * last, step), Jt = 0;
      bool accepted = false;
      for (int halvings = 0;; ++halvings) {
        M.copy(d, trial);
        M.axpby(-2.0 * alpha, k, 1.0, trial);
        try {  // an FP16 overflow in a trial is a step too long: halve it (see solvers.cpp)
          M.normal(trial, q);
          Jt = M.dot(trial, q) - 2 * M.dot(trial, rho);
        } catch (const NumericalError&) {
          Jt = std::numeric_limits<double>::infinity();
        }
        if (Jt < Jd) {
          accepted = true;
          break;
        }
        if (halvings == o.backtrack_retries) break;
        alpha /= 2;
      }
      if (!accepted) {
        if (since == 0)
          return finish(
              StopReason::Stalled,
              "split backtracking: no decrease after " + std::to_string(o.backtrack_retries) +
                  " halvings right after a reliable update at iteration " + std::to_string(it + 1));
        if (reliable_update() == 0) return converged();
        restart();
        kk_update = M.dot(k, k);
        Jd = 0;
        since = 0;
        continue;
      }
      M.copy(trial, d);
      M.copy(q, k);
      M.axpby(-1.0, rho, 1.0, k);
      Jd = Jt;
      last = taken = alpha;
    }
    ++it;
    ++since;
    if (M.dot(k, k) <= kDrop * kk_update || since >= update_every()) {
      if (reliable_update() == 0) return converged();
      restart();
      kk_update = M.dot(k, k);
      Jd = 0;
      since = since_refresh = 0;
    }
    if (record(taken)) return target();
  }
  return finish(StopReason::Iterations, "");
}

}  // namespace halfscope::deconv::detail
