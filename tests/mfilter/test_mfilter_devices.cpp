// Matched filtering over several devices, the parts that need no GPU: the template groups
// (contiguous, covering, balanced) and the checks of MfOptions::devices on calls that cannot use
// them (a CPU method; a build without CUDA).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/devices.hpp"
#include "mfilter_testing.hpp"

namespace halfscope::mfilter {
namespace {

TEST(MfilterDevices, TemplateRangesAreContiguousCoveringAndBalanced) {
  for (std::int64_t t : {1, 2, 3, 7, 16, 101}) {
    for (std::int64_t parts : {1, 2, 3, 4, 8, 200}) {
      const auto r = template_ranges(t, parts);
      ASSERT_EQ(static_cast<std::int64_t>(r.size()), std::min(t, parts)) << t << " " << parts;
      std::int64_t next = 0, smallest = t, largest = 0;
      for (const auto& [a, b] : r) {
        EXPECT_EQ(a, next);
        EXPECT_GT(b, a);
        smallest = std::min(smallest, b - a);
        largest = std::max(largest, b - a);
        next = b;
      }
      EXPECT_EQ(next, t);
      EXPECT_LE(largest - smallest, 1) << t << " templates in " << parts;
    }
  }
}

TEST(MfilterDevices, TemplateRangesAlignToTheGranule) {
  for (std::int64_t t : {1, 15, 16, 17, 40, 1000}) {
    for (std::int64_t parts : {1, 2, 3, 4}) {
      const auto r = template_ranges(t, parts, 16);
      const std::int64_t units = (t + 15) / 16;
      ASSERT_EQ(static_cast<std::int64_t>(r.size()), std::min(parts, units)) << t << " " << parts;
      std::int64_t next = 0, smallest = units, largest = 0;
      for (std::size_t g = 0; g < r.size(); ++g) {
        EXPECT_EQ(r[g].first, next);
        EXPECT_EQ(r[g].first % 16, 0);  // every group starts on a tile of 16 templates
        const std::int64_t u = (r[g].second - r[g].first + 15) / 16;
        if (g + 1 < r.size()) {
          EXPECT_EQ((r[g].second - r[g].first) % 16, 0);
          smallest = std::min(smallest, u);
        }
        largest = std::max(largest, u);
        next = r[g].second;
      }
      EXPECT_EQ(next, t);
      if (r.size() > 1) {
        EXPECT_LE(largest - smallest, 1) << t << " templates in " << parts;
      }
    }
  }
}

TEST(MfilterDevices, TemplateRangesRejectEmptyInputs) {
  EXPECT_THROW((void)template_ranges(0, 2), InvalidInput);
  EXPECT_THROW((void)template_ranges(3, 0), InvalidInput);
  EXPECT_THROW((void)template_ranges(3, 2, 0), InvalidInput);
}

TEST(MfilterDevices, DevicesOnACpuCallAreRejected) {
  const mftest::Case c = mftest::random_case(3, 2, 16, 200, 11);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.devices = {0};
  try {
    (void)matched_filter(mftest::to_array(c.templates, {c.T, c.C, c.K}),
                         mftest::to_array(c.data, {c.C, c.L}), o);
    FAIL() << "devices on a CPU call must be rejected";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("runs on the CPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace halfscope::mfilter
