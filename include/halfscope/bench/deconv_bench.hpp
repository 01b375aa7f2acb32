// `halfscope bench deconv` (issue 7; study 000 Figs. 7 and 8): Tikhonov deconvolution of a
// simulated MeerKAT observation by every solver in every precision, in the one benchmark schema
// (report.hpp) with the criterion curves stored next to the cases.
//
// Inputs (seeded, the same on every machine): the MeerKAT PSF of sim/radio.hpp's defaults (8 h of
// hour angle every 60 s at 1.4 GHz, dec -30 deg, natural weighting) on a size x size grid, the
// default model sky (100 power-law point sources and a halo at 1e-3 of the brightest), and one
// dirty image per SNR (g = H f + n, sim::simulate_observation with the bench's boundary).
// The solvers then see the PSF divided by max |h^| (`unit_norm_psf`, the default), so ||H||_2 = 1
// and lambda is relative to the operator's scale: kappa(Q) <= 1 + 1 / lambda = 101 for the study's
// lambda = 0.01. The radio convention (peak 1) makes max |h^| the PSF's sum (723 at 256 x 256 for
// MeerKAT) and kappa ~ 1 + 723^2 / 0.01 = 5e7, which no solver brings to 1e-3 of f* in thousands
// of iterations (measured: CG in double stalls near 0.85 after 650). Dividing h by s is the same
// problem with the sky in units s times larger and lambda s^2 times smaller; distances are
// relative, so the comparison is unchanged in kind. The dump holds the PSF the solvers saw.
//
// Per SNR:
//  - the exact solution f* (Solver::Wiener in double), timed once: the accuracy reference;
//  - per solver x precision, one run of `iterations` operator iterations traced every
//    `trace_every` iterations (study Fig. 7: J in FP64 against the iteration; the series is stored
//    in the JSON). The case's median_ms / min_ms / max_ms are over the per-iteration times
//    (differences of the trace's elapsed_ms between consecutive rows over the iterations between
//    them: solver time only, the FP64 trace evaluation excluded); params hold the time and the
//    iteration at which the relative distance to f* was first seen at or below `target`
//    (`solver_ms_to_target`, `iterations_to_target`, only when it was); error holds the final
//    distance and the final J's excess over J(f*) relative to J(f*);
//  - the headline: per SNR, the time fixed-step gradient descent in single takes to reach the
//    target over the best time of CG in mixed or split (the target: >= 10x). When fixed /
//    single does not reach the target within its iterations, its whole run's time is used and the
//    ratio is a lower bound (`ratio_is_lower_bound`).
// Once: study Fig. 8, H f of the sky with the peak-1 PSF (the physical one, whose values FP16
// holds as normal numbers; the unit-norm PSF's sidelobes would be FP16 subnormals) by convolve2d
// (FFT, circular, "same") in FP16 (`half`, the
// study's 1 / sqrt(N) pre-scaling) and in mixed against FP32: MSE, max |difference| over max
// |H f| in FP32 (a per-pixel relative difference is meaningless where H f crosses zero), and on
// request a PNG of the squared difference (log scale).
// A case that throws (an FP16 overflow, a precision the device lacks, running out of memory) is
// recorded with params.failed and the run goes on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "halfscope/bench/report.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"
#include "halfscope/deconv.hpp"

namespace halfscope::bench {

/// Options of `bench deconv`.
struct DeconvBenchOptions {
  std::int64_t size = 2048;               // image rows = cols
  std::vector<double> snr_db = {37, 16};  // the study's two observations
  std::vector<deconv::Solver> solvers = {deconv::Solver::Fixed, deconv::Solver::Optimal,
                                         deconv::Solver::Backtracking,
                                         deconv::Solver::HalfThenFloat, deconv::Solver::CG};
  std::vector<Precision> precisions = {Precision::Single, Precision::Half, Precision::Mixed,
                                       Precision::Split};
  std::int64_t iterations = 500;
  /// Trace (FP64 J and distance to f*) every k-th iteration: the curves' resolution and the time
  /// to target's (the first traced row within the target: up to k - 1 iterations late).
  std::int64_t trace_every = 1;  // fixed / single needs ~410 at kappa = 101 to reach 1e-3
  double lambda = 0.01;
  Boundary boundary = Boundary::Circular;
  DeviceKind device = DeviceKind::Auto;
  double target = 1e-3;  // relative distance to f* of the headline
  /// Divide the PSF by max |h^| before solving (see the file comment); false: the peak-1 PSF.
  bool unit_norm_psf = true;
  std::uint64_t seed = 1;
  /// When not empty: psf.npy (as the solvers see it), psf_peak.npy, sky.npy, dirty_<snr>db.npy,
  /// exact_<snr>db.npy (float64) and
  /// meta.json (size, lambda, boundary, target, iterations, snr_db) for
  /// bench/peers/deconv_peers.py.
  std::filesystem::path dump_dir;
  /// When not empty: study Fig. 8's squared difference (FP16 vs FP32 H f) as a log-scale PNG.
  std::filesystem::path fig8_png;
  std::function<void(const std::string&)> progress;
};

/// One criterion curve of Fig. 7, from a case's trace.
struct DeconvSeries {
  std::vector<double> iteration, criterion, distance, elapsed_ms;
};

/// The headline of one SNR (see the file comment). Times NaN where a run did not reach the target.
struct DeconvHeadline {
  double snr_db = 0;
  double fixed_single_ms = NAN;  // time to target of fixed / single (its whole run if it missed)
  bool fixed_single_reached = false;
  double best_cg_ms = NAN;        // the best CG time to target in mixed or split
  std::string best_cg_precision;  // which one ("" when neither reached the target)
  double ratio = NAN;             // fixed_single_ms / best_cg_ms
  bool ratio_is_lower_bound = false;
};

/// A run of the benchmark: the report (one case per SNR x solver x precision, the Wiener runs and
/// the Fig. 8 rows), the curves (`series[i]` belongs to `report.cases[i]`; empty for cases
/// without a trace) and the headline per SNR.
struct DeconvBenchResult {
  BenchReport report;
  std::vector<DeconvSeries> series;
  std::vector<DeconvHeadline> headline;
  /// The report's JSON (report.hpp's schema) with `series` added to each traced case
  /// ({"iteration": [...], "criterion": [...], "distance": [...], "elapsed_ms": [...]}) and a
  /// top-level `headline` array; read_bench_report reads it (the additions are ignored).
  [[nodiscard]] std::string to_json() const;
  /// Writes to_json() atomically. Throws IoError.
  void write(const std::filesystem::path& path) const;
};

/// The simulated inputs of the benchmark (see the file comment): float64 size x size arrays.
struct DeconvBenchInputs {
  Array psf, sky;             // psf: what the solvers see (divided by max |h^| when asked)
  double psf_scale = 1;       // what the peak-1 PSF was divided by
  Array psf_peak;             // the simulated peak-1 PSF (Fig. 8 convolves with it)
  std::vector<Array> dirty;   // one per options.snr_db
  std::vector<double> sigma;  // the noise standard deviation of each
};

/// Simulates the inputs for `options` (size, snr_db, boundary, seed). InvalidInput for a size
/// below 16 (the MeerKAT PSF needs a few pixels per beam) or an empty SNR list.
DeconvBenchInputs deconv_bench_inputs(const DeconvBenchOptions& options);

/// Runs the benchmark (see the file comment).
DeconvBenchResult run_deconv_bench(const DeconvBenchOptions& options);

/// The Fig. 7 series of a trace.
DeconvSeries deconv_series(const std::vector<deconv::TraceRow>& trace);

/// Per-iteration times of a trace: the elapsed_ms difference of each pair of consecutive rows over
/// the iterations between them (under trace_every = k, the mean of those k iterations). Empty for
/// fewer than 2 rows.
std::vector<double> deconv_iteration_ms(const std::vector<deconv::TraceRow>& trace);

}  // namespace halfscope::bench
