// ConvPlan on the CPU: the same result as convolve2d with the same options, bit for bit (it runs
// the same methods on the same storage-typed kernel), a kernel of its own, and its errors.
// gpu_conv_plan.cpp checks it on device arrays.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "halfscope/conv.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

Array random(std::int64_t r, std::int64_t c, std::uint64_t seed) {
  return Array::from_values<float>(test::random_floats(r * c, -1.0f, 1.0f, seed), {r, c});
}

bool same_bits(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.nbytes())) == 0;
}

TEST(ConvPlan, MatchesConvolve2dBitForBitOnTheCpu) {
  const Array img = random(37, 29, 1);
  const Array ker = random(5, 4, 2);
  int checked = 0;
  for (ConvMethod m : {ConvMethod::Auto, ConvMethod::Direct, ConvMethod::FFT})
    for (Precision p : {Precision::Double, Precision::Single, Precision::Half, Precision::BF16})
      for (ConvMode mode : {ConvMode::Full, ConvMode::Same, ConvMode::Valid})
        for (bool correlate : {false, true}) {
          ConvOptions o;
          o.method = m;
          o.precision = p;
          o.mode = mode;
          o.correlate = correlate;
          o.boundary = mode == ConvMode::Same ? Boundary::Circular : Boundary::Zero;
          o.device = DeviceKind::Cpu;
          const ConvPlan plan(ker, o);
          const Array want = convolve2d(img, ker, o);
          EXPECT_TRUE(same_bits(plan(img), want))
              << conv_method_name(m) << " " << precision_name(p) << " " << conv_mode_name(mode)
              << (correlate ? " correlate" : "");
          Array out(want.dtype(), want.shape());
          plan.run(img, out);
          EXPECT_TRUE(same_bits(out, want));
          ++checked;
        }
  EXPECT_EQ(checked, 72);
}

// SciPy's valid mode swaps the inputs when the kernel is the larger: the plan's kernel then plays
// the image's part, as the array would.
TEST(ConvPlan, ValidModeSwapAsScipy) {
  ConvOptions o;
  o.mode = ConvMode::Valid;
  o.precision = Precision::Double;
  o.device = DeviceKind::Cpu;
  const Array small = random(4, 3, 3), big = random(11, 9, 4);
  const ConvPlan plan(big, o);
  const Array got = plan(small);
  EXPECT_EQ(got.shape(), (Shape{8, 7}));
  EXPECT_TRUE(same_bits(got, convolve2d(small, big, o)));
}

TEST(ConvPlan, KeepsItsOwnCopyOfTheKernel) {
  ConvOptions o;
  o.precision = Precision::Single;
  o.device = DeviceKind::Cpu;
  const Array img = random(16, 16, 5);
  Array ker = random(3, 3, 6);
  const Array before = convolve2d(img, ker, o);
  const ConvPlan plan(ker, o);
  ker.data_as<float>()[4] += 1.0f;  // the caller changes its array after planning
  EXPECT_TRUE(same_bits(plan(img), before));
}

TEST(ConvPlan, ErrorsNameTheProblem) {
  ConvOptions o;
  o.device = DeviceKind::Cpu;
  EXPECT_THROW(ConvPlan(Array(), o), InvalidInput);
  EXPECT_THROW(ConvPlan(random(1, 4, 7).reshape({4}), o), InvalidInput);
  // A kernel that FP16 cannot hold is reported when planning, as a call reports it.
  const Array huge = Array::from_values<float>(std::vector<float>(9, 1e6f), {3, 3});
  o.precision = Precision::Half;
  EXPECT_THROW(ConvPlan(huge, o), NumericalError);
  // A moved-from plan has no kernel.
  o.precision = Precision::Single;
  ConvPlan a(random(3, 3, 8), o);
  const ConvPlan b(std::move(a));
  try {
    (void)a(random(4, 4, 9));  // NOLINT(bugprone-use-after-move): the point of the test
    FAIL() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("moved"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b(random(4, 4, 9)).shape(), (Shape{6, 6}));
  // A method that does not run on the CPU is refused at the call, naming it.
  o.method = ConvMethod::Separable;
  const ConvPlan sep(random(3, 3, 10), o);
  EXPECT_THROW((void)sep(random(8, 8, 11)), Unsupported);
}

}  // namespace
}  // namespace halfscope
