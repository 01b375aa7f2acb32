// GPU backend `tensor` (conv::tensor_cuda): mixed, bf16 and split against the FP64 reference with
// the derived per-pixel bound of tensor_testing.hpp, on every geometry of the CPU backends' tests,
// multi-tile shapes covering Q = 2..5 and two column chunks, the study's widths (3..115) on a
// 256 x 200 image, a partial-tile 1000 x 777 image, and FP32 inputs beyond the FP16 range (split's
// scaling). Outputs are NaN-poisoned first, so an unwritten pixel fails. Also: split's mean
// relative error within 2x of an FP32 direct convolution's (the target), and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "halfscope/config.hpp"
#include "tensor_testing.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "conv/backends.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/metrics.hpp"
#endif

namespace halfscope::conv::testing {
namespace {

#if HALFSCOPE_WITH_CUDA
constexpr Precision precision_of(TensorPrecision p) {
  return p == TensorPrecision::Mixed  ? Precision::Mixed
         : p == TensorPrecision::BF16 ? Precision::BF16
                                      : Precision::Split;
}

/// Runs tensor_cuda on device copies of the inputs into a NaN-poisoned output; returns it on the
/// host.
template <TensorPrecision P>
Array run_gpu(const Geometry& g, const TensorInputs& in) {
  using S = typename TensorStorage<P>::type;
  const Array image = in.image.to(Memory::device), kernel = in.kernel.to(Memory::device);
  Array out(dtype_of<S>, Shape{g.out_rows, g.out_cols}, Memory::device);
  cuda::Stream stream;
  HS_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, static_cast<std::size_t>(out.nbytes()),
                                stream.get()));  // NaN in every storage type
  HS_CUDA_CHECK(cudaDeviceSynchronize());        // the uploads ran on the default stream
  tensor_cuda(g, precision_of(P), image, kernel, out, stream.get());
  stream.synchronize();
  return out.to(Memory::host);
}

template <TensorPrecision P>
void check_shapes(const std::vector<Shape4>& list, std::uint64_t seed) {
  for (const Shape4& s : list)
    for (const Geometry& g : geometries(s)) {
      const TensorInputs in = tensor_inputs<P>(g, seed++);
      expect_within_bound<P>(g, in, run_gpu<P>(g, in));
    }
}

/// Square kernels of the study's widths on a 256 x 200 image, same mode, both boundaries, and a
/// 1000 x 777 image (partial tiles in both directions).
template <TensorPrecision P>
void check_widths(std::uint64_t seed) {
  for (std::int64_t w : {3, 15, 16, 31, 65, 115})
    for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g{256, 200, w, w, 256, 200, (w - 1) / 2, (w - 1) / 2, b};
      const TensorInputs in = tensor_inputs<P>(g, seed++);
      expect_within_bound<P>(g, in, run_gpu<P>(g, in));
    }
  for (std::int64_t w : {15, 31}) {
    const Geometry g{1000, 777, w, w, 1000, 777, (w - 1) / 2, (w - 1) / 2, Boundary::Zero};
    const TensorInputs in = tensor_inputs<P>(g, seed++);
    expect_within_bound<P>(g, in, run_gpu<P>(g, in));
  }
}

TEST(TensorConvGpu, MixedF16InF32AccumulateF16Out) {
  HS_REQUIRE_GPU();
  check_shapes<TensorPrecision::Mixed>(shapes(), 1000);
  check_shapes<TensorPrecision::Mixed>(tensor_shapes(), 1100);
  check_widths<TensorPrecision::Mixed>(1200);
}

TEST(TensorConvGpu, Bf16InF32AccumulateBf16Out) {
  HS_REQUIRE_GPU();
  check_shapes<TensorPrecision::BF16>(shapes(), 2000);
  check_shapes<TensorPrecision::BF16>(tensor_shapes(), 2100);
  check_widths<TensorPrecision::BF16>(2200);
}

TEST(TensorConvGpu, SplitF32InHiLoF16ProductsF32Out) {
  HS_REQUIRE_GPU();
  check_shapes<TensorPrecision::Split>(shapes(), 3000);
  check_shapes<TensorPrecision::Split>(tensor_shapes(), 3100);
  check_widths<TensorPrecision::Split>(3200);
}

// Values up to 1e6 (FP16 overflows at 65504) with a 1e-3 kernel: per-row / per-kernel
// power-of-two scales keep the split FP32-accurate.
TEST(TensorConvGpu, SplitF32ScalesValuesBeyondTheF16Range) {
  HS_REQUIRE_GPU();
  for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
    const Geometry g{300, 300, 31, 31, 300, 300, 15, 15, b};
    TensorInputs in = tensor_inputs<TensorPrecision::Split>(g, 4000, 1.0e6f);
    float* k = in.kernel.data_as<float>();
    for (std::int64_t t = 0; t < g.krows * g.kcols; ++t) {
      k[t] *= 1e-3f;
      in.kernel_exact[static_cast<std::size_t>(t)] = k[t];
    }
    expect_within_bound<TensorPrecision::Split>(g, in, run_gpu<TensorPrecision::Split>(g, in));
  }
}

// The accuracy target: on the benchmark's kind of input (positive image, normalised
// Gaussian kernel, 512 x 512, same mode) split's mean relative error is within 2x of an FP32
// direct convolution's, here a plain FP32 loop accumulating the K products in (u, v) order.
TEST(TensorConvGpu, SplitF32MeanRelativeErrorWithinTwiceFp32Direct) {
  HS_REQUIRE_GPU();
  for (std::int64_t w : {15, 31}) {
    const Geometry g{512, 512, w, w, 512, 512, (w - 1) / 2, (w - 1) / 2, Boundary::Zero};
    std::vector<float> img = test::random_floats(g.rows * g.cols, 0.0f, 1.0f, 5000 + w);
    std::vector<float> ker(static_cast<std::size_t>(w * w));
    const double sigma = static_cast<double>(w) / 6;
    double sum = 0;
    for (std::int64_t u = 0; u < w; ++u)
      for (std::int64_t v = 0; v < w; ++v) {
        const double du = static_cast<double>(u - w / 2), dv = static_cast<double>(v - w / 2);
        const float k = static_cast<float>(std::exp(-(du * du + dv * dv) / (2 * sigma * sigma)));
        ker[static_cast<std::size_t>(u * w + v)] = k;
        sum += k;
      }
    for (float& k : ker) k = static_cast<float>(k / sum);
    TensorInputs in;
    in.image = storage_array<float>(img, g.rows, g.cols, in.image_exact);
    in.kernel = storage_array<float>(ker, w, w, in.kernel_exact);
    const Reference ref = reference(g, in.image_exact, in.kernel_exact);
    std::vector<double> fp32(ref.value.size());
    for (std::int64_t i = 0; i < g.out_rows; ++i)
      for (std::int64_t j = 0; j < g.out_cols; ++j) {
        float s = 0;
        for (std::int64_t u = 0; u < w; ++u)
          for (std::int64_t v = 0; v < w; ++v) {
            const std::int64_t y = i + g.row0 - u, x = j + g.col0 - v;
            if (y >= 0 && y < g.rows && x >= 0 && x < g.cols)
              s += ker[static_cast<std::size_t>(u * w + v)] *
                   img[static_cast<std::size_t>(y * g.cols + x)];
          }
        fp32[static_cast<std::size_t>(i * g.out_cols + j)] = s;
      }
    const std::vector<double> split = values_of<float>(run_gpu<TensorPrecision::Split>(g, in));
    const double mre_fp32 = mean_relative_error(ref.value, fp32);
    const double mre_split = mean_relative_error(ref.value, split);
    EXPECT_LE(mre_split, 2 * mre_fp32)
        << "width " << w << ": split MRE " << mre_split << ", FP32 direct MRE " << mre_fp32;
  }
}

// FP16 sums beyond 65504 from finite inputs are a NumericalError, never an inf; an inf in the
// image is passed on (to the pixels it reaches, and as NaN to its band neighbours) without error.
TEST(TensorConvGpu, MixedF16OverflowIsANumericalErrorAndAnInputInfIsPassedOn) {
  HS_REQUIRE_GPU();
  const Geometry g{40, 150, 3, 3, 40, 150, 1, 1, Boundary::Zero};
  TensorInputs in = tensor_inputs<TensorPrecision::Mixed>(g, 7000);
  Half* img = in.image.data_as<Half>();
  Half* ker = in.kernel.data_as<Half>();
  for (std::int64_t t = 0; t < g.rows * g.cols; ++t) img[t] = Half(30000.0f);
  for (std::int64_t t = 0; t < g.krows * g.kcols; ++t) ker[t] = Half(1.0f);
  EXPECT_THROW((void)run_gpu<TensorPrecision::Mixed>(g, in), NumericalError);
  const std::int64_t at = 5 * g.cols + 7;
  for (std::int64_t t = 0; t < g.rows * g.cols; ++t) img[t] = Half(1.0f);
  img[at] = Half::from_bits(0x7c00);
  const Array out = run_gpu<TensorPrecision::Mixed>(g, in);
  EXPECT_FALSE(std::isfinite(static_cast<float>(out.data_as<Half>()[at])));
  EXPECT_EQ(static_cast<float>(out.data_as<Half>()[30 * g.cols + 100]), 9.0f);
}

TEST(TensorConvGpu, RejectsOtherPrecisionsAndHostArrays) {
  HS_REQUIRE_GPU();
  const Geometry g{8, 8, 3, 3, 8, 8, 1, 1, Boundary::Zero};
  const TensorInputs in = tensor_inputs<TensorPrecision::Split>(g, 6000);
  Array out(DType::f32, Shape{8, 8}, Memory::device);
  const Array image = in.image.to(Memory::device), kernel = in.kernel.to(Memory::device);
  EXPECT_THROW(tensor_cuda(g, Precision::Single, image, kernel, out, nullptr), Unsupported);
  EXPECT_THROW(tensor_cuda(g, Precision::Half, image, kernel, out, nullptr), Unsupported);
  EXPECT_THROW(tensor_cuda(g, Precision::Split, in.image, kernel, out, nullptr), InvalidInput);
  EXPECT_THROW(tensor_cuda(g, Precision::Mixed, image, kernel, out, nullptr), InvalidInput);
}
#endif

}  // namespace
}  // namespace halfscope::conv::testing
