// Matched filtering over MPI ranks (halfscope/mpi/mfilter.hpp): the grid of template groups x
// time parts, each rank's part of the result, and the gathering of the parts on one rank.
#include "halfscope/mpi/mfilter.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/devices.hpp"
#include "mpi/mfilter_share.hpp"

namespace halfscope::mpi {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// The (template groups, time parts) grid: see MfSplit.
std::pair<std::int64_t, std::int64_t> grid(std::int64_t ranks, std::int64_t templates,
                                           std::int64_t n_corr, std::int64_t time_parts,
                                           std::int64_t granule) {
  const std::int64_t granules = (templates + granule - 1) / granule;
  if (time_parts > 0) {
    const std::int64_t parts = std::min(time_parts, n_corr);
    return {std::min(granules, ranks / parts), parts};
  }
  if (granules >= ranks) return {ranks, 1};
  std::pair<std::int64_t, std::int64_t> best{1, 1};
  for (std::int64_t g = 1; g <= granules; ++g) {
    const std::int64_t p = std::min(ranks / g, n_corr);
    if (g * p >= best.first * best.second) best = {g, p};  // ties: more template groups
  }
  return best;
}

// Header of one part on its way to the root: its share (the rows and columns it fills).
constexpr int kTagHeader = 0x6d660, kTagValues = 0x6d661;

// The stack part of this rank for templates and data read from the sources (not null once
// prepare_everywhere agreed: the Array overload gives no source only for inputs it refuses).
MfPart matched_filter_part(const Comm& comm, const io::TemplateSource* templates,
                           const io::SampleSource* data, const mfilter::ArrayInfo& tinfo,
                           const mfilter::ArrayInfo& dinfo, const MfOptions& options,
                           const MfNetworkTables& network, const MfSplit& split) {
  const mfilter::Prepared p =
      mf::prepare_everywhere(comm, tinfo, dinfo, options, network, "mpi::matched_filter");
  const mf::RankData rank_data = mf::data_factors(comm, *data, p);
  const int device = rank_device(comm), sharers = device_sharers(comm);
  MfPart part;
  part.full_shape = p.out_shape;
  agree(comm, [&] {
    part.share = mf_share(comm.rank(), comm.size(), p.dims.templates, p.dims.n_corr, split,
                          mfilter::group_granule(p));
  });
  const MfShare& s = part.share;
  const mf::GroupNetwork net =
      mf::group_network(comm, network, p, s.template_begin, s.template_end);
  agree(comm, [&] {
    mf::fault_hook(comm);
    if (s.empty()) return;
    mfilter::Prepared block = mf::block_problem(
        p, mf::group_templates(*templates, p, s.template_begin, s.template_end), net, rank_data,
        s.template_begin, s.template_end, s.time_begin, s.time_end);
    block.device_share = sharers;
    part.values = mf::compute_block(block, device);
  });
  return part;
}

}  // namespace

MfNetworkTables::MfNetworkTables(const MfNetwork& network) {
  if (!network.moveouts.empty()) moveouts = io::array_table(network.moveouts);
  if (!network.weights.empty()) weights = io::array_table(network.weights);
}

MfShare mf_share(int rank, int ranks, std::int64_t templates, std::int64_t n_corr,
                 const MfSplit& split, std::int64_t granule) {
  if (ranks < 1 || rank < 0 || rank >= ranks || templates < 1 || n_corr < 1 || granule < 1)
    throw InvalidInput("mpi::mf_share: rank " + str(rank) + " of " + str(ranks) + ", " +
                       str(templates) + " templates, " + str(n_corr) +
                       " correlation times, groups of multiples of " + str(granule) +
                       " templates: expected 0 <= rank < ranks and sizes >= 1");
  if (split.time_parts < 0 || split.time_parts > ranks)
    throw InvalidInput("matched filtering over MPI ranks: time_parts " + str(split.time_parts) +
                       ": expected 0 (automatic) to the " + str(ranks) + " ranks");
  const auto [groups, parts] = grid(ranks, templates, n_corr, split.time_parts, granule);
  MfShare s;
  s.template_groups = groups;
  s.time_parts = parts;
  if (rank >= groups * parts) return s;  // idle: the grid has no cell for this rank
  const auto g = mfilter::template_ranges(templates, groups, granule);
  const auto t = mfilter::template_ranges(n_corr, parts, 1);
  const auto& rows = g[static_cast<std::size_t>(rank / parts)];
  const auto& cols = t[static_cast<std::size_t>(rank % parts)];
  s.template_begin = rows.first;
  s.template_end = rows.second;
  s.time_begin = cols.first;
  s.time_end = cols.second;
  return s;
}

MfPart matched_filter(const Comm& comm, const io::TemplateSource& templates,
                      const io::SampleSource& data, const MfOptions& options,
                      const MfNetworkTables& network, const MfSplit& split) {
  return matched_filter_part(comm, &templates, &data, mf::template_info(templates),
                             mf::data_info(data), options, network, split);
}

MfPart matched_filter(const Comm& comm, const Array& templates, const Array& data,
                      const MfOptions& options, const MfNetwork& network, const MfSplit& split) {
  const auto bank = mf::host_templates(comm, templates);
  const auto samples = mf::host_samples(comm, data);
  return matched_filter_part(comm, bank.get(), samples.get(), mfilter::ArrayInfo::of(templates),
                             mfilter::ArrayInfo::of(data), options, network, split);
}

Array gather_result(const Comm& comm, const MfPart& part, int root) {
  const MfShare& mine = part.share;
  std::array<std::int64_t, 4> header{mine.template_begin, mine.template_end, mine.time_begin,
                                     mine.time_end};
  if (comm.rank() != root) {
    comm.send_bytes(header.data(), sizeof header, root, kTagHeader);
    if (!mine.empty()) comm.send_bytes(part.values.data(), part.values.nbytes(), root, kTagValues);
    return {};
  }
  const Shape& full = part.full_shape;
  const bool stacked = full.size() == 2;
  const std::int64_t n = full.back(), per_row = stacked ? 1 : full[1];  // rows of n per template
  Array out(DType::f32, full);
  std::int64_t filled = 0;
  std::vector<float> received;
  for (int r = 0; r < comm.size(); ++r) {
    const float* values = nullptr;
    if (r == root) {
      header = {mine.template_begin, mine.template_end, mine.time_begin, mine.time_end};
      values = mine.empty() ? nullptr : part.values.data_as<float>();
    } else {
      comm.receive_bytes(header.data(), sizeof header, r, kTagHeader);
    }
    const std::int64_t rows = header[1] - header[0], cols = header[3] - header[2];
    if (rows <= 0 || cols <= 0) continue;
    if (r != root) {
      received.resize(static_cast<std::size_t>(rows * per_row * cols));
      comm.receive_bytes(received.data(),
                         static_cast<std::int64_t>(received.size() * sizeof(float)), r, kTagValues);
      values = received.data();
    }
    // Each (template, channel) line of the part lands at its columns of the whole line.
    for (std::int64_t j = 0; j < rows * per_row; ++j)
      std::memcpy(out.data_as<float>() + (header[0] * per_row + j) * n + header[2],
                  values + j * cols, static_cast<std::size_t>(cols) * sizeof(float));
    filled += rows * cols;
  }
  if (filled != full[0] * n)
    throw Error("mpi::gather_result: the parts cover " + str(filled) + " of the " +
                str(full[0] * n) + " (template, time) cells: expected the whole result");
  return out;
}

}  // namespace halfscope::mpi
