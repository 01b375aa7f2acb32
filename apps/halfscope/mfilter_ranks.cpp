// `halfscope mfilter` over MPI ranks: see mfilter_ranks.hpp.
#include "mfilter_ranks.hpp"

#include <bit>
#include <cmath>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_MPI
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#endif

namespace halfscope::cli {

// `!(d <= m)` keeps the comparison NaN-safe; std::max(m, NaN) would drop it.
Difference max_abs_difference(const Array& a, const Array& b) {
  const Array x = a.to(Memory::host).astype(DType::f64), y = b.to(Memory::host).astype(DType::f64);
  Difference r;
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x.data_as<double>()[i] - y.data_as<double>()[i]);
    if (!std::isfinite(d))
      ++r.nonfinite;
    else if (!(d <= r.max_abs))
      r.max_abs = d;
  }
  return r;
}

void on_every_rank(const Globals& g, const std::function<void()>& step) {
#if HALFSCOPE_HAS_MPI
  if (g.ranks > 1) return mpi::agree(mpi::Comm::world(), step);
#else
  (void)g;
#endif
  step();
}

MfRun mfilter_over_ranks(const Globals& g, const io::TemplateSource& templates,
                         const io::SampleSource& data, const MfOptions& options,
                         const MfNetwork& arrays, const NetworkTables& tables,
                         const DetectOptions* detect, bool want_cc, bool check,
                         std::int64_t time_parts, const std::string& npy_output) {
#if HALFSCOPE_HAS_MPI
  (void)g;
  const mpi::Comm world = mpi::Comm::world();
  mpi::MfNetworkTables network(arrays);
  if (tables.moveouts) network.moveouts = tables.moveouts;
  if (tables.weights) network.weights = tables.weights;
  const mpi::MfSplit split{time_parts};
  MfRun run;
  mpi::MfPart part;
  if (detect != nullptr)
    run.found = mpi::matched_filter_detect(world, templates, data, options, network, *detect, split,
                                           want_cc || check ? &part : nullptr);
  else
    part = mpi::matched_filter(world, templates, data, options, network, split);
  if (check) {
    // The reference over the same ranks has the same grid (same shapes): part against part,
    // then the largest difference over the ranks (non-negative doubles order as their bits).
    MfOptions ref = options;
    ref.precision = Precision::Double;
    ref.method = MfMethod::Direct;
    ref.device = DeviceKind::Cpu;
    const mpi::MfPart reference = mpi::matched_filter(world, templates, data, ref, network, split);
    const Difference mine =
        part.values.empty() ? Difference{} : max_abs_difference(reference.values, part.values);
    run.check.max_abs = std::bit_cast<double>(world.max(std::bit_cast<std::int64_t>(mine.max_abs)));
    run.check.nonfinite = world.sum(mine.nonfinite);
  }
  if (want_cc && !npy_output.empty()) {
    mpi::NpyWrite written = mpi::write_result_npy(world, part, npy_output, 0);
    run.cc_file = std::move(written.file);
    warn_gathered(g, "mfilter", written.ranks_without_file, npy_output, "the result");
  } else if (want_cc) {
    run.cc = mpi::gather_result(world, part, 0);
  }
  return run;
#else
  (void)templates, (void)data, (void)options, (void)arrays, (void)tables, (void)detect,
      (void)want_cc, (void)check, (void)time_parts, (void)npy_output;
  throw Unsupported("halfscope mfilter on " + std::to_string(g.ranks) +
                    " ranks: this build has no MPI");
#endif
}

}  // namespace halfscope::cli
