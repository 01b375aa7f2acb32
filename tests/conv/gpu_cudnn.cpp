// GPU cuDNN convolution (src/conv/cudnn_cuda.cu) against the FP64 reference shared with the CPU
// backends (cpu_backend_testing.hpp, through fft_gemm_testing.hpp): single, half and mixed x both
// boundaries x full / same (convolution and correlation centring) / valid / windows beyond the
// ends, odd and even kernels, kernels larger than the image, 1xN and Nx1 images; both of the
// method's paths (cuDNN's own padding, and the explicit extension for the circular boundary,
// even-kernel `same` and outer windows); correlation through dispatch; FP16 overflow as
// NumericalError; refused precisions and operands.
//
// Tolerance (expect_gemm_close, componentwise): the method runs only cuDNN's direct-summation
// algorithms (implicit GEMM, GEMM, direct), each output a sum of K = krows * kcols exact-input
// products in some order, so |out - ref| <= gamma_K u_acc sum |k||x| <= 2 K u_acc sum |k||x|
// (Higham 3.1, K u <= 1/2) plus the final rounding to storage u_s |ref|; C = 4 instead of 2
// covers tensor-core accumulation (half, mixed), which aligns and truncates instead of rounding
// to nearest. u_acc = 2^-24 for single and mixed (FP32 compute), 2^-11 for half (FP16 compute).
#include "fft_gemm_testing.hpp"

#include "halfscope/conv.hpp"

namespace halfscope::conv {
namespace {

#if HALFSCOPE_WITH_CUDA && HALFSCOPE_WITH_CUDNN

using namespace fftgemm_testing;

std::vector<fftgemm_testing::Shape4> cudnn_shapes() {
  auto shapes = common_shapes();
  shapes.push_back({40, 36, 4, 6});   // even x even kernel
  shapes.push_back({64, 48, 7, 7});   // odd kernel: `same` and `full` through cuDNN's padding
  shapes.push_back({33, 70, 15, 3});  // tall odd kernel, non-square image
  return shapes;
}

TEST(GpuCudnn, Single_F32_FmaMathNoTF32_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&cudnn_cuda, Precision::Single, &expect_gemm_close, cudnn_shapes());
}

TEST(GpuCudnn, Half_F16Data_F16Compute_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&cudnn_cuda, Precision::Half, &expect_gemm_close, cudnn_shapes());
}

TEST(GpuCudnn, Mixed_F16Data_F32Compute_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&cudnn_cuda, Precision::Mixed, &expect_gemm_close, cudnn_shapes());
}

TEST(GpuCudnn, Single_RepeatedShape_CachedAlgorithmGivesSameBits) {
  HS_REQUIRE_GPU();
  const Data img = make_data(50, 45, DType::f32, 7);
  const Data ker = make_data(5, 5, DType::f32, 8);
  const Geometry g = geo(50, 45, 5, 5, 50, 45, 2, 2, Boundary::Zero);
  const auto first = run(&cudnn_cuda, g, Precision::Single, img.device, ker.device);
  const auto second = run(&cudnn_cuda, g, Precision::Single, img.device, ker.device);
  expect_gemm_close(g, Precision::Single, img, ker, second);
  EXPECT_EQ(first, second);
}

TEST(GpuCudnn, CorrelateSameThroughDispatch_MatchesCpuDoubleCorrelation) {
  HS_REQUIRE_GPU();
  // Even kernel: SciPy centres a correlation's `same` at kr/2, a convolution's at (kr-1)/2.
  const Data img = make_data(31, 29, DType::f32, 11);
  const Data ker = make_data(4, 6, DType::f32, 12);
  for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
    ConvOptions o;
    o.mode = ConvMode::Same;
    o.boundary = b;
    o.correlate = true;
    o.method = ConvMethod::Cudnn;
    o.device = DeviceKind::Cuda;
    o.precision = Precision::Single;
    const Array host_img = img.device.to(Memory::host), host_ker = ker.device.to(Memory::host);
    const Array got = convolve2d(host_img, host_ker, o);
    ConvOptions cpu = o;
    cpu.method = ConvMethod::Direct;
    cpu.device = DeviceKind::Cpu;
    cpu.precision = Precision::Double;
    const Array want = convolve2d(host_img, host_ker, cpu);
    // Same bound as above with K = 24 taps, |k|,|x| <= 1: 4 * 24 * 2^-24 * 24 + 2^-24 * 24.
    const double tol = (4.0 * 24 * 0x1p-24 + 0x1p-24) * 24;
    ASSERT_EQ(got.size(), want.size());
    for (std::int64_t e = 0; e < got.size(); ++e)
      ASSERT_NEAR(got.at_as_double(e), want.at_as_double(e), tol)
          << "pixel " << e << (b == Boundary::Zero ? " zero" : " circular");
  }
}

TEST(GpuCudnn, HalfAndMixed_F16_OverflowingResultIsNumericalError) {
  HS_REQUIRE_GPU();
  std::vector<double> ones(81, 1.0), thousands(20 * 20, 1000.0);
  // Every output is 81 * 1000 > 65504; once through padding (zero), once through the extension.
  for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
    const Geometry g = geo(20, 20, 9, 9, 20, 20, 4, 4, b);
    for (const Precision p : {Precision::Half, Precision::Mixed}) {
      const Data img = from_values(thousands, 20, 20, DType::f16);
      const Data ker = from_values(ones, 9, 9, DType::f16);
      EXPECT_THROW((void)run(&cudnn_cuda, g, p, img.device, ker.device), NumericalError)
          << precision_name(p);
    }
  }
}

TEST(GpuCudnn, UnsupportedPrecisionsAndHostArrays_AreTypedErrors) {
  HS_REQUIRE_GPU();
  const Geometry g = geo(8, 8, 3, 3, 8, 8, 1, 1, Boundary::Zero);
  const Data img = make_data(8, 8, DType::f32, 41);
  const Data ker = make_data(3, 3, DType::f32, 42);
  Array out(DType::f32, {8, 8}, Memory::device);
  for (const Precision p : {Precision::Double, Precision::BF16, Precision::Split, Precision::TF32})
    EXPECT_THROW(cudnn_cuda(g, p, img.device, ker.device, out, nullptr), Unsupported)
        << precision_name(p);
  const Array host_img = img.device.to(Memory::host);
  EXPECT_THROW(cudnn_cuda(g, Precision::Single, host_img, ker.device, out, nullptr), InvalidInput);
  EXPECT_THROW(cudnn_cuda(g, Precision::Half, img.device, ker.device, out, nullptr), InvalidInput);
  EXPECT_EQ(conv_supported_precisions(ConvMethod::Cudnn, DeviceKind::Cuda),
            (std::vector<Precision>{Precision::Single, Precision::Half, Precision::Mixed}));
}

#else

TEST(GpuCudnn, NotBuilt_SupportsNoPrecision) {
  EXPECT_TRUE(conv_supported_precisions(ConvMethod::Cudnn, DeviceKind::Cuda).empty());
}

#endif

}  // namespace
}  // namespace halfscope::conv
