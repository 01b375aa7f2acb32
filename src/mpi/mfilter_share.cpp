// Matched filtering over MPI ranks: the agreed preparation, one rank's block of the result and
// the fault-injection test hook (see mfilter_share.hpp).
#include "mpi/mfilter_share.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/devices.hpp"
#include "mfilter/level_check.hpp"
#include "mfilter/window_stats.hpp"

namespace halfscope::mpi::mf {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// How prepare_call sees a table of the network (none: an empty array).
mfilter::ArrayInfo table_info(const io::TableSource* table) {
  if (table == nullptr) return {{}, DType::f32, false, true, "none"};
  return {table->shape(), table->dtype(), false, false, table->describe()};
}

}  // namespace

mfilter::ArrayInfo data_info(const io::SampleSource& data) {
  return {data.shape(), data.dtype(), false, false, data.describe()};
}

mfilter::ArrayInfo template_info(const io::TemplateSource& templates) {
  return {templates.shape(), templates.dtype(), false, false, templates.describe()};
}

std::unique_ptr<io::SampleSource> host_samples(const Comm& comm, const Array& data) {
  std::unique_ptr<io::SampleSource> source;
  agree(comm, [&] {
    // Data that prepare_everywhere refuses get no source: its message is the one-process one.
    if (data.on_device() || data.empty() || (data.ndim() != 1 && data.ndim() != 2) ||
        data.size() == 0)
      return;
    source = io::array_samples(data);
  });
  return source;
}

std::unique_ptr<io::TemplateSource> host_templates(const Comm& comm, const Array& templates) {
  std::unique_ptr<io::TemplateSource> source;
  agree(comm, [&] {
    if (templates.on_device() || templates.empty() ||
        (templates.ndim() != 2 && templates.ndim() != 3) || templates.size() == 0)
      return;
    source = io::array_templates(templates);
  });
  return source;
}

mfilter::Prepared prepare_everywhere(const Comm& comm, const mfilter::ArrayInfo& templates,
                                     const mfilter::ArrayInfo& data, const MfOptions& options,
                                     const MfNetworkTables& network, const char* what) {
  mfilter::Prepared p;
  agree(comm, [&] {
    if (!options.devices.empty())
      throw InvalidInput(std::string(what) + ": options.devices lists " +
                         str(static_cast<std::int64_t>(options.devices.size())) +
                         " device(s): expected none over MPI ranks (each GPU rank uses one "
                         "device: its rank on the host modulo the host's devices)");
    if (templates.on_device || data.on_device)
      throw InvalidInput(std::string(what) + ": expected host templates and data on every rank, " +
                         "found templates " + templates.description + ", data " + data.description);
    p = mfilter::prepare_call(templates, data, options, table_info(network.moveouts.get()),
                              table_info(network.weights.get()));
  });
  // Every rank splits the call by its own shapes, so they must be the same everywhere: compare
  // the largest and the smallest of each value over the ranks (one reduction of both signs).
  const mfilter::Dims& d = p.dims;
  constexpr std::size_t kFields = 9;
  const std::array<std::int64_t, kFields> mine{d.templates,
                                               d.channels,
                                               d.length,
                                               d.samples,
                                               d.step,
                                               static_cast<std::int64_t>(d.normalize),
                                               static_cast<std::int64_t>(d.network_sum),
                                               static_cast<std::int64_t>(p.method),
                                               static_cast<std::int64_t>(p.precision)};
  std::array<std::int64_t, 2 * kFields> extremes{};
  for (std::size_t i = 0; i < kFields; ++i) {
    extremes[i] = mine[i];
    extremes[kFields + i] = -mine[i];
  }
  comm.max(std::span<std::int64_t>(extremes));
  static constexpr std::array<const char*, kFields> kNames{
      "templates",     "channels",      "template samples", "data samples", "step",
      "normalization", "network stack", "method",           "precision"};
  // Every rank sees the same extremes, hence throws alike: agreed, so the CLI reports it once.
  agree(comm, [&] {
    for (std::size_t i = 0; i < kFields; ++i)
      if (extremes[i] != -extremes[kFields + i])
        throw InvalidInput(std::string(what) +
                           ": the MPI ranks prepared different calls: " + kNames[i] + " from " +
                           str(-extremes[kFields + i]) + " to " + str(extremes[i]) +
                           "; expected the same inputs and options on every rank (and the same "
                           "resolved method and precision: a GPU on every rank or on none)");
  });
  return p;
}

Array group_templates(const io::TemplateSource& templates, const mfilter::Prepared& p,
                      std::int64_t t0, std::int64_t t1) {
  // The source refuses a file's non-finite value with the file's name; values in memory reach
  // prepare_template_rows, whose message is the one-process call's.
  return mfilter::prepare_template_rows(p, templates.read(t0, t1), t0);
}

GroupNetwork group_network(const Comm& comm, const MfNetworkTables& network,
                           const mfilter::Prepared& p, std::int64_t t0, std::int64_t t1) {
  GroupNetwork g;
  std::array<std::int64_t, 2> facts{0, 0};
  agree(comm, [&] {
    if (t1 <= t0) return;
    const auto rows = [&](const std::shared_ptr<const io::TableSource>& table) {
      return table ? table->read(t0, t1) : Array{};
    };
    g.rows = mfilter::prepare_network_rows(p, rows(network.moveouts), rows(network.weights), t0,
                                           t1 - t0);
    const std::int64_t C = p.dims.channels;
    facts[0] = mfilter::tile_moveout_spread(g.rows.moveouts.data(), t1 - t0, C);
    if (mfilter::group_granule(p) == mfilter::kWgmmaGroupTemplates)
      facts[1] = mfilter::wgmma_row_length(g.rows.moveouts.data(), g.rows.weights.data(), t1 - t0,
                                           C, p.dims.length);
  });
  comm.max(std::span<std::int64_t>(facts));
  g.tile_spread = facts[0];
  g.wgmma_row = facts[1];
  return g;
}

mfilter::Prepared block_problem(const mfilter::Prepared& p, const Array& templates,
                                const GroupNetwork& network, const RankData& data, std::int64_t t0,
                                std::int64_t t1, std::int64_t c0, std::int64_t c1) {
  const mfilter::Dims& d = p.dims;
  const std::int64_t C = d.channels, K = d.length, L = d.samples;
  mfilter::Prepared sub;
  sub.dims = d;
  sub.dims.templates = t1 - t0;
  sub.dims.n_corr = c1 - c0;
  sub.method = p.method;
  sub.precision = p.precision;
  sub.on_gpu = p.on_gpu;
  // A template group tiles correlation time as the whole call does (bit-identical rows on GPUs).
  sub.tile_spread_floor = std::max(p.tile_spread_floor, network.tile_spread);
  sub.template_group = true;
  // So do the wgmma kernel's 64-template groups (mf_share aligns them), sized by the whole call's
  // longest template row, so the block falls back to the other kernel exactly when the call does.
  sub.wgmma_aligned = mfilter::group_granule(p) == mfilter::kWgmmaGroupTemplates &&
                      t0 % mfilter::kWgmmaGroupTemplates == 0;
  sub.wgmma_kp_floor = sub.wgmma_aligned ? network.wgmma_row : 0;
  // Templates are independent: a group is the rows of its templates (and of their network).
  if (templates.size() != (t1 - t0) * C * K)
    throw Error("mpi::block_problem: " + str(templates.size()) +
                " template values for templates [" + str(t0) + ", " + str(t1) + "): expected " +
                str((t1 - t0) * C * K));
  sub.templates = templates;
  if (std::ssize(network.rows.moveouts) != (t1 - t0) * C ||
      std::ssize(network.rows.weights) != (t1 - t0) * C)
    throw Error("mpi::block_problem: the network rows do not hold templates [" + str(t0) + ", " +
                str(t1) + ") x " + str(C) + " channels");
  sub.moveouts = network.rows.moveouts;
  sub.weights = network.rows.weights;
  // Time: the block's windows start in [c0 * step + min moveout, (c1 - 1) * step + max moveout].
  // The slice [a, b) holds every one of them that lies inside the data and no sample beyond a
  // window outside it, so the window rule decides alike. `a` is rounded down to a restart of the
  // running window energies (window_stats.hpp), which then add the same terms in the same order.
  const auto [lo, hi] = std::minmax_element(sub.moveouts.begin(), sub.moveouts.end());
  const std::int64_t first_start = c0 * d.step + *lo;
  std::int64_t a = first_start <= 0 ? 0
                                    : std::min(first_start, L) / mfilter::kRecomputeEvery *
                                          mfilter::kRecomputeEvery;
  std::int64_t b = std::clamp((c1 - 1) * d.step + *hi + K, a, L);
  // Shorter than a template: no window of the block is inside the data (one inside would span
  // K samples of [a, b)), so any K samples give the same zeros; the backends want L >= K.
  const bool windows_inside = b - a >= K;
  if (!windows_inside) {
    b = std::min(L, a + K);
    a = b - K;
  }
  sub.dims.samples = b - a;
  for (std::int64_t& m : sub.moveouts) m += c0 * d.step - a;
  sub.data = prepared_window(data, a, b, mfilter::storage_type(p));
  sub.channel_offsets = mfilter::offsets_of(data.factors);
  // The level check of this block's windows (named by their samples in the caller's channel).
  if (windows_inside) mfilter::check_level_rounding(sub, sub.data, a);
  sub.out_shape = d.network_sum ? Shape{t1 - t0, c1 - c0} : Shape{t1 - t0, C, c1 - c0};
  return sub;
}

Array compute_block(const mfilter::Prepared& block, int device) {
#if HALFSCOPE_WITH_CUDA
  if (block.on_gpu) return mfilter::run_cuda_devices(block, {device});
#else
  (void)device;
#endif
  return mfilter::run_cpu(block);
}

std::vector<Detection> block_candidates(const mfilter::Prepared& block, std::int64_t t0,
                                        std::int64_t c0, std::int64_t step, int device,
                                        const DetectOptions& detect) {
#if HALFSCOPE_WITH_CUDA
  if (block.on_gpu && detect.type == ThresholdType::Absolute) {
    std::vector<Detection> found = mfilter::candidates_cuda_devices(block, detect, {device});
    for (Detection& d : found) {
      d.template_index += t0;
      d.correlation_index += c0;
      d.sample = d.correlation_index * step;
    }
    return found;
  }
#else
  (void)block, (void)t0, (void)c0, (void)step, (void)device;
#endif
  throw Unsupported(
      "mpi::block_candidates: a device search needs a GPU call with an absolute "
      "threshold, found method " +
      std::string(mf_method_name(block.method)) + " and a " +
      std::string(threshold_type_name(detect.type)) + " threshold");
}

void fault_hook(const Comm& comm) {
  const char* value = std::getenv("HALFSCOPE_FAULT_RANK");
  if (value == nullptr) return;
  const std::string v(value);
  char* end = nullptr;
  const long rank = std::strtol(v.c_str(), &end, 10);
  const std::string rest(end);
  if (end == v.c_str() || (!rest.empty() && rest != ":abort"))
    throw InvalidInput("HALFSCOPE_FAULT_RANK=" + v +
                       ": expected a rank number, optionally followed by :abort (test hook, "
                       "docs/scaling.md)");
  if (rank != comm.rank()) return;
  if (rest == ":abort") std::abort();  // a crash: the launcher ends the job
  throw Error("HALFSCOPE_FAULT_RANK=" + v + ": fault injected on MPI rank " + str(rank) +
              " (test hook, docs/scaling.md)");
}

std::vector<std::byte> to_bytes(const std::vector<Detection>& detections) {
  static_assert(std::is_trivially_copyable_v<Detection>);
  std::vector<std::byte> bytes(detections.size() * sizeof(Detection));
  if (!bytes.empty()) std::memcpy(bytes.data(), detections.data(), bytes.size());
  return bytes;
}

std::vector<Detection> from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() % sizeof(Detection) != 0)
    throw Error("MPI matched filtering: " + str(static_cast<std::int64_t>(bytes.size())) +
                " bytes of detections received: expected a multiple of " +
                str(static_cast<std::int64_t>(sizeof(Detection))));
  std::vector<Detection> out(bytes.size() / sizeof(Detection));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace halfscope::mpi::mf
