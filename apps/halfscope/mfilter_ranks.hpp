// `halfscope mfilter` over MPI ranks (mpirun -np N halfscope mfilter ...): the MPI side of
// cmd_mfilter.cpp, so that the subcommand reads the same with one rank or many. Without MPI in
// the build (or on one rank) every function here runs the plain path.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::cli {

/// max |a - b| over the finite differences, and how many differences are not finite (a NaN or
/// inf in either array).
struct Difference {
  double max_abs = 0;
  std::int64_t nonfinite = 0;
};
Difference max_abs_difference(const Array& a, const Array& b);

/// Runs `step` on this rank; with several ranks every rank then agrees on the outcome (a failure
/// on any rank is thrown on every rank, mpi::agree), so no rank goes on alone.
void on_every_rank(const Globals& g, const std::function<void()>& step);

/// What the computation of one `mfilter` call gives.
struct MfRun {
  Array cc;                      // the whole result (on rank 0 only with several ranks)
  std::vector<Detection> found;  // on every rank
  Difference check;              // against the CPU FP64 direct call, when asked
  /// With several ranks and a .npy output: the result already written by the ranks, not yet
  /// under its name (rank 0; cc then stays empty). write_outputs commits it.
  std::unique_ptr<io::AtomicOutput> cc_file;
};

/// Network tables of which each rank reads its template group's rows (io::npy_table); a null
/// table: the MfNetwork array of the call, if any.
struct NetworkTables {
  std::shared_ptr<const io::TableSource> moveouts, weights;
};

/// The matched filtering of one call split over the ranks (halfscope/mpi/mfilter.hpp; only with
/// several ranks in a build with MPI), each rank reading its template group of `templates` and
/// its share of `data` and its rows of the network (`tables`, else `network`): when `want_cc`, the
/// result written by the ranks into `npy_output` (mpi::write_result_npy, left uncommitted in
/// cc_file) or, without one, gathered on rank 0; the detections when `detect` is not null, and with
/// `check` the largest difference from the FP64 CPU reference computed over the ranks too.
/// `time_parts`: mpi::MfSplit's.
MfRun mfilter_over_ranks(const Globals& g, const io::TemplateSource& templates,
                         const io::SampleSource& data, const MfOptions& options,
                         const MfNetwork& network, const NetworkTables& tables,
                         const DetectOptions* detect, bool want_cc, bool check,
                         std::int64_t time_parts, const std::string& npy_output);

}  // namespace halfscope::cli
