// fft_cpu against the FP64 direct reference of cpu_backend_testing.hpp, every precision, with
// norm-wise bounds.
//
// A radix-2 (or FFTW's) transform of length N in arithmetic of unit roundoff u has
// ||computed - exact||_2 <= log2(N) eta ||exact||_2, eta = u + gamma_4 (sqrt 2 + u) ~ 6.7 u
// (Higham, Accuracy and Stability, Thm 24.2, twiddles rounded once). A convolution by FFT runs
// three transforms and one product, so the worst case is about 3 * 6.7 = 20 u log2(N) times the
// size of the result. That worst case needs every rounding error to line up; they do not (they
// add like a random walk, smaller by ~sqrt(3 log2 N)), and a bound 10x above what the method
// reaches would let real bugs through in FP16. The tests therefore use the norm-wise bound
//   ||out - ref||_2 <= C u_compute log2(N) ||A||_2 + u_storage ||ref||_2,  C = 2,
// where A(i, j) = sum |k(u, v)| |in(...)| is the magnitude the rounding errors scale with (it
// equals |ref| for positive data and stays meaningful under cancellation), log2(N) is bounded
// from the shapes (the grid has at most 4 (rows + krows) (cols + kcols) points), and the last
// term is the rigorous bound of the final rounding to storage. C = 2 is at least 3x above the
// worst case of the sweep in every precision (printed by each test), while an indexing, folding
// or scaling bug gives errors of order ||ref||. For the emulated FP16 transform the scalings that
// reach FP16's subnormal range add at most N 2^-25 per pixel, times the documented 2^(cx + ck).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <thread>

#include "conv/backends.hpp"
#include "conv/cpu_common.hpp"
#include "conv/fft_cpu_internal.hpp"
#include "conv/fft_plan_cache.hpp"
#include "conv/fft_radix2.hpp"
#include "cpu_backend_testing.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {
namespace {

using testing::Reference;

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

int ceil_log2(double v) {
  return static_cast<int>(std::ceil(std::log2(v)));
}

/// Runs fft_cpu on every shape x geometry and checks the norm-wise bound; sets `worst` to the
/// largest ratio of the error to the bound (1 would just pass).
template <class S>
void check_all(double& worst, Precision p, double u_compute, double u_storage, bool half_scaling,
               float lo = 0.5f, float hi = 1.5f) {
  worst = 0;
  std::uint64_t seed = 900;
  for (const testing::Shape4& s : testing::shapes()) {
    std::vector<double> img, ker;
    const Array image = testing::storage_array<S>(
        test::random_floats(s.rows * s.cols, lo, hi, ++seed), s.rows, s.cols, img);
    const Array kernel = testing::storage_array<S>(
        test::random_floats(s.krows * s.kcols, 0.1f, 1.0f, ++seed), s.krows, s.kcols, ker);
    double max_x = 0, k1 = 0;
    for (double x : img) max_x = std::max(max_x, std::fabs(x));
    for (double k : ker) k1 += std::fabs(k);
    const double n_grid = 4.0 * static_cast<double>((s.rows + s.krows) * (s.cols + s.kcols));
    for (const Geometry& g : testing::geometries(s)) {
      Array out = testing::poisoned<S>(g.out_rows, g.out_cols);
      fft_cpu(g, p, image, kernel, out);
      const Reference ref = testing::reference(g, img, ker);
      const std::vector<double> got = testing::values_of<S>(out);
      const double global =
          2 * u_compute * std::log2(n_grid) * max_x * k1 +
          (half_scaling ? n_grid * 0x1p-25 * std::ldexp(1.0, ceil_log2(max_x) + ceil_log2(k1))
                        : 0.0);
      double ratio = 0;
      for (std::size_t t = 0; t < got.size(); ++t) {
        ASSERT_TRUE(std::isfinite(got[t]))
            << "pixel " << t << " not written: " << testing::describe(g);
        const double err = std::fabs(got[t] - ref.value[t]);
        const double bound = global + u_storage * std::fabs(ref.value[t]);
        ASSERT_LE(err, bound) << "pixel " << t << ": got " << got[t] << ", FP64 " << ref.value[t]
                              << "; " << testing::describe(g);
        ratio = std::max(ratio, err / bound);
      }
      worst = std::max(worst, ratio);
      if (std::getenv("HS_VERBOSE"))
        std::printf("%s: error / bound %.3g\n", testing::describe(g).c_str(), ratio);
    }
  }
  std::printf("    largest error / bound %.3g\n", worst);
}

TEST(FftCpu, Radix2_Double_EqualsNaiveDft) {
  for (std::int64_t n = 1; n <= 64; n *= 2) {
    const cpu::Radix2Fft<double> fft(n);
    const std::vector<float> v =
        test::random_floats(2 * n, -1.0f, 1.0f, static_cast<std::uint64_t>(n));
    for (bool inverse : {false, true}) {
      std::vector<cpu::Complex<double>> x(static_cast<std::size_t>(n));
      for (std::int64_t t = 0; t < n; ++t)
        x[static_cast<std::size_t>(t)] = {v[2 * t], v[2 * t + 1]};
      const auto in = x;
      fft.transform(x.data(), inverse);
      for (std::int64_t k = 0; k < n; ++k) {
        std::complex<double> want = 0;
        for (std::int64_t t = 0; t < n; ++t) {
          const double a = (inverse ? 2 : -2) * std::numbers::pi * static_cast<double>(k * t % n) /
                           static_cast<double>(n);
          want += std::complex<double>(in[t].re, in[t].im) * std::polar(1.0, a);
        }
        EXPECT_NEAR(x[k].re, want.real(), 1e-13) << "n " << n << " k " << k;
        EXPECT_NEAR(x[k].im, want.imag(), 1e-13) << "n " << n << " k " << k;
      }
    }
  }
}

TEST(FftCpu, Radix2_Half_WithinHighamBoundOfExactTransform) {
  const double u = 0x1p-11, eta = u + 4 * u / (1 - 4 * u) * (std::numbers::sqrt2 + u);
  for (std::int64_t n : {8, 256, 1024}) {
    const std::vector<float> v = test::random_floats(2 * n, -1.0f, 1.0f, 11);
    std::vector<cpu::Complex<Half>> xh(static_cast<std::size_t>(n));
    std::vector<cpu::Complex<double>> xd(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
      xh[t] = {Half(v[2 * t]), Half(v[2 * t + 1])};
      xd[t] = {static_cast<double>(xh[t].re), static_cast<double>(xh[t].im)};
    }
    cpu::Radix2Fft<Half>(n).transform(xh.data(), false);
    cpu::Radix2Fft<double>(n).transform(xd.data(), false);
    double err = 0, ref = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      err += std::norm(std::complex<double>(static_cast<double>(xh[k].re) - xd[k].re,
                                            static_cast<double>(xh[k].im) - xd[k].im));
      ref += std::norm(std::complex<double>(xd[k].re, xd[k].im));
    }
    const double lg = std::log2(static_cast<double>(n));
    EXPECT_LE(std::sqrt(err / ref), lg * eta / (1 - lg * eta)) << "n " << n;
    EXPECT_GT(std::sqrt(err / ref), 1e-5) << "n " << n << ": not computed in FP16";
  }
}

TEST(FftCpu, Radix2_HalfInFloat_BitIdenticalToHalf) {
  for (std::int64_t n : {2, 64, 512}) {
    const std::vector<float> v = test::random_floats(2 * n, -1.0f, 1.0f, 12);
    std::vector<cpu::Complex<Half>> xh(static_cast<std::size_t>(n));
    std::vector<cpu::Complex<cpu::HalfInFloat>> xf(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
      xh[t] = {Half(v[2 * t]), Half(v[2 * t + 1])};
      xf[t] = {cpu::HalfInFloat(xh[t].re), cpu::HalfInFloat(xh[t].im)};
    }
    for (bool inverse : {false, true}) {
      cpu::Radix2Fft<Half>(n).transform(xh.data(), inverse);
      cpu::Radix2Fft<cpu::HalfInFloat>(n).transform(xf.data(), inverse);
      for (std::int64_t k = 0; k < n; ++k) {
        ASSERT_EQ(xh[k].re.bits, xf[k].re.to_half().bits) << "n " << n << " k " << k;
        ASSERT_EQ(xh[k].im.bits, xf[k].im.to_half().bits) << "n " << n << " k " << k;
      }
    }
  }
}

TEST(FftCpu, Double_F64_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<double>(worst, Precision::Double, 0x1p-53, 0, false, -1.0f, 1.0f);
}

TEST(FftCpu, Single_F32_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<float>(worst, Precision::Single, 0x1p-24, 0x1p-24, false);
}

TEST(FftCpu, Mixed_F16StorageF32Fft_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<Half>(worst, Precision::Mixed, 0x1p-24, 0x1p-11, false);
}

TEST(FftCpu, BF16_BF16StorageF32Fft_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<BFloat16>(worst, Precision::BF16, 0x1p-24, 0x1p-8, false);
}

TEST(FftCpu, Half_EmulatedF16Fft_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<Half>(worst, Precision::Half, 0x1p-11, 0x1p-11, true);
  EXPECT_GT(worst, 0.01);  // really rounded to FP16 along the way (a float FFT would be ~1e-4)
}

TEST(FftCpu, Half_EmulatedF16Fft_SignedData_MatchesFp64DirectNormwise) {
  double worst = 0;
  check_all<Half>(worst, Precision::Half, 0x1p-11, 0x1p-11, true, -1.0f, 1.0f);
}

/// Image values whose plain FP16 transform would overflow (sum 4e6), and tiny ones: the
/// documented scaling keeps both within the same relative bound.
TEST(FftCpu, Half_EmulatedF16Fft_LargeAndTinyImagesScaledWithoutOverflow) {
  for (float mag : {1000.0f, 1e-3f}) {
    std::vector<double> img, ker;
    std::vector<float> kv = test::random_floats(81, 0.1f, 1.0f, 5);
    float sum = 0;
    for (float k : kv) sum += k;
    for (float& k : kv) k /= sum;
    const Array image = testing::storage_array<Half>(
        test::random_floats(64 * 64, 0.5f * mag, 1.5f * mag, 6), 64, 64, img);
    const Array kernel = testing::storage_array<Half>(kv, 9, 9, ker);
    for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
      const Geometry g{64, 64, 9, 9, 64, 64, 4, 4, b};
      Array out = testing::poisoned<Half>(64, 64);
      fft_cpu(g, Precision::Half, image, kernel, out);
      const Reference ref = testing::reference(g, img, ker);
      const std::vector<double> got = testing::values_of<Half>(out);
      std::vector<double> diff(got.size());
      for (std::size_t t = 0; t < got.size(); ++t) diff[t] = got[t] - ref.value[t];
      // Relative error of a smooth positive result: a few u = 2^-11, far below the FFT bound.
      EXPECT_LT(norm2(diff) / norm2(ref.value), 0.01) << "magnitude " << mag;
    }
  }
}

TEST(FftCpu, MixedAndHalf_OverflowIsNumericalErrorWithCount) {
  std::vector<double> img, ker;
  const Array image = testing::storage_array<Half>(std::vector<float>(1600, 250.0f), 40, 40, img);
  const Array kernel = testing::storage_array<Half>(std::vector<float>(256, 2.0f), 16, 16, ker);
  const Geometry g{40, 40, 16, 16, 55, 55, 0, 0, Boundary::Zero};
  for (Precision p : {Precision::Mixed, Precision::Half}) {
    Array out = testing::poisoned<Half>(55, 55);
    try {
      fft_cpu(g, p, image, kernel, out);
      FAIL() << "no NumericalError";
    } catch (const NumericalError& e) {
      EXPECT_NE(std::string(e.what()).find("of 3025 output pixels overflow FP16"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(FftCpu, Single_F32_PlansCachedAndSafeFromManyThreads) {
  std::vector<double> img, ker;
  const Array image =
      testing::storage_array<float>(test::random_floats(30 * 41, 0.5f, 1.5f, 1), 30, 41, img);
  const Array kernel =
      testing::storage_array<float>(test::random_floats(35, 0.1f, 1.0f, 2), 5, 7, ker);
  std::vector<Geometry> gs;
  for (std::int64_t k = 0; k < 4; ++k)  // four different grid shapes
    gs.push_back({30, 41, 5, 7, 34 + k, 47 + k, 0, 0, Boundary::Zero});
  std::vector<Array> want;
  for (const Geometry& g : gs) {
    want.push_back(testing::poisoned<float>(g.out_rows, g.out_cols));
    fft_cpu(g, Precision::Single, image, kernel, want.back());
  }
  const std::size_t plans = cpu::cached_plan_count<float>();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        const Geometry& g = gs[static_cast<std::size_t>((t + rep) % 4)];
        Array out = testing::poisoned<float>(g.out_rows, g.out_cols);
        fft_cpu(g, Precision::Single, image, kernel, out);
        const Array& w = want[static_cast<std::size_t>((t + rep) % 4)];
        for (std::int64_t i = 0; i < out.size(); ++i)
          mismatches[t] += out.data_as<float>()[i] != w.data_as<float>()[i];
      }
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
  EXPECT_EQ(cpu::cached_plan_count<float>(), plans);  // the same shapes planned nothing new
}

TEST(FftCpu, Single_F32_PlanCacheDropsTheOldestAndReplansCorrectly) {
  std::vector<double> ker;
  const Array kernel =
      testing::storage_array<float>(test::random_floats(2 * 2, 0.1f, 1.0f, 4), 2, 2, ker);
  // Circular images 3 x (5 + w) are transformed on their own grid: 40 grids, 80 plans, more than
  // the cache keeps; then the first (dropped) ones again.
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t w = 0; w < (pass == 0 ? 40 : 3); ++w) {
      std::vector<double> img;
      const Array image = testing::storage_array<float>(
          test::random_floats(3 * (5 + w), 0.5f, 1.5f, 3), 3, 5 + w, img);
      const Geometry g{3, 5 + w, 2, 2, 3, 5 + w, 0, 0, Boundary::Circular};
      Array out = testing::poisoned<float>(g.out_rows, g.out_cols);
      fft_cpu(g, Precision::Single, image, kernel, out);
      const Reference ref = testing::reference(g, img, ker);
      for (std::int64_t t = 0; t < out.size(); ++t)
        ASSERT_NEAR(out.data_as<float>()[t], ref.value[static_cast<std::size_t>(t)], 1e-5)
            << testing::describe(g);
      ASSERT_LE(cpu::cached_plan_count<float>(), cpu::kMaxCachedPlans);
    }
  EXPECT_EQ(cpu::cached_plan_count<float>(), cpu::kMaxCachedPlans);
}

// Plans split over the OpenMP threads (fft_threads, where FFTW's OpenMP libraries are linked; the
// deconvolution operator's large grids use them): from 2^18 points, outside parallel regions;
// cached apart from the one-thread plans; their forward and inverse transforms of a 512^2 grid
// within FFTW's rounding of the one-thread ones (Higham's norm-wise 6.7 u32 log2 N each way).
TEST(FftCpu, ThreadedPlansAgreeWithOneThreadPlans) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  const std::int64_t n = 512, points = n * n, half = n * (n / 2 + 1);
  const int threads = cpu::fft_threads(points);
  if (cpu::fftw_threads_linked()) {
    EXPECT_EQ(threads, 2);
    int inside = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      inside = cpu::fft_threads(points);
    }
    EXPECT_EQ(inside, 1);  // a transform inside a parallel region stays on its thread
  }
  EXPECT_EQ(cpu::fft_threads(points - 1), 1);

  const auto f1 = cpu::plan_r2c<float>(n, n, 1), f2 = cpu::plan_r2c<float>(n, n, 2);
  const auto i1 = cpu::plan_c2r<float>(n, n, 1), i2 = cpu::plan_c2r<float>(n, n, 2);
  EXPECT_NE(f1.get(), f2.get());
  EXPECT_NE(i1.get(), i2.get());
  const std::vector<float> v = test::random_floats(points, -1.0f, 1.0f, 7);
  cpu::FftwBuffer<float> x(points, false), z1(points, false), z2(points, false);
  cpu::FftwBuffer<fftwf_complex> y1(half, false), y2(half, false);
  std::copy(v.begin(), v.end(), x.data());
  cpu::execute_r2c(f1, x.data(), y1.data());
  cpu::execute_r2c(f2, x.data(), y2.data());
  const auto rel = [](const float* a, const float* b, std::int64_t m) {
    double d = 0, s = 0;
    for (std::int64_t k = 0; k < m; ++k) {
      d += (static_cast<double>(a[k]) - b[k]) * (static_cast<double>(a[k]) - b[k]);
      s += static_cast<double>(b[k]) * b[k];
    }
    return std::sqrt(d / s);
  };
  const double bound = 2 * 6.7 * 0x1p-24 * std::log2(static_cast<double>(points));
  const double forward = rel(&y2.data()[0][0], &y1.data()[0][0], 2 * half);
  EXPECT_LE(forward, bound);
  cpu::execute_c2r(i1, y1.data(), z1.data());  // c2r overwrites its input: y1, y2 used up here
  cpu::execute_c2r(i2, y2.data(), z2.data());
  const double inverse = rel(z2.data(), z1.data(), points);
  EXPECT_LE(inverse, 2 * bound);
  std::printf("    512^2 on %d threads against 1: forward %.3g, round trip %.3g (bound %.3g)\n",
              threads, forward, inverse, bound);
  omp_set_num_threads(saved);
}

TEST(FftCpu, Tf32_IsUnsupportedListingWhatIs) {
  const Geometry g{4, 4, 3, 3, 4, 4, 1, 1, Boundary::Zero};
  Array image(DType::f32, Shape{4, 4}), kernel(DType::f32, Shape{3, 3}),
      out(DType::f32, Shape{4, 4});
  try {
    fft_cpu(g, Precision::TF32, image, kernel, out);
    FAIL() << "no Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("double, single, half, mixed, bf16"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace halfscope::conv
