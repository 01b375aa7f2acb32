// Detection on the GPU (dispatch_cuda.cpp's detect_cuda) against the CPU and against itself
// unchunked: events planted at CC 0.72-0.75 (sim::simulate_seismic) found like on the CPU, and
// with an absolute threshold the chunked search equal to the whole one for events straddling a
// chunk boundary, peaks right after and right before one (the edge values lie on the slopes),
// a gap-dominated chunk, and chunk limits that would leave a tiny last chunk. Skips without a
// GPU.
// Built only with CUDA: a build without it has no GPU backends to test.
#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "detect_testing.hpp"
#include "gpu_testing.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "halfscope/sim/seismic.hpp"
#include "mfilter/chunking.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using mftest::ForcedChunks;

TEST(GpuDetectChunks, FindsEventsPlantedNearSevenTenthsLikeTheCpu) {
  HS_REQUIRE_GPU();
  const sim::SeismicSimulation s = mftest::near_threshold_events(MfNormalize::Short);
  const mftest::Case c = mftest::case_of(s);
  DetectOptions det;
  det.threshold = 8.0;
  det.min_separation = c.K;
  MfOptions cpu;
  cpu.device = DeviceKind::Cpu;
  cpu.precision = Precision::Single;
  const auto on_cpu = matched_filter_detect(s.templates, s.data, cpu, mftest::network_of(s), det);
  for (Precision p : {Precision::Mixed, Precision::BF16, Precision::Split}) {
    MfOptions o;
    o.device = DeviceKind::Cuda;
    o.precision = p;
    const double bound = mftest::stack_error_bound(
        c, mftest::method_error_bound(MfMethod::Tensor, p, c, MfNormalize::Short));
    // One chunk (the whole row's MAD, like the CPU) and equal chunks of about 15000.
    for (std::int64_t forced : {std::int64_t{0}, std::int64_t{15000}}) {
      const ForcedChunks chunks(forced);
      const auto got = matched_filter_detect(s.templates, s.data, o, mftest::network_of(s), det);
      const std::string what = std::string(precision_name(p)) + " chunk " + std::to_string(forced);
      mftest::expect_planted_events(got, s, bound, what);
      // Whole row: the CPU's MAD threshold (up to the stacks' rounding), the same detections.
      // Chunked, each chunk's threshold differs a little; the planted events alone must agree.
      // BF16's stack errs by up to ~8e-3: cross-talk peaks within that of the threshold could
      // go either way, so only the FP32-grade precisions are compared with the CPU.
      if (forced != 0 || p == Precision::BF16) continue;
      ASSERT_EQ(got.size(), on_cpu.size()) << what;
      for (std::size_t j = 0; j < got.size(); ++j)
        EXPECT_EQ(got[j].correlation_index, on_cpu[j].correlation_index) << what;
    }
  }
}

// Smooth templates (synthetic wavelets, so the stack rises and falls over several correlation
// times around an event) on three channels, events placed relative to the boundaries of the
// chunks that `forced` = 5000 gives (n = 19937: four chunks owning 4985 each, boundaries at
// 4985, 9970 and 14955), and the fourth chunk mostly a zero-filled gap.
mftest::Case boundary_case(std::vector<mftest::PlantedEvent>& events) {
  mftest::Case c = mftest::random_case(2, 3, 64, 20000, 41);
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    const auto w = sim::synthetic_wavelet(c.K, 100 + static_cast<std::uint64_t>(j));
    std::copy(w.begin(), w.end(), c.templates.begin() + j * c.K);
  }
  mftest::randomize_network(c, 0, 30, 7);
  for (auto& w : c.weights) w = 1.0;
  events = {{0, 4985, 1.0},       {1, 9969, 1.0},  {0, 4985 + 2000, 0.8},
            {1, 14955 - 30, 1.2}, {0, 12000, 1.0}, {1, 16000, 1.0}};
  mftest::plant_events(c, events, 0.05, 5);
  for (std::int64_t ch = 0; ch < c.C; ++ch)
    for (std::int64_t s = 15500; s < 19900; ++s) c.data[static_cast<std::size_t>(ch * c.L + s)] = 0;
  return mftest::rounded_to_float(c);
}

// The boundary case searched in split precision with an absolute threshold. Unit-energy
// wavelets, noise 0.05 per sample: an event's per-channel CC is about
// 1 / sqrt(1 + 64 * 0.05^2) = 0.93, its stack ~2.7 (~2.2 one correlation time off the peak); on
// noise alone the stack's standard deviation is sqrt(3 / K) = 0.22, so 1.5 is ~7 sigma. Every
// local maximum is kept (min_separation 0): an edge artefact cannot hide.
struct AbsoluteSearch {
  std::vector<mftest::PlantedEvent> events;
  mftest::Case c = boundary_case(events);
  Array t = mftest::to_array(c.templates, {c.T, c.C, c.K});
  Array x = mftest::to_array(c.data, {c.C, c.L});
  MfOptions o;
  DetectOptions det;
  double bound = mftest::stack_error_bound(
      c, mftest::method_error_bound(MfMethod::Tensor, Precision::Split, c, MfNormalize::Short));

  AbsoluteSearch() {
    o.device = DeviceKind::Cuda;
    o.precision = Precision::Split;
    det.type = ThresholdType::Absolute;
    det.threshold = 1.5;
    det.min_separation = 0;
  }
  [[nodiscard]] std::vector<Detection> run(const Array& data) const {
    return matched_filter_detect(t, data, o, mftest::network_of(c), det);
  }
};

TEST(GpuDetectChunks, ChunkedSearchEqualsTheWholeOneWithAnAbsoluteThreshold) {
  HS_REQUIRE_GPU();
  const AbsoluteSearch a;
  const mftest::Case& c = a.c;
  const std::int64_t n = c.L - c.K + 1;
  ASSERT_EQ(mfilter::plan_time_chunks(c.L, c.K, 1, n, 0, 30, 5000, 1)[1].own_begin(), 4985);
  std::vector<Detection> whole;
  {
    const ForcedChunks one(0);
    whole = a.run(a.x);
  }
  for (const auto& e : a.events) {
    if (e.sample >= 15500 - c.K - 30) continue;  // inside the zero-filled gap
    EXPECT_TRUE(std::any_of(
        whole.begin(), whole.end(),
        [&](const Detection& d) { return d.template_index == e.t && d.sample == e.sample; }))
        << "event of template " << e.t << " at " << e.sample;
  }
  // 5000: boundaries next to the events. 6645: three chunks of 6645 and one of 2 before equal
  // sizing. 997 and 37: many boundaries, some inside events' slopes by chance.
  for (std::int64_t forced :
       {std::int64_t{5000}, std::int64_t{6645}, std::int64_t{997}, std::int64_t{37}}) {
    const ForcedChunks chunks(forced);
    const auto got = a.run(a.x);
    ASSERT_EQ(got.size(), whole.size()) << "chunk " << forced;
    for (std::size_t j = 0; j < got.size(); ++j) {
      EXPECT_EQ(got[j].template_index, whole[j].template_index) << "chunk " << forced;
      EXPECT_EQ(got[j].correlation_index, whole[j].correlation_index) << "chunk " << forced;
      // The same windows computed in another chunk: equal within twice the method's bound.
      EXPECT_NEAR(got[j].value, whole[j].value, 2 * a.bound) << "chunk " << forced;
      EXPECT_EQ(got[j].channels_used, whole[j].channels_used) << "chunk " << forced;
    }
  }
}

TEST(GpuDetectChunks, AbsoluteThresholdSearchesChunksOfHostAndDeviceData) {
  // Detection with an absolute threshold never holds the whole stack: host data and data already
  // on the device are both searched in chunks of a fixed count of correlation times (forced small
  // here; 2^18 by default), and find what the whole search finds. Host and device data cut time
  // the same way, so their detections are equal bit for bit.
  HS_REQUIRE_GPU();
  const AbsoluteSearch a;
  const auto whole = a.run(a.x);
  ASSERT_FALSE(whole.empty());
  for (const std::int64_t per : {std::int64_t{4985}, std::int64_t{1234}}) {
    const mftest::ForcedDetectChunks chunks(per);
    const auto host = a.run(a.x);
    const auto device = a.run(a.x.to(Memory::device));
    ASSERT_EQ(host.size(), whole.size()) << per;
    ASSERT_EQ(device.size(), whole.size()) << per;
    for (std::size_t j = 0; j < whole.size(); ++j) {
      EXPECT_EQ(host[j].template_index, whole[j].template_index) << per;
      EXPECT_EQ(host[j].correlation_index, whole[j].correlation_index) << per;
      EXPECT_NEAR(host[j].value, whole[j].value, 2 * a.bound) << per;
      EXPECT_EQ(host[j].channels_used, whole[j].channels_used) << per;
      EXPECT_EQ(device[j].template_index, host[j].template_index) << per;
      EXPECT_EQ(device[j].correlation_index, host[j].correlation_index) << per;
      EXPECT_EQ(device[j].value, host[j].value) << per;
      EXPECT_EQ(device[j].channels_used, host[j].channels_used) << per;
    }
  }
}

TEST(GpuDetectChunks, MadThresholdOfAGapDominatedChunkIsRefused) {
  HS_REQUIRE_GPU();
  // With chunks of 4985 the fourth chunk is more than half zero-filled gap: its median |stack|
  // is 0, and a MAD threshold of 0 would make every local maximum a detection.
  std::vector<mftest::PlantedEvent> events;
  const mftest::Case c = boundary_case(events);
  MfOptions o;
  o.device = DeviceKind::Cuda;
  DetectOptions det;  // 8 x MAD
  det.min_separation = c.K;
  const ForcedChunks chunks(5000);
  EXPECT_THROW((void)matched_filter_detect(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                                           mftest::to_array(c.data, {c.C, c.L}), o,
                                           mftest::network_of(c), det),
               NumericalError);
}

}  // namespace
}  // namespace halfscope

#endif  // HALFSCOPE_WITH_CUDA
