// GPU GEMM convolution (src/conv/gemm_cuda.cu: im2col + cublasGemmEx) against the FP64 direct
// reference of fft_gemm_testing.hpp, with its componentwise tolerance: every precision (double,
// single, tf32, half, mixed, bf16) x both boundaries x full / same / valid / odd windows, odd and
// even kernels, kernels larger than the image, 1xN and Nx1 images; chunked patch matrices
// (chunks shorter than one output row, and of whole rows); FP16 overflow as NumericalError.
#include "fft_gemm_testing.hpp"

namespace halfscope::conv {
namespace {

#if HALFSCOPE_WITH_CUDA

using namespace fftgemm_testing;

// ---- GEMM, every precision

TEST(GpuGemm, Double_F64_Compute64F_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&gemm_cuda, Precision::Double, &expect_gemm_close, common_shapes());
}

TEST(GpuGemm, Single_F32_Compute32FNoTF32_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  auto shapes = common_shapes();
  shapes.push_back({127, 131, 7, 7});
  sweep(&gemm_cuda, Precision::Single, &expect_gemm_close, shapes);
}

TEST(GpuGemm, TF32_F32Storage_TF32TensorCores_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&gemm_cuda, Precision::TF32, &expect_gemm_close, common_shapes());
}

TEST(GpuGemm, Half_F16InOut_Compute16F_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&gemm_cuda, Precision::Half, &expect_gemm_close, common_shapes());
}

TEST(GpuGemm, Mixed_F16InOut_Compute32F_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&gemm_cuda, Precision::Mixed, &expect_gemm_close, common_shapes());
}

TEST(GpuGemm, BF16_BF16InOut_Compute32F_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(&gemm_cuda, Precision::BF16, &expect_gemm_close, common_shapes());
}

TEST(GpuGemm, Single_F32_ChunkedPatchMatrix_MatchesUnchunked) {
  HS_REQUIRE_GPU();
  const Data img = make_data(33, 29, DType::f32, 31);
  const Data ker = make_data(6, 5, DType::f32, 32);
  const std::int64_t row_bytes = 32 * 4;  // 30 taps padded to 32 floats
  const std::int64_t saved = gemm_patch_budget_bytes();
  // 7 pixels per chunk (a chunk is part of one output row), then 2 whole output rows.
  for (const std::int64_t budget : {7 * row_bytes, (2 * 33 + 5) * row_bytes}) {
    set_gemm_patch_budget_bytes(budget);
    for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g = geo(33, 29, 6, 5, 38, 33, 0, 0, b);
      const auto got = run(&gemm_cuda, g, Precision::Single, img.device, ker.device);
      set_gemm_patch_budget_bytes(saved);
      expect_gemm_close(g, Precision::Single, img, ker, got);
      set_gemm_patch_budget_bytes(budget);
    }
  }
  set_gemm_patch_budget_bytes(saved);
}

TEST(GpuGemm, HalfAndMixed_F16_OverflowingResultIsNumericalError) {
  HS_REQUIRE_GPU();
  std::vector<double> ones(81, 1.0), thousands(20 * 20, 1000.0);
  const Geometry g = geo(20, 20, 9, 9, 20, 20, 4, 4, Boundary::Circular);
  for (const Precision p : {Precision::Half, Precision::Mixed}) {
    const Data img = from_values(thousands, 20, 20, DType::f16);
    const Data ker = from_values(ones, 9, 9, DType::f16);
    EXPECT_THROW((void)run(&gemm_cuda, g, p, img.device, ker.device), NumericalError)
        << precision_name(p);
  }
}

#endif  // HALFSCOPE_WITH_CUDA

}  // namespace
}  // namespace halfscope::conv
