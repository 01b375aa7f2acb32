// convolve2d's dispatch: shapes, names, errors, and what it does with values that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "halfscope/conv.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope {
namespace {

ConvOptions cpu(ConvMethod m, Precision p) {
  ConvOptions o;
  o.method = m;
  o.precision = p;
  o.device = DeviceKind::Cpu;
  o.mode = ConvMode::Same;
  return o;
}

TEST(ConvDispatch, OutputShapesFollowScipy) {
  EXPECT_EQ(conv_output_shape(10, 20, 3, 5, ConvMode::Full),
            std::make_pair(std::int64_t{12}, std::int64_t{24}));
  EXPECT_EQ(conv_output_shape(10, 20, 3, 5, ConvMode::Same),
            std::make_pair(std::int64_t{10}, std::int64_t{20}));
  EXPECT_EQ(conv_output_shape(10, 20, 3, 5, ConvMode::Valid),
            std::make_pair(std::int64_t{8}, std::int64_t{16}));
  EXPECT_EQ(conv_output_shape(3, 5, 10, 20, ConvMode::Valid),
            std::make_pair(std::int64_t{8}, std::int64_t{16}));
  EXPECT_THROW((void)conv_output_shape(3, 30, 10, 20, ConvMode::Valid), InvalidInput);
  EXPECT_THROW((void)conv_output_shape(0, 3, 1, 1, ConvMode::Full), InvalidInput);
}

TEST(ConvDispatch, NamesRoundTripAndUnknownNamesListTheChoices) {
  for (auto m : {ConvMethod::Auto, ConvMethod::Direct, ConvMethod::FFT, ConvMethod::Naive,
                 ConvMethod::Register, ConvMethod::Gemm, ConvMethod::Cudnn, ConvMethod::Tensor,
                 ConvMethod::Separable})
    EXPECT_EQ(parse_conv_method(conv_method_name(m)), m);
  EXPECT_EQ(parse_boundary("wrap"), Boundary::Circular);  // SciPy's name
  try {
    (void)parse_conv_mode("middle");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("full, same, valid"), std::string::npos) << e.what();
  }
}

TEST(ConvDispatch, Bf16OutputOverflowIsANumericalErrorOnTheCpu) {
  // Every input fits BF16 (3e38 < 3.39e38); the 3x3 sums do not fit even float.
  const Array img = Array::from_values<float>(std::vector<float>(64, 3e38f), {8, 8});
  const Array ker = Array::from_values<float>(std::vector<float>(9, 1.0f), {3, 3});
  for (ConvMethod m : {ConvMethod::Direct}) {
    try {
      (void)convolve2d(img, ker, cpu(m, Precision::BF16));
      FAIL() << "no NumericalError";
    } catch (const NumericalError& e) {
      EXPECT_NE(std::string(e.what()).find("BF16"), std::string::npos) << e.what();
    }
  }
}

TEST(ConvDispatch, Fp16InputOverflowIsReportedNeverInf) {
  const Array img = Array::from_values<double>(std::vector<double>(16, 1e5), {4, 4});
  const Array ker = Array::from_values<double>(std::vector<double>{1.0}, {1, 1});
  EXPECT_THROW((void)convolve2d(img, ker, cpu(ConvMethod::Direct, Precision::Half)),
               NumericalError);
}

TEST(ConvDispatch, NanInputsAreCarriedThroughNotRejected) {
  std::vector<float> v(36, 1.0f);
  v[14] = NAN;
  const Array img = Array::from_values<float>(v, {6, 6});
  const Array ker = Array::from_values<float>(std::vector<float>(9, 1.0f), {3, 3});
  const Array out = convolve2d(img, ker, cpu(ConvMethod::Direct, Precision::Mixed));
  EXPECT_TRUE(std::isnan(out.at_as_double(14)));
  EXPECT_EQ(out.at_as_double(35), 4.0);  // the corner far from the NaN: 2x2 taps inside
}

TEST(ConvDispatch, MethodsOutsideTheirDeviceOrPrecisionSaySo) {
  const Array img = Array::from_values<float>(std::vector<float>(16, 1.0f), {4, 4});
  const Array ker = Array::from_values<float>(std::vector<float>(4, 1.0f), {2, 2});
  try {
    (void)convolve2d(img, ker, cpu(ConvMethod::Direct, Precision::Split));
    FAIL();
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("double, single, half, mixed, bf16"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)convolve2d(img, ker, cpu(ConvMethod::Register, Precision::Single)),
               Unsupported);
  EXPECT_THROW((void)convolve2d(img, ker, cpu(ConvMethod::Cudnn, Precision::Single)), Unsupported);
  EXPECT_THROW((void)convolve2d(img, ker, cpu(ConvMethod::Separable, Precision::Single)),
               Unsupported);
  EXPECT_THROW((void)convolve2d(img.reshape({16}), ker, cpu(ConvMethod::Direct, Precision::Single)),
               InvalidInput);
}

TEST(ConvDispatch, HeuristicFollowsTheDocumentedThresholds) {
  EXPECT_EQ(conv_heuristic_method(31, 31, Precision::Single, DeviceKind::Cpu), ConvMethod::Direct);
  EXPECT_EQ(conv_heuristic_method(33, 3, Precision::Single, DeviceKind::Cpu), ConvMethod::FFT);
  EXPECT_EQ(conv_heuristic_method(65, 65, Precision::Split, DeviceKind::Cuda), ConvMethod::Tensor);
  EXPECT_EQ(conv_heuristic_method(7, 7, Precision::Mixed, DeviceKind::Cuda), ConvMethod::Register);
}

}  // namespace
}  // namespace halfscope
