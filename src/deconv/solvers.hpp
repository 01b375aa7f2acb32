// Internal: the iterative Tikhonov solvers (solvers.cpp, solvers_split.cpp), written once against
// backend.hpp, and the trace recorder that times them (trace.cpp).
//
// Conventions. k = Q f - b with Q = H^T H + lambda I and b = H^T g is half the true gradient
// (grad J = 2 k). Steps are reported in the convention of the true gradient, f <- f - alpha
// grad J, so the fixed step's bound is the textbook 2 / L with L = 2 (max|h^|^2 + lambda) and the
// default is 1 / L; the solvers move by 2 alpha along k. Optimal: alpha = k.k / (2 k.Qk) (the
// exact line search; the move is k.k / k.Qk). CG records its own step along its direction p.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deconv/backend.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::deconv::detail {

/// Times the solver and records the trace rows (DeconvOptions: first, every k-th, last), with the
/// FP64 evaluation outside the timed region: every watched backend is synchronised before the
/// clock stops, so queued GPU work is charged to the solver.
class Tracer {
 public:
  /// `evaluator` may be null (no trace and no target). Starts the clock.
  Tracer(const DeconvOptions& options, Evaluator* evaluator);
  /// Backends to synchronise before the clock stops.
  void watch(Backend* backend) { watched_.push_back(backend); }
  /// After iteration `iteration` (0: the initial image): records a row when one is due
  /// (`last` forces one). `iterate` gives the current image (called only when needed, outside
  /// the timed region). Returns true when the target distance has been reached.
  bool record(std::int64_t iteration, const std::string& phase, double criterion_solver,
              double step, const std::function<Array()>& iterate, bool last = false);
  /// Whether record(iteration, ...) will evaluate the iterate (a row is due, or a target is
  /// checked): a solver that queues work ahead must not queue past such an iteration.
  [[nodiscard]] bool due(std::int64_t iteration) const;
  /// Solver time so far (ms), tracing excluded.
  [[nodiscard]] double elapsed_ms() const;
  [[nodiscard]] std::vector<TraceRow>& rows() { return rows_; }
  /// True when the last recorded row is this iteration.
  [[nodiscard]] bool recorded(std::int64_t iteration) const {
    return !rows_.empty() && rows_.back().iteration == iteration;
  }

  /// Stops the clock for good (pauses when running): the result's copy-out is not solver time.
  void stop() {
    if (running_) pause();
  }

 private:
  void pause();
  void resume();
  /// A trace row is due at `iteration` (first, every k-th, `last`; not yet recorded).
  [[nodiscard]] bool row_due(std::int64_t iteration, bool last) const;
  /// Every iteration is evaluated against options.target_distance.
  [[nodiscard]] bool checks_target() const;
  const DeconvOptions& options_;
  Evaluator* evaluator_;
  std::vector<Backend*> watched_;
  std::vector<TraceRow> rows_;
  std::chrono::steady_clock::time_point started_;
  double elapsed_ms_ = 0;
  bool running_ = false;
};

/// What a solver needs beyond the backends.
struct SolverSetup {
  const DeconvOptions& options;
  double lipschitz = 0;  // L = 2 (max|h^|^2 + lambda)
  double step = 0;       // fixed / initial step alpha (true-gradient convention)
  /// Makes a backend of the problem in a backend precision on the resolved device.
  std::function<std::unique_ptr<Backend>(Precision)> make_backend;
};

/// How a run ended.
struct SolverOutcome {
  Array image;  // float64 host
  StopReason stop = StopReason::Iterations;
  std::string detail;
  std::int64_t iterations = 0;
};

/// Runs options.solver (not Wiener) in options.precision; NumericalError gains the iteration.
SolverOutcome run_solver(const SolverSetup& setup, Tracer& tracer);

/// Split precision (solvers_split.cpp): FP32 solution and residual, corrections in mixed.
SolverOutcome run_split(const SolverSetup& setup, Tracer& tracer, std::int64_t& iteration);

/// out = Q (x / e); returns e. With FP16 storage (half, mixed) e is a power of two that brings
/// max|x / e| to ~1 / sqrt(||Q||), so neither x / e nor Q (x / e) leaves FP16's range whatever
/// the PSF (Q x itself is up to ||Q|| = max|h^|^2 + lambda times larger than x); the optimal
/// step and CG use it, their ratios being scale-invariant. Otherwise e = 1 (out = Q x).
double scaled_normal(Backend& b, Vec x, Vec tmp, Vec out, double norm_q);

/// The image of a backend's vector as a float64 host array.
Array image_of(Backend& b, Vec v);

/// Iterations between explicit recomputations of a recursively updated residual (optimal, CG).
inline constexpr std::int64_t kResidualRefresh = 50;
/// The same for CG with FP16-stored vectors (half, mixed): their recursion drifts faster.
inline constexpr std::int64_t kResidualRefreshFp16 = 10;

}  // namespace halfscope::deconv::detail
