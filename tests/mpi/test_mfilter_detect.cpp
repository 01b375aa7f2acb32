// Detection over MPI ranks (mpi::matched_filter_detect): the detections every rank receives equal
// the one-process CPU call's field for field, with events planted on the borders of the time
// parts of 2 and 4 ranks (a local maximum and the declustering see across a border), MAD
// thresholds over rows of odd and even length, absolute thresholds, a step of 2, ranks the grid
// leaves idle, and the stack part a rank keeps; a zero MAD threshold on one rank's template is
// every rank's error. On a machine with GPUs, GPU ranks searching an absolute threshold on their
// devices find the one-process GPU call's detections.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "test_mfilter_inputs.hpp"

namespace halfscope::mpi {
namespace {

using testing::bit_identical;
using testing::make_inputs;
using testing::same_detections;

constexpr std::int64_t kTemplates = 20, kChannels = 3, kLength = 32;
constexpr std::int64_t kPerRank = -1;

// The first correlation time of each time part but the first, for 2 and 4 parts of n.
std::vector<std::int64_t> part_borders(std::int64_t n) {
  std::vector<std::int64_t> borders;
  for (const int parts : {2, 4})
    for (int r = 1; r < parts; ++r) borders.push_back(mf_share(r, parts, 1, n, {parts}).time_begin);
  return borders;
}

struct DetectCase {
  Precision precision;
  MfNormalize normalize;
  DetectOptions detect;
  std::int64_t samples, step;
  std::int64_t time_parts;  // MfSplit's; kPerRank: one time part per rank
};

TEST(MpiMfilterDetect, DetectionsEqualOneProcessAcrossPartBorders) {
  const Comm world = Comm::world();
  const std::vector<DetectCase> cases{
      {Precision::Single, MfNormalize::Short, {8.0, ThresholdType::Mad, 10}, 8000, 1, kPerRank},
      {Precision::Double, MfNormalize::Full, {1.0, ThresholdType::Absolute, 0}, 8001, 1, 0},
      // Template groups only: at 4 ranks the 2 groups of 20 templates leave 2 ranks idle.
      {Precision::Single, MfNormalize::Full, {7.0, ThresholdType::Mad, 5}, 8001, 1, 1},
      {Precision::Mixed, MfNormalize::Short, {6.0, ThresholdType::Mad, 40}, 8000, 2, kPerRank},
  };
  for (const DetectCase& c : cases) {
    const std::int64_t n = mf_correlation_count(c.samples, kLength, c.step);
    SCOPED_TRACE(std::string(precision_name(c.precision)) + ", " +
                 std::string(threshold_type_name(c.detect.type)) + ", n " + std::to_string(n) +
                 ", step " + std::to_string(c.step));
    // Template 0 planted on the first border of 4 parts, template 1 one correlation time
    // before and after the border of 2 parts (within one of the middle border of 4), template 2
    // three correlation times before and after the last border of 4 (pairs that the minimum
    // separation declusters).
    const std::vector<std::int64_t> borders = part_borders(n);
    ASSERT_EQ(borders.size(), 4u);
    const std::int64_t b0 = borders[1], b1 = borders[0], b2 = borders[3];
    const std::vector<std::vector<std::int64_t>> plants{{b0 * c.step},
                                                        {(b1 - 1) * c.step, (b1 + 1) * c.step},
                                                        {(b2 - 3) * c.step, (b2 + 3) * c.step}};
    const auto in = make_inputs(kTemplates, kChannels, kLength, c.samples, 4, plants);
    MfOptions o;
    o.device = DeviceKind::Cpu;
    o.precision = c.precision;
    o.normalize = c.normalize;
    o.step = c.step;
    const auto expected =
        halfscope::matched_filter_detect(in.templates, in.data, o, in.network, c.detect);
    // Not vacuous: each planted template is found at its border.
    for (std::int64_t t = 0; t < 3; ++t) {
      const std::int64_t at = std::array{b0, b1, b2}[static_cast<std::size_t>(t)];
      EXPECT_TRUE(std::any_of(expected.begin(), expected.end(),
                              [&](const Detection& d) {
                                return d.template_index == t &&
                                       std::abs(d.correlation_index - at) <= 3;
                              }))
          << "no planted detection of template " << t << " near " << at;
    }
    const MfSplit split{c.time_parts == kPerRank ? world.size() : c.time_parts};
    MfPart stack;
    const auto found =
        matched_filter_detect(world, in.templates, in.data, o, in.network, c.detect, split, &stack);
    EXPECT_TRUE(same_detections(expected, found));
    // The stack part a rank keeps is its share of the one-process stack.
    const Array whole = gather_result(world, stack, 0);
    if (world.rank() == 0) {
      EXPECT_TRUE(
          bit_identical(halfscope::matched_filter(in.templates, in.data, o, in.network), whole));
    }
  }
}

// GPU ranks (each on its host's device rank % devices) search an absolute threshold on their
// devices, never bringing a stack part to the host. With template groups only, every group runs
// the one-process call's kernels on its rows (groups of 64 for the wgmma network kernel in
// mixed, of 16 in split) and the same time chunks: the detections equal the one-process GPU
// call's field for field. With a time part per rank, a part tiles its time from its own start, so
// the values differ within the precision's rounding of the stack (about the unit roundoff of the
// operands times the sum of the weights) and nothing else. The host search of the same blocks
// (the stack part asked for) finds the same detections as the device search.
TEST(MpiMfilterDetect, GpuRanksSearchAbsoluteThresholdsOnTheirDevices) {
  const Comm world = Comm::world();
  if (query_devices().devices.empty()) GTEST_SKIP() << "no CUDA device";
  constexpr std::int64_t T = 150, C = 3, K = 32, L = 8000;
  const std::int64_t n = mf_correlation_count(L, K, 1);
  const std::vector<std::int64_t> borders = part_borders(n);
  // One planted template in each 64-template group: on the borders of 2 and 4 time parts.
  std::vector<std::vector<std::int64_t>> plants(T);
  plants[0] = {borders[0]};
  plants[70] = {borders[1] - 1, borders[2] + 1};
  plants[140] = {borders[3]};
  auto in = make_inputs(T, C, K, L, 4, plants);
  // Weights of 1 on the planted templates: their stacks peak near C x 0.95 (a copy at 3x the
  // noise), well above the threshold; noise stacks stay below about 1.2 (5 sigma).
  for (const std::int64_t t : {0, 70, 140})
    for (std::int64_t c = 0; c < C; ++c) in.network.weights.data_as<double>()[t * C + c] = 1.0;
  const DetectOptions absolute{1.5, ThresholdType::Absolute, 20};
  for (const Precision precision : {Precision::Mixed, Precision::Split}) {
    SCOPED_TRACE(std::string(precision_name(precision)));
    MfOptions o;
    o.device = DeviceKind::Cuda;
    o.method = MfMethod::Tensor;
    o.precision = precision;
    const auto expected =
        halfscope::matched_filter_detect(in.templates, in.data, o, in.network, absolute);
    for (const std::int64_t t : {0, 70, 140})
      EXPECT_TRUE(std::any_of(expected.begin(), expected.end(),
                              [&](const Detection& d) { return d.template_index == t; }))
          << "planted template " << t << " not found";
    // Template groups only.
    EXPECT_TRUE(same_detections(expected, matched_filter_detect(world, in.templates, in.data, o,
                                                                in.network, absolute, MfSplit{1})));
    // A time part per rank: within 8 unit roundoffs of the operands times the sum of the weights
    // of a template (at most C).
    const double u = precision == Precision::Mixed ? 0x1p-11 : 0x1p-20;
    const MfSplit per_rank{world.size()};
    const auto on_devices =
        matched_filter_detect(world, in.templates, in.data, o, in.network, absolute, per_rank);
    EXPECT_TRUE(same_detections(expected, on_devices, 8 * u * C));
    MfPart part;
    EXPECT_TRUE(
        same_detections(on_devices, matched_filter_detect(world, in.templates, in.data, o,
                                                          in.network, absolute, per_rank, &part)));
  }
}

TEST(MpiMfilterDetect, ZeroMadThresholdOnOneRanksTemplateIsEveryRanksError) {
  const Comm world = Comm::world();
  auto in = make_inputs(kTemplates, kChannels, kLength, 2000, 0);
  // Template 19 (in the last group) has only zero weights: its stack row is 0, its median too.
  for (std::int64_t ch = 0; ch < kChannels; ++ch)
    in.network.weights.data_as<double>()[19 * kChannels + ch] = 0.0;
  MfOptions o;
  o.device = DeviceKind::Cpu;
  const DetectOptions mad{8.0, ThresholdType::Mad, 1};
  std::string one_process;
  try {
    (void)halfscope::matched_filter_detect(in.templates, in.data, o, in.network, mad);
  } catch (const NumericalError& e) {
    one_process = e.what();
  }
  ASSERT_NE(one_process.find("template 19"), std::string::npos) << one_process;
  std::string message;
  try {
    (void)matched_filter_detect(world, in.templates, in.data, o, in.network, mad);
    ADD_FAILURE() << "no error on rank " << world.rank();
  } catch (const NumericalError& e) {
    message = e.what();
  }
  // The agreed message is the one-process message behind the failing rank's prefix.
  EXPECT_EQ(message.substr(message.find(": ") + 2), one_process);
  EXPECT_EQ(world.broadcast_string(message, 0), message);
}

}  // namespace
}  // namespace halfscope::mpi
