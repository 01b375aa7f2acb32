// The data of matched filtering over MPI ranks (mfilter_share.hpp: data_factors, block_window's
// data): each rank reads a 1/N slice of every channel for the whole-channel facts and then only
// the window its block needs, converted exactly as the one-process preparation converts it.
#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "mfilter/data_factors.hpp"
#include "mpi/mfilter_share.hpp"

namespace halfscope::mpi::mf {

namespace {

using mfilter::ChannelFactors;
using mfilter::kSumBlock;
using mfilter::RangeScan;

// Samples per channel read at a time while scanning: about 256 MiB for all channels, in whole
// sum blocks.
std::int64_t piece_samples(std::int64_t channels, DType type) {
  const std::int64_t per_sample = channels * dtype_size(type);
  return std::max<std::int64_t>(1, (std::int64_t{256} << 20) / per_sample / kSumBlock) * kSumBlock;
}

// The sum blocks [first, last) whose samples rank `rank` of `ranks` scans (whole blocks, so the
// chained sums below add exactly the one-process terms).
std::pair<std::int64_t, std::int64_t> scan_blocks(int rank, int ranks, std::int64_t blocks) {
  return {rank * blocks / ranks, (rank + 1) * blocks / ranks};
}

// A key whose signed order is the order of the doubles (infinities included; -0 below +0).
std::int64_t order_key(double x) {
  const auto i = std::bit_cast<std::int64_t>(x);
  return i < 0 ? i ^ std::numeric_limits<std::int64_t>::max() : i;
}
double from_order_key(std::int64_t k) {
  return std::bit_cast<double>(k < 0 ? k ^ std::numeric_limits<std::int64_t>::max() : k);
}

// This rank's scans of its blocks and, in full normalization, the sums of its blocks (x * pre,
// pre[c] for each channel, row-major channel x block). `only`: recompute only the channels
// flagged (the second pass where pre is not 1).
void scan_slice(const io::SampleSource& data, std::int64_t b0, std::int64_t b1, bool sums_wanted,
                const std::vector<double>& pre, const std::vector<char>* only,
                std::vector<RangeScan>& scans, std::vector<double>& sums) {
  const Shape shape = data.shape();
  const std::int64_t C = shape[0], L = shape[1], blocks = b1 - b0;
  const std::int64_t first = b0 * kSumBlock, last = std::min(b1 * kSumBlock, L);
  const std::int64_t piece = piece_samples(C, data.dtype());
  for (std::int64_t s = first; s < last; s += piece) {
    const std::int64_t e = std::min(last, s + piece), n = e - s;
    const Array x = data.read(s, e);
    const auto run = [&](const auto* v) {
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < C; ++c) {
        if (only != nullptr && (*only)[static_cast<std::size_t>(c)] == 0) continue;
        const auto* row = v + c * n;
        if (only == nullptr)
          scans[static_cast<std::size_t>(c)].merge(mfilter::scan_range(row, n, s));
        if (!sums_wanted) continue;
        for (std::int64_t k = 0; k < n; k += kSumBlock)
          sums[static_cast<std::size_t>(c * blocks + (s + k) / kSumBlock - b0)] =
              mfilter::block_sum(row + k, std::min(kSumBlock, n - k),
                                 pre[static_cast<std::size_t>(c)]);
      }
    };
    if (x.dtype() == DType::f32)
      run(x.data_as<float>());
    else
      run(x.data_as<double>());
  }
}

}  // namespace

RankData data_factors(const Comm& comm, const io::SampleSource& data, const mfilter::Prepared& p) {
  const Shape shape = data.shape();
  const std::int64_t C = shape[0], L = shape[1];
  const auto nc = static_cast<std::size_t>(C);
  const bool full = p.dims.normalize == MfNormalize::Full;
  const std::int64_t blocks = (L + kSumBlock - 1) / kSumBlock;
  // Plain variables, not a structured binding: lambdas below capture them (clang before 16).
  const std::pair<std::int64_t, std::int64_t> mine = scan_blocks(comm.rank(), comm.size(), blocks);
  const std::int64_t b0 = mine.first, b1 = mine.second;
  std::vector<RangeScan> scans(nc);
  std::vector<double> sums(full ? nc * static_cast<std::size_t>(b1 - b0) : 0);
  std::vector<double> pre(nc, 1.0);
  agree(comm, [&] { scan_slice(data, b0, b1, full, pre, nullptr, scans, sums); });

  // The whole channels' ranges and first bad samples: maxima of order keys over the ranks.
  std::vector<std::int64_t> keys(3 * nc);
  for (std::size_t c = 0; c < nc; ++c) {
    keys[3 * c] = order_key(scans[c].max);
    keys[3 * c + 1] = order_key(-scans[c].min);
    keys[3 * c + 2] = scans[c].first_bad >= 0 ? L - scans[c].first_bad : 0;
  }
  comm.max(std::span<std::int64_t>(keys));
  std::vector<RangeScan> whole(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    whole[c].max = from_order_key(keys[3 * c]);
    whole[c].min = -from_order_key(keys[3 * c + 1]);
    whole[c].first_bad = keys[3 * c + 2] > 0 ? L - keys[3 * c + 2] : -1;
  }
  // The lowest channel with a non-finite sample names it, as one process would, and the rank
  // whose slice holds that sample reports it (the error of every rank, agreed).
  const auto bad =
      std::find_if(whole.begin(), whole.end(), [](const RangeScan& s) { return s.first_bad >= 0; });
  if (bad != whole.end()) {
    const auto c = static_cast<std::size_t>(bad - whole.begin());
    const std::int64_t block = bad->first_bad / kSumBlock;
    int owner = 0;
    while (scan_blocks(owner, comm.size(), blocks).second <= block) ++owner;
    agree(comm, [&] {
      if (comm.rank() == owner)
        throw InvalidInput(mfilter::bad_sample_message(data.name(), static_cast<std::int64_t>(c),
                                                       bad->first_bad, scans[c].bad_value));
    });
  }

  RankData out{&data, std::vector<ChannelFactors>(nc)};
  for (std::size_t c = 0; c < nc; ++c) pre[c] = mfilter::pre_factor(whole[c]);
  std::vector<double> mean(nc, 0.0);
  if (full) {
    // Sums of x * pre, pre being 1 but for float64 data beyond 2^+-960: those channels again.
    std::vector<char> again(nc, 0);
    for (std::size_t c = 0; c < nc; ++c) again[c] = pre[c] != 1.0;
    if (std::any_of(again.begin(), again.end(), [](char a) { return a != 0; }))
      agree(comm, [&] { scan_slice(data, b0, b1, true, pre, &again, scans, sums); });
    // The block sums in block order, handed from rank to rank: exactly the one-process sum.
    constexpr int kTagSums = 0x6d662;
    std::vector<double> running(nc, 0.0);
    const auto bytes = static_cast<std::int64_t>(nc * sizeof(double));
    if (comm.rank() > 0) comm.receive_bytes(running.data(), bytes, comm.rank() - 1, kTagSums);
    for (std::size_t c = 0; c < nc; ++c)
      for (std::int64_t j = 0; j < b1 - b0; ++j)
        running[c] += sums[c * static_cast<std::size_t>(b1 - b0) + static_cast<std::size_t>(j)];
    if (comm.rank() + 1 < comm.size())
      comm.send_bytes(running.data(), bytes, comm.rank() + 1, kTagSums);
    comm.broadcast(std::span<double>(running), comm.size() - 1);
    for (std::size_t c = 0; c < nc; ++c) mean[c] = running[c] / static_cast<double>(L);
  }
  for (std::size_t c = 0; c < nc; ++c)
    out.factors[c] = mfilter::channel_factors(whole[c], pre[c], mean[c]);
  return out;
}

Array prepared_window(const RankData& data, std::int64_t a, std::int64_t b, DType want) {
  const std::int64_t C = data.source->shape()[0], n = b - a;
  const Array x = data.source->read(a, b);
  // Samples that need no conversion are used as read (as the one-process preparation uses the
  // caller's array): no second copy of the window.
  const bool as_read =
      x.dtype() == want && std::none_of(data.factors.begin(), data.factors.end(),
                                        [](const ChannelFactors& f) { return f.changes(); });
  Array out = as_read ? x : Array(want, {C, n});
  // The window is checked again: the whole-channel scan read other ranks' samples, so a
  // non-finite sample here means this rank's data differ from theirs (or the file changed).
  const std::vector<RangeScan> scans = mfilter::scan_rows(x, a);
  for (std::int64_t c = 0; c < C; ++c)
    if (const RangeScan& s = scans[static_cast<std::size_t>(c)]; s.first_bad >= 0)
      throw InvalidInput(
          mfilter::bad_sample_message(data.source->name(), c, s.first_bad, s.bad_value) +
          " (found in this rank's window, not by the scan of the whole channel: do the ranks "
          "hold the same data?)");
  if (!as_read) mfilter::convert_rows(x, data.factors, out);
  return out;
}

}  // namespace halfscope::mpi::mf
