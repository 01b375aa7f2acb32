// Text forms of a deconvolution run (deconv_outputs.hpp).
#include "deconv_outputs.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "halfscope/bench/report.hpp"
#include "halfscope/config.hpp"

namespace halfscope::cli {

namespace {

// Text that a FITS HISTORY card holds after the keyword: columns 9-80, 72 characters.
constexpr std::size_t kHistoryWidth = 72;

io::FitsCard history(std::string text) {
  io::FitsCard c;
  c.keyword = "HISTORY";
  c.commentary = true;
  c.comment = std::move(text);
  return c;
}

// `key = value`, wrapped into as many cards as needed (continuation cards start with "  ").
void add_history(std::vector<io::FitsCard>& cards, const std::string& key,
                 const std::string& value) {
  std::string text = "halfscope deconv " + key + " = " + value;
  while (text.size() > kHistoryWidth) {
    cards.push_back(history(text.substr(0, kHistoryWidth)));
    text = "  " + text.substr(kHistoryWidth);
  }
  cards.push_back(history(text));
}

// The stop detail as text: the library appends its parts each led by "; " (the ill-conditioning
// warning after the solver's own detail), so a run that stopped without a detail of its own has
// a leading separator, which would print as "(; warning ...)".
std::string stop_detail_text(const std::string& detail) {
  const std::size_t start = detail.find_first_not_of("; ");
  return start == std::string::npos ? std::string() : detail.substr(start);
}

}  // namespace

std::string significant(double v, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*g", digits, v);
  return text;
}

std::string trace_csv(const std::vector<deconv::TraceRow>& trace) {
  std::ostringstream out;
  out << "iteration,phase,criterion,criterion_solver,step,elapsed_ms,distance\n";
  for (const deconv::TraceRow& r : trace)
    out << r.iteration << ',' << r.phase << ',' << significant(r.criterion, 17) << ','
        << significant(r.criterion_solver, 17) << ',' << significant(r.step, 17) << ','
        << significant(r.elapsed_ms, 17) << ',' << significant(r.distance, 17) << '\n';
  return out.str();
}

Series criterion_series(const std::vector<deconv::TraceRow>& trace, std::string label) {
  Series s{std::move(label), {}};
  for (const deconv::TraceRow& r : trace)
    s.points.emplace_back(static_cast<double>(r.iteration), r.criterion);
  return s;
}

Series solver_criterion_series(const std::vector<deconv::TraceRow>& trace, std::string label) {
  Series s{std::move(label), {}};
  for (const deconv::TraceRow& r : trace)
    if (std::isfinite(r.criterion_solver))
      s.points.emplace_back(static_cast<double>(r.iteration), r.criterion_solver);
  return s;
}

std::vector<io::FitsCard> deconv_history_cards(const deconv::DeconvOptions& o,
                                               const deconv::DeconvResult& r) {
  std::vector<io::FitsCard> cards;
  add_history(cards, "solver", std::string(deconv::solver_name(o.solver)));
  add_history(cards, "precision", std::string(precision_name(o.precision)));
  add_history(cards, "lambda", significant(o.lambda, 17));
  add_history(cards, "boundary", std::string(boundary_name(o.boundary)));
  add_history(cards, "device", r.device == DeviceKind::Cuda ? "cuda" : "cpu");
  add_history(cards, "iterations", std::to_string(r.iterations));
  add_history(cards, "stop", std::string(deconv::stop_reason_name(r.stop)));
  if (const std::string detail = stop_detail_text(r.stop_detail); !detail.empty())
    add_history(cards, "stop detail", detail);
  if (std::isfinite(r.step)) add_history(cards, "step", significant(r.step, 17));
  add_history(cards, "condition", significant(r.condition, 6));
  add_history(cards, "solver ms", significant(r.solver_ms, 6));
  if (!r.trace.empty()) {
    add_history(cards, "criterion", significant(r.trace.back().criterion, 17));
    if (std::isfinite(r.trace.back().distance))
      add_history(cards, "distance", significant(r.trace.back().distance, 6));
  }
  add_history(cards, "version", HALFSCOPE_VERSION);
  add_history(cards, "commit", bench::source_commit());
  return cards;
}

std::string deconv_summary(const deconv::DeconvOptions& o, const deconv::DeconvResult& r) {
  std::ostringstream s;
  s << deconv::solver_name(o.solver) << " (" << precision_name(o.precision) << ", "
    << boundary_name(o.boundary) << " boundary, lambda " << significant(o.lambda, 6) << ", "
    << (r.device == DeviceKind::Cuda ? "cuda" : "cpu") << "): stopped by "
    << deconv::stop_reason_name(r.stop);
  if (const std::string detail = stop_detail_text(r.stop_detail); !detail.empty())
    s << " (" << detail << ")";
  s << " after " << r.iterations << " iteration" << (r.iterations == 1 ? "" : "s") << " in "
    << significant(r.solver_ms, 4) << " ms";
  if (r.exact_ms > 0) s << " (exact solution: " << significant(r.exact_ms, 4) << " ms more)";
  if (!r.trace.empty()) {
    const deconv::TraceRow& last = r.trace.back();
    s << "; J = " << significant(last.criterion, 10) << " (FP64)";
    if (std::isfinite(last.distance))
      s << ", relative distance to the exact solution " << significant(last.distance, 4);
  }
  s << ".\n";
  return s.str();
}

}  // namespace halfscope::cli
