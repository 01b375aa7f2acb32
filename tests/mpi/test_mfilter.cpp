// Matched filtering over MPI ranks (halfscope/mpi/mfilter.hpp): the grid covers the result once,
// the gathered result equals the one-process CPU call bit for bit (template groups and time
// parts, an idle rank, stack and per channel, every precision whose arithmetic per element does not
// depend on the split), and a failure on one rank (bad input, different shapes, the fault hook)
// reaches every rank as the same typed error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "test_mfilter_inputs.hpp"

namespace halfscope::mpi {
namespace {

using testing::bit_identical;
using testing::make_inputs;

TEST(MpiMfShare, GridCoversEveryCellOnce) {
  for (const int ranks : {1, 2, 3, 4, 5, 8})
    for (const std::int64_t T : {1, 16, 17, 40, 100})
      for (const std::int64_t n : {1, 3, 700})
        for (const std::int64_t parts : {0, 1, ranks})
          for (const std::int64_t granule : {16, 64}) {
            std::vector<int> covered(static_cast<std::size_t>(T * n), 0);
            for (int r = 0; r < ranks; ++r) {
              const MfShare s = mf_share(r, ranks, T, n, {parts}, granule);
              ASSERT_LE(s.template_groups * s.time_parts, ranks);
              // Groups start on the template tile of the one-GPU kernel (16, or 64 for wgmma).
              EXPECT_EQ(s.template_begin % granule, 0);
              for (std::int64_t t = s.template_begin; t < s.template_end; ++t)
                for (std::int64_t i = s.time_begin; i < s.time_end; ++i)
                  ++covered[static_cast<std::size_t>(t * n + i)];
            }
            for (std::size_t c = 0; c < covered.size(); ++c)
              ASSERT_EQ(covered[c], 1)
                  << ranks << " ranks, " << T << " templates, n " << n << ", time_parts " << parts
                  << ", granule " << granule << ": cell " << c;
          }
  // The automatic grid: templates first, time parts when the 16-template groups run out.
  const auto grid = [](int ranks, std::int64_t T) {
    const MfShare s = mf_share(0, ranks, T, 1000);
    return std::pair{s.template_groups, s.time_parts};
  };
  EXPECT_EQ(grid(4, 100), (std::pair<std::int64_t, std::int64_t>{4, 1}));
  EXPECT_EQ(grid(4, 40), (std::pair<std::int64_t, std::int64_t>{2, 2}));
  EXPECT_EQ(grid(4, 3), (std::pair<std::int64_t, std::int64_t>{1, 4}));
  EXPECT_EQ(grid(3, 20), (std::pair<std::int64_t, std::int64_t>{1, 3}));
  // Groups of 64 (the wgmma kernel's): 100 templates are 2 groups, so 4 ranks take 2 x 2.
  const MfShare wide = mf_share(3, 4, 100, 1000, {}, 64);
  EXPECT_EQ((std::pair{wide.template_groups, wide.time_parts}),
            (std::pair<std::int64_t, std::int64_t>{2, 2}));
  EXPECT_EQ(wide.template_begin, 64);
  EXPECT_THROW((void)mf_share(0, 2, 40, 1000, {}, 0), InvalidInput);
  EXPECT_THROW((void)mf_share(0, 2, 40, 1000, {3}), InvalidInput);
  EXPECT_THROW((void)mf_share(2, 2, 40, 1000), InvalidInput);
}

constexpr std::int64_t kPerRank = -1;

struct StackCase {
  Precision precision;
  MfNormalize normalize;
  bool network_sum;
  // MfSplit::time_parts: 0 the automatic grid, 1 template groups only (at 4 ranks 3 groups of
  // the 40 templates, one rank idle), kPerRank one time part per rank.
  std::int64_t time_parts;
};

TEST(MpiMfilter, GatheredResultEqualsOneProcessBitForBit) {
  const Comm world = Comm::world();
  // 40 templates (3 tiles of 16) over 9000 samples: more than kRecomputeEvery (4096) windows, so
  // time parts start inside the running energies' second span; moveouts reach 8 samples before
  // the data.
  const auto in = make_inputs(40, 3, 40, 9000, 8);
  const std::vector<StackCase> cases{
      {Precision::Double, MfNormalize::Short, true, 0},
      {Precision::Single, MfNormalize::Full, true, kPerRank},
      {Precision::Single, MfNormalize::Short, false, kPerRank},
      {Precision::Single, MfNormalize::Short, true, 1},
      {Precision::Mixed, MfNormalize::Short, true, kPerRank},
      {Precision::Split, MfNormalize::Full, true, 0},
      {Precision::BF16, MfNormalize::Full, false, kPerRank},
  };
  for (const StackCase& c : cases) {
    SCOPED_TRACE(std::string(precision_name(c.precision)) + " " +
                 std::string(mf_normalize_name(c.normalize)) +
                 (c.network_sum ? " stack" : " per channel") + ", time_parts " +
                 std::to_string(c.time_parts));
    MfOptions o;
    o.device = DeviceKind::Cpu;
    o.precision = c.precision;
    o.normalize = c.normalize;
    o.network_sum = c.network_sum;
    const MfSplit split{c.time_parts == kPerRank ? world.size() : c.time_parts};
    const MfPart part = matched_filter(world, in.templates, in.data, o, in.network, split);
    const MfShare expect = mf_share(world.rank(), world.size(), 40, part.full_shape.back(), split);
    EXPECT_EQ(part.share.template_begin, expect.template_begin);
    EXPECT_EQ(part.share.time_end, expect.time_end);
    const Array whole = gather_result(world, part, 0);
    if (world.rank() == 0)
      EXPECT_TRUE(
          bit_identical(halfscope::matched_filter(in.templates, in.data, o, in.network), whole));
    else
      EXPECT_TRUE(whole.empty());
  }
}

// Runs `call` on every rank, expecting every rank to throw an E with one message (rank 0's,
// broadcast), agreed (mpi::agree: the CLI reports it once), which names the failing rank and
// contains `text`.
template <class E, class F>
void expect_agreed(const Comm& world, int failing, const std::string& text, F&& call) {
  std::string message;
  try {
    call();
    ADD_FAILURE() << "no error on rank " << world.rank();
  } catch (const E& e) {
    message = e.what();
    EXPECT_TRUE(failure_was_agreed(e.what())) << e.what();
  }
  EXPECT_EQ(message.rfind("MPI rank " + std::to_string(failing) + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(text), std::string::npos) << message;
  EXPECT_EQ(world.broadcast_string(message, 0), message);
}

TEST(MpiMfilter, BadInputOnOneRankIsEveryRanksError) {
  const Comm world = Comm::world();
  const int last = world.size() - 1;
  const auto in = make_inputs(20, 2, 16, 600, 0);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  Array data = in.data.clone();
  if (world.rank() == last) data.data_as<double>()[600 + 77] = std::nan("");
  expect_agreed<InvalidInput>(world, last, "sample 77", [&] {
    (void)matched_filter(world, in.templates, data, o, in.network);
  });
  expect_agreed<InvalidInput>(world, last, "sample 77", [&] {
    (void)matched_filter_detect(world, in.templates, data, o, in.network, {});
  });
  // options.devices: each GPU rank takes one device, a list is refused on every rank.
  MfOptions listed = o;
  listed.devices = {0};
  expect_agreed<InvalidInput>(world, 0, "options.devices", [&] {
    (void)matched_filter(world, in.templates, in.data, listed, in.network);
  });
  // After the failures every rank is still in step: a good call works.
  const MfPart part = matched_filter(world, in.templates, in.data, o, in.network);
  EXPECT_EQ(gather_result(world, part, 0).empty(), world.rank() != 0);
}

TEST(MpiMfilter, LevelRoundingIsReportedByTheRankWhoseBlockHoldsTheWindow) {
  // A plateau of 500 (noise 0.25 there) on channel 1 from sample 7000, K + 20 samples long: in
  // full normalization with BF16 operands its windows round to the plateau's level (bounds ~8,
  // mfilter/level_check.hpp), the windows elsewhere stay under the bound. Each rank checks the
  // windows of its own block, so the lowest rank whose block reaches window 7000 reports it.
  const Comm world = Comm::world();
  constexpr std::int64_t T = 20, K = 16, L = 9000, at = 7000, spread = 22;
  const auto in = make_inputs(T, 2, K, L, 0);
  Array data = in.data.clone();
  for (std::int64_t s = at; s < at + K + 20; ++s) data.data_as<double>()[L + s] += 500.0;
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.precision = Precision::BF16;
  o.normalize = MfNormalize::Full;
  const MfSplit split{world.size()};
  int failing = -1;
  for (int r = 0; r < world.size() && failing < 0; ++r) {
    const MfShare s = mf_share(r, world.size(), T, L - K + 1, split);
    if (!s.empty() && s.time_end - 1 + spread >= at) failing = r;
  }
  expect_agreed<NumericalError>(
      world, failing, "channel 1, the window of 16 samples at sample 7000 ",
      [&] { (void)matched_filter(world, in.templates, data, o, in.network, split); });
  // The one-process call names the same window.
  EXPECT_THROW((void)halfscope::matched_filter(in.templates, data, o, in.network), NumericalError);
  MfOptions split_precision = o;
  split_precision.precision = Precision::Split;
  const MfPart part = matched_filter(world, in.templates, data, split_precision, in.network, split);
  EXPECT_EQ(gather_result(world, part, 0).empty(), world.rank() != 0);
}

TEST(MpiMfilter, RanksHoldingOtherShapesAreRefusedEverywhere) {
  const Comm world = Comm::world();
  if (world.size() == 1) GTEST_SKIP() << "needs two ranks to hold different inputs";
  const auto in = make_inputs(20, 2, 16, 600, 0);
  const Array data = world.rank() == 1 ? in.data.slice(1, 0, 500).contiguous() : in.data;
  MfOptions o;
  o.device = DeviceKind::Cpu;
  // Every rank sees the mismatch, so the lowest failing rank is rank 0.
  expect_agreed<InvalidInput>(world, 0, "data samples from 500 to 600", [&] {
    (void)matched_filter(world, in.templates, data, o, in.network);
  });
}

TEST(MpiMfilter, InjectedFaultOnOneRankEndsTheCallOnEvery) {
  const Comm world = Comm::world();
  const int last = world.size() - 1;
  const auto in = make_inputs(20, 2, 16, 600, 0);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  ::setenv("HALFSCOPE_FAULT_RANK", std::to_string(last).c_str(), 1);
  expect_agreed<Error>(world, last, "fault injected on MPI rank " + std::to_string(last),
                       [&] { (void)matched_filter(world, in.templates, in.data, o, in.network); });
  expect_agreed<Error>(world, last, "fault injected", [&] {
    (void)matched_filter_detect(world, in.templates, in.data, o, in.network, {});
  });
  ::setenv("HALFSCOPE_FAULT_RANK", "one", 1);
  expect_agreed<InvalidInput>(world, 0, "expected a rank number", [&] {
    (void)matched_filter(world, in.templates, in.data, o, in.network);
  });
  ::unsetenv("HALFSCOPE_FAULT_RANK");
  EXPECT_NO_THROW((void)matched_filter(world, in.templates, in.data, o, in.network));
}

}  // namespace
}  // namespace halfscope::mpi
