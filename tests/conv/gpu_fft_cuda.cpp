// GPU FFT convolution (src/conv/fft_cuda.cu) against the FP64 direct reference of
// fft_gemm_testing.hpp, with its norm-wise tolerance: every precision (double, single, mixed, bf16,
// half) x both boundaries x full / same / valid / odd windows, odd and even kernels, kernels
// larger than the image, 1xN and Nx1 images, prime sizes (FP32 grids), non-power-of-two sizes
// (FP16 grids); the sqrt(N) pre-scaling that keeps FP16 transforms finite; overflow reported as
// NumericalError; the kernel-spectrum cache never serving a stale spectrum; typed refusals.
#include "fft_gemm_testing.hpp"

namespace halfscope::conv {
namespace {

#if HALFSCOPE_WITH_CUDA

using namespace fftgemm_testing;

// ---- FFT, every precision

TEST(GpuFft, Double_F64StorageD2ZTransforms_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({127, 131, 7, 7});  // prime sizes: smooth padding, extended circular layout
  shapes.push_back({64, 48, 9, 8});    // smooth sizes: exact circular grid
  sweep(&fft_cuda, Precision::Double, &expect_fft_close, shapes);
}

TEST(GpuFft, Single_F32StorageR2CTransforms_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({127, 131, 7, 7});
  shapes.push_back({64, 48, 9, 8});
  shapes.push_back({100, 120, 33, 31});
  sweep(&fft_cuda, Precision::Single, &expect_fft_close, shapes);
}

TEST(GpuFft, Mixed_F16StorageF32Transforms_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({127, 131, 7, 7});
  sweep(&fft_cuda, Precision::Mixed, &expect_fft_close, shapes);
}

TEST(GpuFft, BF16_BF16StorageF32Transforms_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({127, 131, 7, 7});
  sweep(&fft_cuda, Precision::BF16, &expect_fft_close, shapes);
}

TEST(GpuFft, Half_F16StorageF16PowerOfTwoTransforms_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({100, 75, 9, 8});  // non-power-of-two sizes: padded to 128 x 128
  shapes.push_back({64, 32, 5, 5});   // powers of two: exact circular grid
  shapes.push_back({120, 96, 31, 17});
  sweep(&fft_cuda, Precision::Half, &expect_fft_close, shapes);
}

// ---- FFT: the sqrt(N) pre-scaling and overflow

TEST(GpuFft, Half_F16_SqrtNPrescalingKeepsTransformsFinite) {
  HS_REQUIRE_GPU();
  // Values ~100 on 256x256: the unscaled DC term is sum(x) ~ 6.5e6, a hundred times FP16's 65504.
  const Data img = make_data(256, 256, DType::f16, 7, 90.0, 110.0, true);
  std::vector<double> k(25, 1.0 / 25.0);
  const Data ker = from_values(k, 5, 5, DType::f16);
  double dc = 0;
  for (const double x : img.v) dc += x;
  ASSERT_GT(dc, 65504.0);
  for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
    const Geometry g = geo(256, 256, 5, 5, 256, 256, 2, 2, b);
    const auto got = run(&fft_cuda, g, Precision::Half, img.device, ker.device);
    expect_fft_close(g, Precision::Half, img, ker, got);
    const Reference ref = reference(g, img.v, ker.v);
    double e = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      e = std::max(e, std::abs(got[i] - ref.value[i]) / ref.value[i]);
    EXPECT_LT(e, 0.01) << "largest relative error, boundary " << static_cast<int>(b);
  }
}

TEST(GpuFft, HalfAndMixed_F16_OverflowingResultIsNumericalError_BF16Keeps) {
  HS_REQUIRE_GPU();
  // 1000 * 81 = 81000 > 65504: a true FP16 overflow of the result, which must be reported.
  std::vector<double> ones(81, 1.0), thousands(24 * 24, 1000.0);
  const Geometry g = geo(24, 24, 9, 9, 24, 24, 4, 4, Boundary::Circular);
  for (const Precision p : {Precision::Half, Precision::Mixed}) {
    const Data img = from_values(thousands, 24, 24, DType::f16);
    const Data ker = from_values(ones, 9, 9, DType::f16);
    EXPECT_THROW((void)run(&fft_cuda, g, p, img.device, ker.device), NumericalError)
        << precision_name(p);
  }
  const Data img = from_values(thousands, 24, 24, DType::bf16);
  const Data ker = from_values(ones, 9, 9, DType::bf16);
  const auto got = run(&fft_cuda, g, Precision::BF16, img.device, ker.device);
  expect_fft_close(g, Precision::BF16, img, ker, got);
}

// ---- FFT: the kernel-spectrum cache and the plan pool

TEST(GpuFft, Single_SpectrumCache_DifferentOrChangedKernelNeverHitsStaleEntry) {
  HS_REQUIRE_GPU();
  gpufft::set_fft_spectrum_cache_enabled(true);
  gpufft::clear_fft_caches();
  const Geometry g = geo(40, 50, 7, 6, 40, 50, 3, 2, Boundary::Circular);
  const Data img = make_data(40, 50, DType::f32, 11);
  const Data a = make_data(7, 6, DType::f32, 12);
  const Data b = make_data(7, 6, DType::f32, 13);
  const auto stats0 = gpufft::fft_cache_stats();
  expect_fft_close(g, Precision::Single, img, a,
                   run(&fft_cuda, g, Precision::Single, img.device, a.device));
  expect_fft_close(g, Precision::Single, img, a,
                   run(&fft_cuda, g, Precision::Single, img.device, a.device));
  const auto stats1 = gpufft::fft_cache_stats();
  EXPECT_EQ(stats1.spectrum_misses - stats0.spectrum_misses, 1);
  EXPECT_EQ(stats1.spectrum_hits - stats0.spectrum_hits, 1);
  EXPECT_GE(stats1.plan_hits - stats0.plan_hits, 2);  // the second call reuses both plans

  // Another kernel of the same shape: a miss, and its own result.
  expect_fft_close(g, Precision::Single, img, b,
                   run(&fft_cuda, g, Precision::Single, img.device, b.device));
  // `a`'s buffer changed in place (same pointer, one tap different): a miss, the new result.
  std::vector<double> changed = a.v;
  changed[17] += 0.5;
  const Data c = from_values(changed, 7, 6, DType::f32);
  HS_CUDA_CHECK(cudaMemcpy(const_cast<void*>(a.device.data()), c.device.data(),
                           static_cast<std::size_t>(a.device.nbytes()), cudaMemcpyDeviceToDevice));
  HS_CUDA_CHECK(cudaDeviceSynchronize());  // a D2D cudaMemcpy does not block the host
  expect_fft_close(g, Precision::Single, img, c,
                   run(&fft_cuda, g, Precision::Single, img.device, a.device));
  const auto stats2 = gpufft::fft_cache_stats();
  EXPECT_EQ(stats2.spectrum_misses - stats1.spectrum_misses, 2);
  // `b` again, from a different buffer: still cached, found by content.
  const Data b2 = from_values(b.v, 7, 6, DType::f32);
  expect_fft_close(g, Precision::Single, img, b,
                   run(&fft_cuda, g, Precision::Single, img.device, b2.device));
  EXPECT_EQ(gpufft::fft_cache_stats().spectrum_hits - stats2.spectrum_hits, 1);

  // Cache off: recomputed every time, still right, no lookups counted.
  gpufft::set_fft_spectrum_cache_enabled(false);
  const auto stats3 = gpufft::fft_cache_stats();
  expect_fft_close(g, Precision::Single, img, b,
                   run(&fft_cuda, g, Precision::Single, img.device, b.device));
  const auto stats4 = gpufft::fft_cache_stats();
  EXPECT_EQ(stats4.spectrum_hits + stats4.spectrum_misses,
            stats3.spectrum_hits + stats3.spectrum_misses);
  EXPECT_EQ(stats4.spectra, 0);
  gpufft::set_fft_spectrum_cache_enabled(true);
}

TEST(GpuFft, Half_SpectrumCache_KeyedByPrecisionAndGeometry) {
  HS_REQUIRE_GPU();
  gpufft::set_fft_spectrum_cache_enabled(true);
  gpufft::clear_fft_caches();
  const Data img = make_data(30, 30, DType::f16, 21);
  const Data ker = make_data(5, 5, DType::f16, 22);
  // The same kernel bytes in two precisions and two geometries: four different spectra.
  for (const Precision p : {Precision::Half, Precision::Mixed})
    for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g = geo(30, 30, 5, 5, 30, 30, 2, 2, b);
      expect_fft_close(g, p, img, ker, run(&fft_cuda, g, p, img.device, ker.device));
    }
  EXPECT_EQ(gpufft::fft_cache_stats().spectra, 4);
}

// ---- what the backends refuse

TEST(GpuFftGemm, UnsupportedPrecisionsAndHostArrays_AreTypedErrors) {
  HS_REQUIRE_GPU();
  const Geometry g = geo(8, 8, 3, 3, 8, 8, 1, 1, Boundary::Zero);
  const Data img = make_data(8, 8, DType::f32, 41);
  const Data ker = make_data(3, 3, DType::f32, 42);
  Array out(DType::f32, {8, 8}, Memory::device);
  EXPECT_THROW(fft_cuda(g, Precision::TF32, img.device, ker.device, out, nullptr), Unsupported);
  EXPECT_THROW(fft_cuda(g, Precision::Split, img.device, ker.device, out, nullptr), Unsupported);
  EXPECT_THROW(gemm_cuda(g, Precision::Split, img.device, ker.device, out, nullptr), Unsupported);
  const Array host_img = img.device.to(Memory::host);
  EXPECT_THROW(fft_cuda(g, Precision::Single, host_img, ker.device, out, nullptr), InvalidInput);
  EXPECT_THROW(gemm_cuda(g, Precision::Half, img.device, ker.device, out, nullptr), InvalidInput);
}

#endif  // HALFSCOPE_WITH_CUDA

}  // namespace
}  // namespace halfscope::conv
