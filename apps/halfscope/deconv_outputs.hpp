// What `halfscope deconv` and the demo's deconvolution section write from a DeconvResult: the
// trace as CSV, the criterion curve as an SVG series, the FITS HISTORY cards of a restored sky.
// Formatting only; the numbers come from deconv::deconvolve.
#pragma once

#include <string>
#include <vector>

#include "halfscope/deconv.hpp"
#include "halfscope/io/fits.hpp"
#include "svg_chart.hpp"

namespace halfscope::cli {

/// The trace as CSV text: a header line `iteration,phase,criterion,criterion_solver,step,
/// elapsed_ms,distance`, then one line per row; reals with 17 significant digits (so a reader
/// gets the doubles back exactly), NaN as `nan` (what NumPy and pandas read as NaN).
std::string trace_csv(const std::vector<deconv::TraceRow>& trace);

/// (iteration, J in FP64) of every row, for svg_line_chart with a log-scale y.
Series criterion_series(const std::vector<deconv::TraceRow>& trace, std::string label);

/// (iteration, J as the solver computed it), rows where the solver computed J only.
Series solver_criterion_series(const std::vector<deconv::TraceRow>& trace, std::string label);

/// The parameters of a run, as FITS HISTORY cards (one `key = value` per card, each under the
/// 72-character limit): solver, precision, lambda, boundary, device, iterations, stop reason
/// (and its detail, wrapped over several cards), solver time, final criterion and distance,
/// halfscope version and source commit.
std::vector<io::FitsCard> deconv_history_cards(const deconv::DeconvOptions& options,
                                               const deconv::DeconvResult& result);

/// The one-paragraph summary printed after a run: solver, precision, device, stop reason,
/// iterations, solver time, final J (FP64) and distance to the exact solution.
std::string deconv_summary(const deconv::DeconvOptions& options,
                           const deconv::DeconvResult& result);

/// A number with `digits` significant digits ("%.*g"), "nan" / "inf" as printf spells them.
std::string significant(double v, int digits);

}  // namespace halfscope::cli
