// GPU backend `separable` (conv::separable_cuda) against the FP64 reference of
// cpu_backend_testing.hpp on every geometry of the CPU backends' tests (full / same / valid /
// windows, both boundaries, kernels larger than the image), with rank-1 signed kernels, rank-2
// and rank-4 kernels, Gaussians of the study's widths, and a 1000 x 777 image (partial blocks of
// both passes). Bound per pixel: the two passes' rounding, (kr + kc + 4) u_c sum |k| |x|, plus the
// storage rounding of the output, 2 u_s |out|. Also: non-separable kernels are refused, FP16
// overflow is an error, and auto without measuring takes it for wide low-rank kernels only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu_backend_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/sim/kernels.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "conv/backends.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::conv::testing {
namespace {

#if HALFSCOPE_WITH_CUDA
/// A krows x kcols kernel, the sum of `rank` outer products of random vectors (signed for rank 1,
/// positive beyond, so sum_r |c_r| |r_r| = |K| and the reference's |k| |x| bounds the passes).
std::vector<float> low_rank_kernel(std::int64_t kr, std::int64_t kc, int rank, std::uint64_t seed) {
  std::vector<float> k(static_cast<std::size_t>(kr * kc), 0.0f);
  const float lo = rank == 1 ? -1.0f : 0.1f;
  for (int r = 0; r < rank; ++r) {
    // Multiples of 1/32: every product and sum is exact in float, so the kernel is exactly of
    // this rank in FP32 and FP64 storage (FP16 / BF16 storage rounds it, within its tolerance).
    auto c = test::random_floats(kr, lo, 1.0f, seed + 2 * r);
    auto w = test::random_floats(kc, lo, 1.0f, seed + 2 * r + 1);
    for (auto* v : {&c, &w})
      for (float& x : *v) x = std::round(x * 32) / 32 == 0 ? 1.0f / 32 : std::round(x * 32) / 32;
    for (std::int64_t u = 0; u < kr; ++u)
      for (std::int64_t v = 0; v < kc; ++v)
        k[static_cast<std::size_t>(u * kc + v)] +=
            c[static_cast<std::size_t>(u)] * w[static_cast<std::size_t>(v)];
  }
  return k;
}

template <class S>
void check(const Geometry& g, Precision p, const std::vector<float>& kernel, std::uint64_t seed) {
  std::vector<double> img, ker;
  const Array image =
      storage_array<S>(test::random_floats(g.rows * g.cols, -1, 1, seed), g.rows, g.cols, img);
  const Array k = storage_array<S>(kernel, g.krows, g.kcols, ker);
  const Reference ref = reference(g, img, ker);
  Array out = poisoned<S>(g.out_rows, g.out_cols).to(Memory::device);
  const Array dimage = image.to(Memory::device), dk = k.to(Memory::device);
  separable_cuda(g, p, dimage, dk, out, nullptr, nullptr);
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> got = values_of<S>(out.to(Memory::host));
  const double uc = compute_unit_roundoff(p), us = storage_unit_roundoff(p);
  // The factorization's residual (<= 4 u_s of sum |k|) enters through every tap.
  const double tol = separable_tolerance(p);
  double ksum = 0;
  for (double v : ker) ksum += std::abs(v);
  int bad = 0;
  for (std::size_t t = 0; t < got.size() && bad < 5; ++t) {
    const double bound =
        static_cast<double>(g.krows + g.kcols + 4) * uc * ref.abs[t] +
        (p == Precision::Double || p == Precision::Single ? 0.0 : 2 * us * std::abs(ref.value[t])) +
        tol * ksum + 1e-300;
    if (!(std::abs(got[t] - ref.value[t]) <= bound)) {
      ++bad;
      ADD_FAILURE() << describe(g) << " " << precision_name(p) << " pixel " << t << ": got "
                    << got[t] << ", reference " << ref.value[t] << ", bound " << bound;
    }
  }
}

template <class S>
void check_all(Precision p, std::uint64_t seed) {
  // The CPU backends' shapes, then 16-byte aligned rows at widths 5 and 7 (3: {16, 16, 3, 3}),
  // where a rank-one kernel runs the rolling kernel (16-bit storage at 7x7, and at 5x5 with FP32
  // arithmetic; the streaming kernel's rank-one mode under HALFSCOPE_CONV_ROLL=0 and elsewhere)
  // for full, same and valid, and the other column offsets and ranks the two passes (both again
  // under HALFSCOPE_CONV_STREAM=0). The wide and tall shapes give the rolling kernel several
  // column strips (the last one partial) and dozens of row bands, whose edges the circular
  // boundary wraps across.
  std::vector<Shape4> all = shapes();
  for (const Shape4& s : {Shape4{24, 64, 5, 5}, Shape4{40, 72, 7, 7}, Shape4{3, 8, 7, 7},
                          Shape4{300, 1048, 7, 7}, Shape4{45, 2056, 5, 5}, Shape4{1100, 16, 7, 7}})
    all.push_back(s);
  for (const Shape4& s : all)
    for (int rank : {1, 2})
      for (const Geometry& g : geometries(s))
        check<S>(g, p, low_rank_kernel(s.krows, s.kcols, rank, seed), seed), ++seed;
  for (std::int64_t w : {9, 31, 115}) {
    // A Gaussian as the outer product of its 1-D profile on a 2^-12 grid: the products are exact
    // in float, so the kernel is of rank one in FP64 storage too.
    std::vector<float> g(static_cast<std::size_t>(w)), k;
    for (std::int64_t t = 0; t < w; ++t) {
      const double d = (static_cast<double>(t) - static_cast<double>(w - 1) / 2) / (w / 6.0);
      g[static_cast<std::size_t>(t)] =
          static_cast<float>(std::round(std::exp(-d * d / 2) * 4096) / 4096);
    }
    for (float gu : g)
      for (float gv : g) k.push_back(gu * gv);
    for (Boundary b : {Boundary::Zero, Boundary::Circular})
      check<S>({300, 200, w, w, 300, 200, (w - 1) / 2, (w - 1) / 2, b}, p, k, seed++);
  }
  check<S>({1000, 777, 15, 21, 1000, 777, 7, 10, Boundary::Zero}, p,
           low_rank_kernel(15, 21, 4, seed), seed);
}

TEST(SeparableConvGpu, DoubleF64InF64Out) {
  HS_REQUIRE_GPU();
  check_all<double>(Precision::Double, 100);
}

TEST(SeparableConvGpu, SingleF32InF32Out) {
  HS_REQUIRE_GPU();
  check_all<float>(Precision::Single, 200);
}

TEST(SeparableConvGpu, HalfF16InF16ArithmeticF16Out) {
  HS_REQUIRE_GPU();
  check_all<Half>(Precision::Half, 500);
}

TEST(SeparableConvGpu, MixedF16InF32ArithmeticF16Out) {
  HS_REQUIRE_GPU();
  check_all<Half>(Precision::Mixed, 300);
}

TEST(SeparableConvGpu, Bf16InF32ArithmeticBf16Out) {
  HS_REQUIRE_GPU();
  check_all<BFloat16>(Precision::BF16, 400);
}

ConvOptions gpu_options(ConvMethod m, Precision p) {
  ConvOptions o;
  o.method = m;
  o.precision = p;
  o.device = DeviceKind::Cuda;
  o.mode = ConvMode::Same;
  return o;
}

TEST(SeparableConvGpu, FullRankKernelsAndTf32AreRefusedByName) {
  HS_REQUIRE_GPU();
  const Array img = Array::from_values<float>(test::random_floats(64 * 64, -1, 1, 5), {64, 64});
  const Array noise = Array::from_values<float>(test::random_floats(15 * 15, -1, 1, 6), {15, 15});
  try {
    (void)convolve2d(img, noise, gpu_options(ConvMethod::Separable, Precision::Single));
    FAIL() << "a full-rank kernel was accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("not a sum of at most 4 outer products"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)convolve2d(img, sim::gaussian_kernel(15),
                     gpu_options(ConvMethod::Separable, Precision::TF32));
    FAIL() << "tf32 was accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("double, single, half, mixed, bf16"), std::string::npos)
        << e.what();
  }
}

TEST(SeparableConvGpu, Fp16OutputOverflowIsANumericalError) {
  HS_REQUIRE_GPU();
  // Every input fits FP16; a box of ones sums 49 or 81 x 60000 (7x7: the rolling kernel, whose
  // half row sums overflow before the output does; 9x9: the two passes).
  const Array img = Array::from_values<float>(std::vector<float>(32 * 32, 60000.0f), {32, 32});
  for (std::int64_t w : {7, 9}) {
    const Array ker = Array::from_values<float>(
        std::vector<float>(static_cast<std::size_t>(w * w), 1.0f), {w, w});
    for (Precision p : {Precision::Half, Precision::Mixed})
      EXPECT_THROW((void)convolve2d(img, ker, gpu_options(ConvMethod::Separable, p)),
                   NumericalError)
          << precision_name(p) << " " << w << "x" << w;
  }
}

TEST(SeparableConvGpu, AutoWithoutMeasuringTakesItForWideLowRankKernelsOnly) {
  HS_REQUIRE_GPU();
  const Array img = Array::from_values<float>(test::random_floats(128 * 128, -1, 1, 8), {128, 128});
  ConvOptions o = gpu_options(ConvMethod::Auto, Precision::Single);
  o.plan_by_measuring = false;
  EXPECT_EQ(conv_resolve_method(img, sim::gaussian_kernel(15), o), ConvMethod::Separable);
  EXPECT_EQ(conv_resolve_method(img, sim::gaussian_kernel(7), o), ConvMethod::Separable);
  EXPECT_EQ(conv_resolve_method(img, sim::gaussian_kernel(5), o), ConvMethod::Register);
  const Array noise = Array::from_values<float>(test::random_floats(15 * 15, -1, 1, 9), {15, 15});
  EXPECT_EQ(conv_resolve_method(img, noise, o), ConvMethod::Register);
  o.precision = Precision::Split;  // FP32-grade: separable in single serves it
  EXPECT_EQ(conv_resolve_method(img, sim::gaussian_kernel(31), o), ConvMethod::Separable);
  // The device kernel is read back for the test; the result matches the direct method's.
  ConvOptions single = o;
  single.precision = Precision::Single;
  const Array dk = sim::gaussian_kernel(21).astype(DType::f32).to(Memory::device);
  const Array a = convolve2d(img.to(Memory::device), dk, single).to(Memory::host);
  const Array b = convolve2d(img, sim::gaussian_kernel(21),
                             gpu_options(ConvMethod::Register, Precision::Single));
  for (std::int64_t t = 0; t < a.size(); ++t)
    ASSERT_NEAR(a.data_as<float>()[t], b.data_as<float>()[t], 1e-6) << "pixel " << t;
}
#else
TEST(SeparableConvGpu, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace
}  // namespace halfscope::conv::testing
