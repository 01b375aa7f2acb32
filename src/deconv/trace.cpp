// The trace recorder of the deconvolution solvers (solvers.hpp): the clock runs only while the
// solver works; the FP64 evaluation of a trace row and the target check happen with it stopped,
// after every watched backend has finished its queued work.
#include <cmath>
#include <limits>

#include "deconv/solvers.hpp"

namespace halfscope::deconv::detail {

Tracer::Tracer(const DeconvOptions& options, Evaluator* evaluator)
    : options_(options), evaluator_(evaluator) {}

void Tracer::pause() {
  for (Backend* b : watched_) b->synchronize();
  elapsed_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
          .count();
  running_ = false;
}

void Tracer::resume() {
  started_ = std::chrono::steady_clock::now();
  running_ = true;
}

double Tracer::elapsed_ms() const {
  if (!running_) return elapsed_ms_;
  return elapsed_ms_ +
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
             .count();
}

bool Tracer::row_due(std::int64_t iteration, bool last) const {
  const std::int64_t every = options_.trace_every;
  return evaluator_ != nullptr && every > 0 && (iteration == 0 || last || iteration % every == 0) &&
         !recorded(iteration);
}

bool Tracer::checks_target() const {
  return evaluator_ != nullptr && options_.target_distance > 0;
}

bool Tracer::due(std::int64_t iteration) const {
  return row_due(iteration, false) || checks_target();
}

bool Tracer::record(std::int64_t iteration, const std::string& phase, double criterion_solver,
                    double step, const std::function<Array()>& iterate, bool last) {
  const bool due = row_due(iteration, last);
  const bool check = checks_target();
  if (!due && !check) {
    // The first call starts the clock (the solver's set-up before its first row is not timed).
    if (!running_) resume();
    return false;
  }
  if (running_) pause();
  const Evaluation e = evaluator_->evaluate(iterate());
  if (due)
    rows_.push_back(
        TraceRow{iteration, phase, e.criterion, criterion_solver, step, elapsed_ms_, e.distance});
  const bool reached = check && e.distance <= options_.target_distance;
  resume();
  return reached;
}

}  // namespace halfscope::deconv::detail
