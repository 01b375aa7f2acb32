// The FFT methods' grid layout (src/conv/fft_layout.hpp), checked on the CPU without any FFT: the
// padded image and (folded) kernel that the layout prescribes are convolved circularly on the
// transform grid by a plain loop in double, read out through the layout's maps, and compared with
// an FP64 direct reference written from geometry.hpp's formula. What the GPU adds on top (cuFFT's
// transforms of exactly these arrays) is tested in gpu_fft_gemm.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "conv/fft_layout.hpp"
#include "conv/geometry.hpp"

namespace halfscope::conv {
namespace {

std::int64_t wrap_ref(std::int64_t y, std::int64_t n) {
  return ((y % n) + n) % n;
}

// out(i, j) = sum k(u, v) in(i + row0 - u, j + col0 - v), zero or periodic outside.
std::vector<double> direct_reference(const Geometry& g, const std::vector<double>& img,
                                     const std::vector<double>& ker) {
  std::vector<double> out(static_cast<std::size_t>(g.out_rows * g.out_cols), 0.0);
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 0; j < g.out_cols; ++j) {
      double s = 0;
      for (std::int64_t u = 0; u < g.krows; ++u)
        for (std::int64_t v = 0; v < g.kcols; ++v) {
          std::int64_t y = i + g.row0 - u, x = j + g.col0 - v;
          if (g.boundary == Boundary::Circular) {
            y = wrap_ref(y, g.rows);
            x = wrap_ref(x, g.cols);
          } else if (y < 0 || y >= g.rows || x < 0 || x >= g.cols) {
            continue;
          }
          s += ker[static_cast<std::size_t>(u * g.kcols + v)] *
               img[static_cast<std::size_t>(y * g.cols + x)];
        }
      out[static_cast<std::size_t>(i * g.out_cols + j)] = s;
    }
  return out;
}

// What the GPU pipeline computes, with the transforms replaced by a direct circular convolution
// on the n_r x n_c grid.
std::vector<double> layout_emulation(const Geometry& g, const FftLayout& l,
                                     const std::vector<double>& img,
                                     const std::vector<double>& ker) {
  const std::int64_t nr = l.rows.n, nc = l.cols.n;
  std::vector<double> p(static_cast<std::size_t>(nr * nc), 0.0), q = p, c = p;
  for (std::int64_t y = 0; y < nr; ++y)
    for (std::int64_t x = 0; x < nc; ++x) {
      const std::int64_t ys = l.rows.image_source(y), xs = l.cols.image_source(x);
      if (ys >= 0 && xs >= 0)
        p[static_cast<std::size_t>(y * nc + x)] = img[static_cast<std::size_t>(ys * g.cols + xs)];
    }
  for (std::int64_t a = 0; a < l.rows.kfold; ++a)
    for (std::int64_t b = 0; b < l.cols.kfold; ++b)
      for (std::int64_t u = a; u < g.krows; u += l.rows.period)
        for (std::int64_t v = b; v < g.kcols; v += l.cols.period)
          q[static_cast<std::size_t>(a * nc + b)] += ker[static_cast<std::size_t>(u * g.kcols + v)];
  for (std::int64_t y = 0; y < nr; ++y)
    for (std::int64_t x = 0; x < nc; ++x) {
      double s = 0;
      for (std::int64_t a = 0; a < l.rows.kfold; ++a)
        for (std::int64_t b = 0; b < l.cols.kfold; ++b)
          s += q[static_cast<std::size_t>(a * nc + b)] *
               p[static_cast<std::size_t>(wrap_ref(y - a, nr) * nc + wrap_ref(x - b, nc))];
      c[static_cast<std::size_t>(y * nc + x)] = s;
    }
  std::vector<double> out(static_cast<std::size_t>(g.out_rows * g.out_cols), 0.0);
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 0; j < g.out_cols; ++j) {
      const std::int64_t pr = l.all_zero ? -1 : l.rows.readout(i);
      const std::int64_t pc = l.all_zero ? -1 : l.cols.readout(j);
      if (pr >= 0 && pc >= 0) {
        EXPECT_LT(pr, nr);
        EXPECT_LT(pc, nc);
        out[static_cast<std::size_t>(i * g.out_cols + j)] =
            c[static_cast<std::size_t>(pr * nc + pc)];
      }
    }
  return out;
}

Geometry geometry(std::int64_t rows, std::int64_t cols, std::int64_t kr, std::int64_t kc,
                  std::int64_t out_rows, std::int64_t out_cols, std::int64_t row0,
                  std::int64_t col0, Boundary b) {
  Geometry g;
  g.rows = rows;
  g.cols = cols;
  g.krows = kr;
  g.kcols = kc;
  g.out_rows = out_rows;
  g.out_cols = out_cols;
  g.row0 = row0;
  g.col0 = col0;
  g.boundary = b;
  return g;
}

// full, same (convolution and correlation centring), valid when it exists, and odd windows.
std::vector<Geometry> sweep(std::int64_t r, std::int64_t c, std::int64_t kr, std::int64_t kc) {
  std::vector<Geometry> gs;
  for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
    gs.push_back(geometry(r, c, kr, kc, r + kr - 1, c + kc - 1, 0, 0, b));
    gs.push_back(geometry(r, c, kr, kc, r, c, (kr - 1) / 2, (kc - 1) / 2, b));
    gs.push_back(geometry(r, c, kr, kc, r, c, kr / 2, kc / 2, b));
    if (r >= kr && c >= kc)
      gs.push_back(geometry(r, c, kr, kc, r - kr + 1, c - kc + 1, kr - 1, kc - 1, b));
    gs.push_back(geometry(r, c, kr, kc, r + 3, 2, -5, c + kc - 2, b));     // straddles both ends
    gs.push_back(geometry(r, c, kr, kc, 3, c + 4, r + kr + 2, -9, b));     // beyond the full extent
    gs.push_back(geometry(r, c, kr, kc, 2 * r + 1, 1, -2 * r - 3, 1, b));  // far before the start
  }
  return gs;
}

void check_layouts(std::int64_t r, std::int64_t c, std::int64_t kr, std::int64_t kc,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(0.25, 1.0);
  const auto random = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = (rng() & 1 ? 1 : -1) * dist(rng);
    return v;
  };
  const auto img = random(r * c);
  const auto ker = random(kr * kc);
  for (const FftSizeRule rule : {FftSizeRule::Smooth, FftSizeRule::PowerOfTwo})
    for (const Geometry& g : sweep(r, c, kr, kc)) {
      const FftLayout l = plan_fft_layout(g, rule);
      const std::string what = std::to_string(r) + "x" + std::to_string(c) + " image, " +
                               std::to_string(kr) + "x" + std::to_string(kc) + " kernel, out " +
                               std::to_string(g.out_rows) + "x" + std::to_string(g.out_cols) +
                               " at (" + std::to_string(g.row0) + ", " + std::to_string(g.col0) +
                               "), " + (g.boundary == Boundary::Zero ? "zero" : "circular") +
                               (rule == FftSizeRule::Smooth ? ", smooth" : ", pow2");
      EXPECT_TRUE(is_fft_length(l.rows.n, rule) && is_fft_length(l.cols.n, rule)) << what;
      EXPECT_GT(l.rows.n * l.cols.n, 1) << what;
      for (const FftAxis* a : {&l.rows, &l.cols}) {  // everything placed lies on the grid
        ASSERT_LE(a->kfold, a->n) << what;
        ASSERT_LE(a->ext, a->n) << what;
      }
      const auto want = direct_reference(g, img, ker);
      const auto got = layout_emulation(g, l, img, ker);
      for (std::size_t e = 0; e < want.size(); ++e)
        ASSERT_NEAR(got[e], want[e], 1e-12 * (1.0 + static_cast<double>(kr * kc)))
            << what << ", output " << e;
    }
}

TEST(FftLayout, NextFftLength_SmoothEven_IsTheSmallestAcceptableLength) {
  for (std::int64_t n = 0; n <= 5000; ++n) {
    const std::int64_t m = next_fft_length(n, FftSizeRule::Smooth);
    ASSERT_GE(m, std::max<std::int64_t>(n, 1));
    ASSERT_TRUE(is_fft_length(m, FftSizeRule::Smooth)) << n;
    if (n >= 2) {
      ASSERT_EQ(m % 2, 0) << n;
      for (std::int64_t k = n; k < m; ++k)
        ASSERT_FALSE(k % 2 == 0 && is_fft_length(k, FftSizeRule::Smooth)) << n << " -> " << m;
    }
  }
  EXPECT_EQ(next_fft_length(4128, FftSizeRule::Smooth), 4200);  // 4096^2 image, 65^2 kernel, same
  EXPECT_EQ(next_fft_length(8224, FftSizeRule::Smooth), 8232);
  EXPECT_EQ(next_fft_length((std::int64_t{1} << 40) + 1, FftSizeRule::Smooth) % 2, 0);
}

TEST(FftLayout, NextFftLength_PowerOfTwo) {
  EXPECT_EQ(next_fft_length(1, FftSizeRule::PowerOfTwo), 1);
  EXPECT_EQ(next_fft_length(2, FftSizeRule::PowerOfTwo), 2);
  EXPECT_EQ(next_fft_length(3, FftSizeRule::PowerOfTwo), 4);
  EXPECT_EQ(next_fft_length(4128, FftSizeRule::PowerOfTwo), 8192);
  EXPECT_FALSE(is_fft_length(4200, FftSizeRule::PowerOfTwo));
  EXPECT_TRUE(is_fft_length(4200, FftSizeRule::Smooth));
  EXPECT_FALSE(is_fft_length(4099, FftSizeRule::Smooth));  // prime
}

TEST(FftLayout, ZeroBoundary_GridIsAsSmallAsTheWindowAllows) {
  // valid mode needs only the image extent; same needs about half the kernel more; full all of it.
  const auto valid = plan_fft_layout(
      geometry(4096, 4096, 65, 65, 4032, 4032, 64, 64, Boundary::Zero), FftSizeRule::Smooth);
  EXPECT_EQ(valid.rows.n, 4096);
  const auto same = plan_fft_layout(
      geometry(4096, 4096, 65, 65, 4096, 4096, 32, 32, Boundary::Zero), FftSizeRule::Smooth);
  EXPECT_EQ(same.rows.n, 4200);
  EXPECT_EQ(same.spectrum_elems(), 4200 * 2101);
  const auto full = plan_fft_layout(geometry(100, 100, 29, 29, 128, 128, 0, 0, Boundary::Zero),
                                    FftSizeRule::PowerOfTwo);
  EXPECT_EQ(full.cols.n, 128);
}

TEST(FftLayout, Circular_ExactGridWhenFastElseExtended) {
  const auto exact = plan_fft_layout(geometry(64, 48, 9, 9, 64, 48, 4, 4, Boundary::Circular),
                                     FftSizeRule::Smooth);
  EXPECT_EQ(exact.rows.n, 64);
  EXPECT_EQ(exact.cols.n, 48);
  const auto prime = plan_fft_layout(geometry(127, 131, 7, 7, 127, 131, 3, 3, Boundary::Circular),
                                     FftSizeRule::Smooth);
  EXPECT_EQ(prime.rows.n, next_fft_length(127 + 6, FftSizeRule::Smooth));
  const auto half = plan_fft_layout(geometry(48, 48, 9, 9, 48, 48, 4, 4, Boundary::Circular),
                                    FftSizeRule::PowerOfTwo);
  EXPECT_EQ(half.rows.n, 64);
}

TEST(FftLayout, OneRowAndOneColumnImages_UseOneDimensionalTransforms) {
  std::int64_t dims[2] = {0, 0};
  const auto row =
      plan_fft_layout(geometry(1, 61, 1, 7, 1, 67, 0, 0, Boundary::Zero), FftSizeRule::Smooth);
  EXPECT_EQ(row.plan_dims(dims), 1);
  EXPECT_EQ(dims[0], row.cols.n);
  EXPECT_EQ(row.spectrum_elems(), row.cols.n / 2 + 1);
  const auto col =
      plan_fft_layout(geometry(45, 1, 6, 1, 50, 1, 0, 0, Boundary::Zero), FftSizeRule::Smooth);
  EXPECT_EQ(col.plan_dims(dims), 1);
  EXPECT_EQ(dims[0], col.rows.n);
  EXPECT_EQ(col.spectrum_elems(), col.rows.n / 2 + 1);
  const auto dot = plan_fft_layout(geometry(1, 1, 1, 1, 1, 1, 0, 0, Boundary::Circular),
                                   FftSizeRule::PowerOfTwo);
  EXPECT_EQ(dot.rows.n * dot.cols.n, 2);
}

TEST(FftLayout, WindowOutsideTheFullExtent_IsAllZero) {
  EXPECT_TRUE(
      plan_fft_layout(geometry(10, 10, 3, 3, 4, 4, 12, 0, Boundary::Zero), FftSizeRule::Smooth)
          .all_zero);
  EXPECT_TRUE(
      plan_fft_layout(geometry(10, 10, 3, 3, 4, 4, 0, -4, Boundary::Zero), FftSizeRule::Smooth)
          .all_zero);
  EXPECT_FALSE(
      plan_fft_layout(geometry(10, 10, 3, 3, 4, 4, 0, -3, Boundary::Zero), FftSizeRule::Smooth)
          .all_zero);
  EXPECT_FALSE(
      plan_fft_layout(geometry(10, 10, 3, 3, 4, 4, 12, 0, Boundary::Circular), FftSizeRule::Smooth)
          .all_zero);
}

TEST(FftLayout, F64Emulation_OddAndEvenKernels_MatchDirectReference) {
  check_layouts(11, 13, 3, 3, 1);
  check_layouts(12, 9, 4, 5, 2);
  check_layouts(7, 16, 6, 2, 3);
}

TEST(FftLayout, F64Emulation_KernelLargerThanImage_MatchDirectReference) {
  check_layouts(5, 7, 9, 11, 4);   // folds once along both axes (circular)
  check_layouts(3, 4, 10, 13, 5);  // folds several times
  check_layouts(6, 6, 6, 6, 6);    // kernel exactly the image
}

TEST(FftLayout, F64Emulation_OneRowOneColumnAndPrimeImages_MatchDirectReference) {
  check_layouts(1, 19, 1, 4, 7);
  check_layouts(17, 1, 5, 1, 8);
  check_layouts(1, 1, 1, 1, 9);
  check_layouts(1, 5, 3, 7, 10);
  check_layouts(13, 11, 5, 3, 11);
}

}  // namespace
}  // namespace halfscope::conv
