// Detection over MPI ranks (halfscope/mpi/mfilter.hpp): each rank's block of the network stack,
// exact row medians across the time parts of a template group, local maxima that see their
// neighbours across part borders, and one strongest-first declustering of every candidate on
// rank 0, so that the detections equal the one-process call's.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "mfilter/devices.hpp"
#include "mpi/mfilter_share.hpp"

namespace halfscope::mpi {

namespace {

// Rows whose histograms are summed in one reduction (2 targets x 256 bins of int64 each: 4 MiB).
constexpr std::int64_t kRowsPerReduction = 1024;

// The bits of |x| as an unsigned integer: for finite floats their order is the order of |x|.
std::uint32_t magnitude_key(float x) {
  return std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
}

// median(|row|) of each row of a block (rows x cols values, the own columns starting at `first`
// and `own` wide) whose rows continue on the other ranks of `group`, exactly as
// mfilter::row_threshold takes it over the whole row of n values: the (n / 2)-th smallest |x|,
// for even n averaged with the (n / 2 - 1)-th. Each order statistic is found by a radix
// selection on the bits of |x|, one byte per pass from the top: the counts of the candidates'
// next byte, summed over the group, name the byte of the wanted element.
std::vector<double> row_medians(const Comm& group, const float* block, std::int64_t rows,
                                std::int64_t cols, std::int64_t first, std::int64_t own,
                                std::int64_t n) {
  std::vector<double> medians(static_cast<std::size_t>(rows));
  const std::array<std::int64_t, 2> wanted{n / 2, n % 2 == 0 ? n / 2 - 1 : n / 2};
  for (std::int64_t r0 = 0; r0 < rows; r0 += kRowsPerReduction) {
    const std::int64_t batch = std::min(kRowsPerReduction, rows - r0);
    std::vector<std::uint32_t> prefix(static_cast<std::size_t>(batch * 2), 0);
    std::vector<std::int64_t> rank(static_cast<std::size_t>(batch * 2));
    for (std::int64_t j = 0; j < batch; ++j)
      for (std::size_t w = 0; w < 2; ++w) rank[static_cast<std::size_t>(j * 2) + w] = wanted[w];
    std::vector<std::int64_t> counts(static_cast<std::size_t>(batch * 2 * 256));
    for (int shift = 24; shift >= 0; shift -= 8) {
      std::fill(counts.begin(), counts.end(), 0);
      const std::uint32_t high = shift == 24 ? 0u : ~0u << (shift + 8);  // bytes already chosen
      for (std::int64_t j = 0; j < batch; ++j) {
        const float* row = block + (r0 + j) * cols + first;
        for (std::int64_t i = 0; i < own; ++i) {
          const std::uint32_t key = magnitude_key(row[i]);
          for (std::int64_t w = 0; w < 2; ++w)
            if ((key & high) == prefix[static_cast<std::size_t>(j * 2 + w)])
              ++counts[static_cast<std::size_t>((j * 2 + w) * 256 + ((key >> shift) & 0xffu))];
        }
      }
      group.sum(std::span<std::int64_t>(counts));
      for (std::int64_t q = 0; q < batch * 2; ++q) {
        const std::int64_t* c = counts.data() + q * 256;
        std::int64_t& k = rank[static_cast<std::size_t>(q)];
        std::uint32_t byte = 0;
        while (byte < 255 && k >= c[byte]) k -= c[byte++];  // k < the candidates left
        prefix[static_cast<std::size_t>(q)] |= byte << shift;
      }
    }
    for (std::int64_t j = 0; j < batch; ++j) {
      const auto upper =
          static_cast<double>(std::bit_cast<float>(prefix[static_cast<std::size_t>(j * 2)]));
      const auto lower =
          static_cast<double>(std::bit_cast<float>(prefix[static_cast<std::size_t>(j * 2 + 1)]));
      medians[static_cast<std::size_t>(r0 + j)] = n % 2 == 0 ? 0.5 * (upper + lower) : upper;
    }
  }
  return medians;
}

// Detection for templates and data read from the sources (not null once prepare_everywhere
// agreed, as for the stack in mfilter.cpp).
std::vector<Detection> detect_over_ranks(const Comm& comm, const io::TemplateSource* templates,
                                         const io::SampleSource* data,
                                         const mfilter::ArrayInfo& tinfo,
                                         const mfilter::ArrayInfo& dinfo, const MfOptions& options,
                                         const MfNetworkTables& network,
                                         const DetectOptions& detect, const MfSplit& split,
                                         MfPart* stack) {
  MfOptions o = options;
  o.network_sum = true;  // detection runs on the network stack, as in one process
  agree(comm, [&] { mfilter::validate_detect_options(detect, o.step); });
  const mfilter::Prepared p =
      mf::prepare_everywhere(comm, tinfo, dinfo, o, network, "mpi::matched_filter_detect");
  const mf::RankData rank_data = mf::data_factors(comm, *data, p);
  const int device = rank_device(comm), sharers = device_sharers(comm);
  const std::int64_t n = p.dims.n_corr, step = p.dims.step;
  // A GPU rank searches an absolute threshold on its device, chunk by chunk, when no caller wants
  // the stack part: a day's block of the network case is gigabytes that need not reach the host.
  const bool device_search = p.on_gpu && detect.type == ThresholdType::Absolute && stack == nullptr;
  MfShare s;
  // The block: the own columns and one more on each side (the neighbours of a local maximum).
  std::int64_t c0 = 0, c1 = 0;
  mfilter::Prepared problem;  // the block's: its templates and its window of the data
  Array block;
  std::vector<Detection> candidates;
  agree(comm, [&] {
    s = mf_share(comm.rank(), comm.size(), p.dims.templates, n, split, mfilter::group_granule(p));
  });
  const mf::GroupNetwork net =
      mf::group_network(comm, network, p, s.template_begin, s.template_end);
  agree(comm, [&] {
    mf::fault_hook(comm);
    if (s.empty()) return;
    c0 = std::max<std::int64_t>(0, s.time_begin - 1);
    c1 = std::min(n, s.time_end + 1);
    problem =
        mf::block_problem(p, mf::group_templates(*templates, p, s.template_begin, s.template_end),
                          net, rank_data, s.template_begin, s.template_end, c0, c1);
    problem.device_share = sharers;
    if (!device_search) {
      block = mf::compute_block(problem, device);
      return;
    }
    for (const Detection& d :
         mf::block_candidates(problem, s.template_begin, c0, step, device, detect))
      if (d.correlation_index >= s.time_begin && d.correlation_index < s.time_end)
        candidates.push_back(d);  // the neighbours' columns are their own ranks' candidates
  });
  const std::int64_t rows = s.template_end - s.template_begin, cols = c1 - c0;
  const std::int64_t first = s.time_begin - c0, own = s.time_end - s.time_begin;
  const float* values = s.empty() || device_search ? nullptr : block.data_as<float>();

  // The ranks of one template group hold its rows' time parts; idle ranks form a group of their
  // own that never reduces anything.
  const std::int64_t color = s.empty() ? s.template_groups : comm.rank() / s.time_parts;
  const Comm group = comm.split(static_cast<int>(color), comm.rank());
  std::vector<double> medians;
  if (!s.empty() && detect.type == ThresholdType::Mad)
    medians = row_medians(group, values, rows, cols, first, own, n);

  agree(comm, [&] {
    if (device_search) return;  // found on the device above
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t t = s.template_begin + r;
      double threshold = detect.threshold;
      if (detect.type == ThresholdType::Mad) {
        mfilter::check_mad_median(medians[static_cast<std::size_t>(r)], t, n, detect);
        threshold = detect.threshold * medians[static_cast<std::size_t>(r)];
      }
      const float* row = values + r * cols - c0;  // row[i] for i in [c0, c1)
      for (std::int64_t i = s.time_begin; i < s.time_end; ++i) {
        const float a = std::fabs(row[i]);
        if (!(a > threshold)) continue;
        if ((i > 0 && std::fabs(row[i - 1]) > a) || (i + 1 < n && std::fabs(row[i + 1]) > a))
          continue;  // not a local maximum (detect_peaks' rule: plateaus keep every point)
        candidates.push_back({t, i, i * step, static_cast<double>(row[i]), threshold, 0});
      }
    }
  });

  // Rank 0 declusters each template's candidates from every part together (so a part border
  // changes nothing), every rank receives the detections and counts the channels used by those
  // in its share from its window of the data.
  const auto gathered = comm.gather_bytes(mf::to_bytes(candidates), 0);
  std::vector<Detection> found;
  agree(comm, [&] {
    if (comm.rank() != 0) return;
    std::vector<Detection> all;
    for (const auto& bytes : gathered) {
      const auto some = mf::from_bytes(bytes);
      all.insert(all.end(), some.begin(), some.end());
    }
    std::stable_sort(all.begin(), all.end(), [](const Detection& x, const Detection& y) {
      return x.template_index < y.template_index;
    });
    const std::int64_t sep = mfilter::separation_in_correlations(detect.min_separation, step);
    for (auto begin = all.begin(); begin != all.end();) {
      const auto end = std::find_if(begin, all.end(), [&](const Detection& d) {
        return d.template_index != begin->template_index;
      });
      const auto kept = mfilter::decluster(std::vector<Detection>(begin, end), sep);
      found.insert(found.end(), kept.begin(), kept.end());
      begin = end;
    }
  });
  auto bytes = mf::to_bytes(found);
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  comm.broadcast(std::span<std::int64_t>(&size, 1), 0);
  bytes.resize(static_cast<std::size_t>(size));
  comm.broadcast_bytes(bytes.data(), size, 0);
  found = mf::from_bytes(bytes);
  std::vector<std::int64_t> used(found.size(), 0);
  agree(comm, [&] {
    if (s.empty()) return;
    std::vector<Detection> mine;  // in the block's own template and correlation indices
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < found.size(); ++i) {
      const Detection& d = found[i];
      if (d.template_index < s.template_begin || d.template_index >= s.template_end ||
          d.correlation_index < s.time_begin || d.correlation_index >= s.time_end)
        continue;
      mine.push_back(d);
      mine.back().template_index -= s.template_begin;
      mine.back().correlation_index -= c0;
      where.push_back(i);
    }
    mfilter::count_channels_used(mine, problem);
    for (std::size_t k = 0; k < mine.size(); ++k) used[where[k]] = mine[k].channels_used;
  });
  comm.sum(std::span<std::int64_t>(used));
  for (std::size_t i = 0; i < found.size(); ++i) found[i].channels_used = used[i];

  if (stack != nullptr) {
    stack->share = s;
    stack->full_shape = p.out_shape;
    stack->values = {};
    if (!s.empty()) {
      // The own columns of the block, without the neighbours taken for the local maxima.
      stack->values = Array(DType::f32, {rows, own});
      for (std::int64_t r = 0; r < rows; ++r)
        std::memcpy(stack->values.data_as<float>() + r * own, values + r * cols + first,
                    static_cast<std::size_t>(own) * sizeof(float));
    }
  }
  return found;
}

}  // namespace

std::vector<Detection> matched_filter_detect(const Comm& comm, const io::TemplateSource& templates,
                                             const io::SampleSource& data, const MfOptions& options,
                                             const MfNetworkTables& network,
                                             const DetectOptions& detect, const MfSplit& split,
                                             MfPart* stack) {
  return detect_over_ranks(comm, &templates, &data, mf::template_info(templates),
                           mf::data_info(data), options, network, detect, split, stack);
}

std::vector<Detection> matched_filter_detect(const Comm& comm, const Array& templates,
                                             const Array& data, const MfOptions& options,
                                             const MfNetwork& network, const DetectOptions& detect,
                                             const MfSplit& split, MfPart* stack) {
  const auto bank = mf::host_templates(comm, templates);
  const auto samples = mf::host_samples(comm, data);
  return detect_over_ranks(comm, bank.get(), samples.get(), mfilter::ArrayInfo::of(templates),
                           mfilter::ArrayInfo::of(data), options, network, detect, split, stack);
}

}  // namespace halfscope::mpi
