// The factorization's panel solve (detail::panel_trsm, src/linalg/panel_trsm_cuda.cu), the
// substitutions' diagonal solves by inverses (detail::apply_inverse) and the split16 diagonal
// update against FP64 on the host.
//
// X L^T = T with L lower triangular, diagonal in [1, 2], off-diagonal entries uniform in
// [-1, 1] / w, so kappa(L) stays below 4. Every operation is FP32 (leaves by FP32 GEMMs with
// their inverses, themselves formed by FP32 substitution; FP32 GEMMs between halves), so with
// random signs the relative Frobenius error stays below about kappa sqrt(w) 2^-24, which the
// leaves' inverses at most double: bound 8 sqrt(w) 2^-24 (1.1e-5 at w = 512); a block applied to
// the wrong columns, or not at all, is off by O(1 / w) or more. Widths 512 (two levels of
// halving, leaves of 128), 300 (128 + 172, then 128 + 44), 128 (one leaf) and 97; leading
// dimensions larger than the row count, whose padding rows must be left alone. Skips without a
// GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "linalg/diag_inverse_cuda.hpp"
#include "linalg/panel_trsm_cuda.hpp"
#include "linalg/tile_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace {

#if HALFSCOPE_WITH_CUDA
// L lower triangular, w x w column-major (ld w): diagonal in [1, 2], entries below uniform in
// [-1, 1] / w, so kappa(L) stays below 4.
std::vector<float> random_lower(std::int64_t w, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> l(static_cast<std::size_t>(w * w), 0.0f);
  for (std::int64_t j = 0; j < w; ++j) {
    l[static_cast<std::size_t>(j * w + j)] = static_cast<float>(1.5 + 0.5 * u(rng));
    for (std::int64_t i = j + 1; i < w; ++i)
      l[static_cast<std::size_t>(j * w + i)] = static_cast<float>(u(rng) / static_cast<double>(w));
  }
  return l;
}
#endif

TEST(GpuPanelTrsm, MatchesFp64Solve) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  struct Case {
    std::int64_t rows, ldx, w;
  };
  for (const Case c :
       {Case{1500, 1500, 512}, Case{777, 800, 300}, Case{1000, 1000, 128}, Case{64, 70, 97}}) {
    std::mt19937_64 rng(7 + static_cast<std::uint64_t>(c.w));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::int64_t w = c.w;
    const std::vector<float> l = random_lower(w, rng);
    std::vector<float> t(static_cast<std::size_t>(c.ldx * w));
    for (float& v : t) v = static_cast<float>(u(rng));
    // FP64 reference, column by column: x_j = (t_j - sum_{q<j} x_q L_jq) / L_jj.
    std::vector<double> x(t.begin(), t.end());
    for (std::int64_t j = 0; j < w; ++j)
      for (std::int64_t r = 0; r < c.rows; ++r) {
        double s = x[static_cast<std::size_t>(j * c.ldx + r)];
        for (std::int64_t q = 0; q < j; ++q)
          s -= x[static_cast<std::size_t>(q * c.ldx + r)] * l[static_cast<std::size_t>(q * w + j)];
        x[static_cast<std::size_t>(j * c.ldx + r)] = s / l[static_cast<std::size_t>(j * w + j)];
      }
    Array dl = Array::from_values<float>(l, {w, w}).to(Memory::device);
    Array dx = Array::from_values<float>(t, {w, c.ldx}).to(Memory::device);
    cuda::CublasHandle blas;
    Array scratch(DType::f32, {detail::panel_trsm_scratch(c.rows, w)}, Memory::device);
    detail::PanelBlocks panel;
    panel.x = dx.data_as<float>(), panel.count = 1, panel.rows = c.rows;
    panel.last_rows = c.rows, panel.ld = c.ldx;
    detail::panel_trsm(blas.get(), dl.data_as<float>(), w, panel, w, scratch.data_as<float>());
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    const Array hx = dx.to(Memory::host);
    double num = 0.0, den = 0.0;
    for (std::int64_t j = 0; j < w; ++j)
      for (std::int64_t r = 0; r < c.ldx; ++r) {
        const std::size_t e = static_cast<std::size_t>(j * c.ldx + r);
        // Rows past `rows` (ld padding) must be left as they were.
        const double ref = r < c.rows ? x[e] : static_cast<double>(t[e]);
        const double d = hx.data_as<float>()[e] - ref;
        num += d * d;
        den += ref * ref;
      }
    const double err = std::sqrt(num / den);
    const double bound = 8.0 * std::sqrt(static_cast<double>(w)) * std::ldexp(1.0, -24);
    EXPECT_LE(err, bound) << "rows " << c.rows << " w " << w;
    std::cout << "[measured panel trsm] rows " << c.rows << " w " << w << " error " << err
              << " (bound " << bound << ")\n";
  }
#endif
}

// The layout the factorization passes: a column of `count` tiles below the diagonal tile, each
// w x w (ld w) at a stride of w^2 elements, the last one only 100 rows high (ld 100); w = 256 (two
// leaves, one halving) and 384 (leaves 0 and 1 after halving 128 + 256, then 128 + 128). Each row
// of the panel is its own solve, so the reference and the bound are MatchesFp64Solve's; a leaf or
// a block between halves applied at the wrong column or tile is off by O(1 / w) or more.
// With split16 (PanelSplit) the blocks between halves run as FP16 split products: exponents -10
// for L and blocks 0 and 3 (|X| < 16 = 2^(e + 14)), -9 for block 2 (another scale), none for
// block 1 (strict FP32), and the short last block strict FP32 too. Each split product errs by
// 3 2^-22 of its absolute sum at most (Split16DiagonalUpdateIsFp32Grade, which checks that
// precision), amplified by kappa < 4: the bound gains 2 kappa 2^-20 (7.6e-6). A wrong part, scale
// or run is off by O(1 / sqrt(w)); the split result must differ from the strict one (it ran).
TEST(GpuPanelTrsm, TileColumnMatchesFp64Solve) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  std::vector<std::vector<float>> strict;  // per width, the strict FP32 result
  for (const bool split16 : {false, true})
    for (const std::int64_t w : {256, 384}) {
      const std::int64_t count = 4, last = 100, stride = w * w;
      std::mt19937_64 rng(17 + static_cast<std::uint64_t>(w));
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      const std::vector<float> l = random_lower(w, rng);
      std::vector<float> t(static_cast<std::size_t>(count * stride));
      for (float& v : t) v = static_cast<float>(u(rng));
      std::vector<double> x(t.begin(), t.end());
      for (std::int64_t b = 0; b < count; ++b) {
        const std::int64_t rows = b == count - 1 ? last : w;  // ld = rows
        double* xb = x.data() + b * stride;
        for (std::int64_t j = 0; j < w; ++j)
          for (std::int64_t r = 0; r < rows; ++r) {
            double sum = xb[j * rows + r];
            for (std::int64_t q = 0; q < j; ++q)
              sum -= xb[q * rows + r] * l[static_cast<std::size_t>(q * w + j)];
            xb[j * rows + r] = sum / l[static_cast<std::size_t>(j * w + j)];
          }
      }
      Array dl = Array::from_values<float>(l, {w, w}).to(Memory::device);
      Array dx = Array::from_values<float>(t, {count * stride}).to(Memory::device);
      Array scratch(DType::f32, {detail::panel_trsm_scratch((count - 1) * w + last, w)},
                    Memory::device);
      detail::PanelBlocks panel;
      panel.x = dx.data_as<float>(), panel.count = count, panel.rows = w, panel.last_rows = last;
      panel.stride = stride;
      cuda::CublasHandle blas;
      const std::vector<std::int32_t> exponents{-10, -10, detail::kNoSplitExponent, -9, -10};
      Array dev_exponents = Array::from_values<std::int32_t>(exponents, {5}).to(Memory::device);
      Array parts(DType::f16, {detail::panel_trsm_split_scratch((count - 1) * w + last, w)},
                  Memory::device);
      const std::vector<std::uint64_t> none{~0ULL};
      Array flag = Array::from_values<std::uint64_t>(none, {1}).to(Memory::device);
      detail::PanelSplit split;
      split.exponents = dev_exponents.data_as<int>(), split.host_exponents = exponents.data();
      split.parts = parts.data();
      split.flag = reinterpret_cast<unsigned long long*>(flag.data_as<std::uint64_t>());
      detail::panel_trsm(blas.get(), dl.data_as<float>(), w, panel, w, scratch.data_as<float>(),
                         split16 ? &split : nullptr);
      HS_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(flag.to(Memory::host).data_as<std::uint64_t>()[0], ~0ULL);
      const Array hx = dx.to(Memory::host);
      const float* got = hx.data_as<float>();
      if (!split16) strict.emplace_back(got, got + x.size());
      if (split16) {
        const std::vector<float>& ref = strict[w == 256 ? 0 : 1];
        EXPECT_FALSE(std::equal(ref.begin(), ref.end(), got)) << "w " << w;
      }
      double num = 0.0, den = 0.0;
      for (std::size_t e = 0; e < x.size(); ++e) {
        // Past the last block's last_rows x w elements: untouched.
        const bool inside = static_cast<std::int64_t>(e) < (count - 1) * stride + last * w;
        const double ref = inside ? x[e] : static_cast<double>(t[e]);
        const double d = hx.data_as<float>()[e] - ref;
        num += d * d;
        den += ref * ref;
      }
      const double err = std::sqrt(num / den);
      const double bound = 8.0 * std::sqrt(static_cast<double>(w)) * std::ldexp(1.0, -24) +
                           (split16 ? 8.0 * std::ldexp(1.0, -20) : 0.0);
      EXPECT_LE(err, bound) << "w " << w << (split16 ? " split16" : "");
      std::cout << "[measured panel trsm] tile column w " << w << (split16 ? " split16" : "")
                << " error " << err << " (bound " << bound << ")\n";
    }
#endif
}

// L X = T and L^T X = T by the tile's inverse (detail::negated_inverse, then apply_inverse: 3xTF32
// on tensor cores), L as in MatchesFp64Solve (kappa < 4), X w x r with ld w + 5 (the padding rows
// must stay as they were). The inverse is formed in FP32 (leaves by substitution, the blocks
// below them by GEMMs; error below kappa sqrt(w) 2^-24 relative), each product entry of the
// application errs by at most 1.25 x 2^-20 of its absolute sum (the TF32 truncation of the low
// part in each mixed product, 2^-21 each, and the dropped low x low term, 2^-22) plus sqrt(w)
// 2^-24 of summation, each amplified by at most kappa: bound 2 kappa (2 sqrt(w) 2^-24 + 1.25 x
// 2^-20) (3.1e-5 at w = 512). The inverse applied untransposed for L^T, or not at all, is off by
// O(1 / sqrt(w)) or more. Widths 512 (leaves joined over two levels), 300 (128 + 172, then 128 +
// 44) and 7 (one leaf).
TEST(GpuDiagInverse, MatchesFp64Solve) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  for (const std::int64_t w : {512, 300, 7})
    for (const bool transpose : {false, true}) {
      const std::int64_t r = 700, ldx = w + 5;
      std::mt19937_64 rng(3 + static_cast<std::uint64_t>(w));
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      const std::vector<float> l = random_lower(w, rng);
      auto at = [&](std::int64_t i, std::int64_t j) {  // op(L)_ij
        return static_cast<double>(l[static_cast<std::size_t>(transpose ? i * w + j : j * w + i)]);
      };
      std::vector<float> t(static_cast<std::size_t>(ldx * r));
      for (float& v : t) v = static_cast<float>(u(rng));
      // FP64 substitution per column: forward for L, backward for L^T.
      std::vector<double> x(t.begin(), t.end());
      for (std::int64_t c = 0; c < r; ++c)
        for (std::int64_t s = 0; s < w; ++s) {
          const std::int64_t i = transpose ? w - 1 - s : s;
          double sum = x[static_cast<std::size_t>(c * ldx + i)];
          for (std::int64_t q = 0; q < w; ++q)
            if (q != i && at(i, q) != 0.0)
              sum -= at(i, q) * x[static_cast<std::size_t>(c * ldx + q)];
          x[static_cast<std::size_t>(c * ldx + i)] = sum / at(i, i);
        }
      Array dl = Array::from_values<float>(l, {w, w}).to(Memory::device);
      Array dx = Array::from_values<float>(t, {r, ldx}).to(Memory::device);
      Array inv(DType::f32, {w, w}, Memory::device);
      Array scratch(DType::f32, {detail::apply_inverse_scratch(w, r)}, Memory::device);
      const std::vector<std::uint64_t> none{~0ULL};
      Array flag = Array::from_values<std::uint64_t>(none, {1}).to(Memory::device);
      auto* f = reinterpret_cast<detail::FailureCode*>(flag.data_as<std::uint64_t>());
      cuda::CublasHandle blas;
      detail::negated_inverse(blas.get(), dl.data_as<float>(), w, w, inv.data_as<float>(),
                              scratch.data_as<float>());
      detail::apply_inverse(blas.get(), inv.data_as<float>(), w, transpose, dx.data_as<float>(),
                            ldx, r, scratch.data_as<float>(), f, 1, 2);
      HS_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(flag.to(Memory::host).data_as<std::uint64_t>()[0], ~0ULL);
      const Array hx = dx.to(Memory::host);
      double num = 0.0, den = 0.0;
      for (std::int64_t c = 0; c < r; ++c)
        for (std::int64_t i = 0; i < ldx; ++i) {
          const std::size_t e = static_cast<std::size_t>(c * ldx + i);
          const double ref = i < w ? x[e] : static_cast<double>(t[e]);
          const double d = hx.data_as<float>()[e] - ref;
          num += d * d;
          den += ref * ref;
        }
      const double err = std::sqrt(num / den);
      const double bound = 2 * 4.0 *
                           (2 * std::sqrt(static_cast<double>(w)) * std::ldexp(1.0, -24) +
                            1.25 * std::ldexp(1.0, -20));
      EXPECT_LE(err, bound) << "w " << w << " transpose " << transpose;
      std::cout << "[measured diagonal inverse solve] w " << w << (transpose ? " L^T" : " L")
                << " error " << err << " (bound " << bound << ")\n";
    }
#endif
}

#if HALFSCOPE_WITH_CUDA
// diagonal_exponents of one tile with diagonal `d` (its off-diagonal entries 0).
int exponent_of_diagonal(const std::vector<float>& d) {
  const auto h = static_cast<std::int64_t>(d.size());
  std::vector<float> tile(static_cast<std::size_t>(h * h), 0.0f);
  for (std::int64_t a = 0; a < h; ++a) tile[static_cast<std::size_t>(a * (h + 1))] = d[a];
  Array dev = Array::from_values<float>(tile, {h * h}).to(Memory::device);
  Array out(DType::i32, {1}, Memory::device);
  const auto host =
      detail::diagonal_exponents(dev.data_as<float>(), {0}, {h}, out.data_as<int>(), nullptr);
  EXPECT_EQ(out.to(Memory::host).data_as<int>()[0], host[0]);
  return host[0];
}
#endif

// The split16 exponent of a tile row: sqrt(max diagonal) < 2^(e + 14) <= 2 sqrt(max diagonal);
// strict FP32 (kNoSplitExponent) where the diagonal spans more than 2^20 or is not positive.
TEST(GpuPanelTrsm, DiagonalExponents) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  EXPECT_EQ(exponent_of_diagonal({1.0f, 0.5f, 1.0f}), -13);  // sqrt(1) < 2^1
  EXPECT_EQ(exponent_of_diagonal({4.1f, 3.0f}), -12);        // sqrt(4.1) < 4
  EXPECT_EQ(exponent_of_diagonal({1e6f, 2e5f}), -4);         // sqrt(1e6) = 1000 < 2^10
  EXPECT_EQ(exponent_of_diagonal({3e-9f, 1e-9f}), -28);      // sqrt(3e-9) = 5.5e-5 < 2^-14
  EXPECT_EQ(exponent_of_diagonal({1.0f, std::ldexp(1.0f, -20)}), -13);  // a span of 2^20
  EXPECT_EQ(exponent_of_diagonal({1.0f, std::ldexp(1.0f, -21)}), detail::kNoSplitExponent);
  EXPECT_EQ(exponent_of_diagonal({1.0f, 0.0f}), detail::kNoSplitExponent);
  EXPECT_EQ(exponent_of_diagonal({1.0f, -1.0f}), detail::kNoSplitExponent);
#endif
}

// The diagonal tiles' update of a factorization with a low-precision policy (split16): C -= A A^T
// for a 256 x 256 tile A whose row a has norm sqrt(d_a), d_a spread over 2^16, some entries of
// every row 2^-20 of the others (their FP16 low parts subnormal), split on the device by
// fp16_split at the tile row's exponent, then one FP16 GEMM with K = 3 x 256 and scale 2^(2e).
// Each entry is split to 2^-22 relative (the hi + lo rounding) or 2^-25 2^e absolute (a subnormal
// part), 2^-28 sqrt(d_a) at most; a product drops lo x lo (2^-22) and two part errors (2^-22
// each), the FP32 sums add sqrt(3k) 2^-24 and the result's rounding 2^-23 (C and the product
// are both at most sqrt(d_i d_j)): relative to sqrt(d_i d_j), the error stays below
// 3 2^-22 + 2 sqrt(k) 2^-28 + sqrt(3k) 2^-24 + 2^-23, doubled for slack (5.2e-6 at k = 256). The
// high parts alone (HP1) err by 1.3e-4 here.
TEST(GpuPanelTrsm, Split16DiagonalUpdateIsFp32Grade) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t nb = 256, elems = nb * nb;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> d(static_cast<std::size_t>(nb)), a(static_cast<std::size_t>(elems));
  std::vector<float> c(static_cast<std::size_t>(elems));
  for (std::int64_t i = 0; i < nb; ++i) {
    d[static_cast<std::size_t>(i)] = static_cast<float>(3.0 * std::ldexp(1.0, -16 * i / nb));
    double norm = 0.0;
    for (std::int64_t l = 0; l < nb; ++l) {
      const double v = u(rng) * (l % 7 == 3 ? std::ldexp(1.0, -20) : 1.0);
      a[static_cast<std::size_t>(l * nb + i)] = static_cast<float>(v);
      norm += v * v;
    }
    const double s = std::sqrt(d[static_cast<std::size_t>(i)] / norm);
    for (std::int64_t l = 0; l < nb; ++l) a[static_cast<std::size_t>(l * nb + i)] *= s;
  }
  for (std::int64_t j = 0; j < nb; ++j)  // C on the scale of the products, as in a factorization
    for (std::int64_t i = 0; i < nb; ++i)
      c[static_cast<std::size_t>(j * nb + i)] = static_cast<float>(
          u(rng) * std::sqrt(static_cast<double>(d[static_cast<std::size_t>(i)]) *
                             d[static_cast<std::size_t>(j)]));
  const int e = exponent_of_diagonal(d);
  ASSERT_EQ(e, -13);  // sqrt(3) < 2
  Array da = Array::from_values<float>(a, {elems}).to(Memory::device);
  Array dc = Array::from_values<float>(c, {elems}).to(Memory::device);
  const std::vector<std::int32_t> exponents{e};
  Array exponent = Array::from_values<std::int32_t>(exponents, {1}).to(Memory::device);
  Array parts(DType::f16, {4 * elems}, Memory::device);
  const std::vector<std::uint64_t> none{~0ULL};
  Array flag = Array::from_values<std::uint64_t>(none, {1}).to(Memory::device);
  auto* f = reinterpret_cast<detail::FailureCode*>(flag.data_as<std::uint64_t>());
  detail::BlockSet set;
  set.base = da.data_as<float>(), set.count = 1, set.rows = nb, set.last_rows = nb, set.cols = nb;
  set.tag_base = 1, set.exponents = exponent.data_as<int>(), set.part_stride = elems;
  detail::convert_blocks(set, detail::Rounding::fp16_split, parts.data(), f, nullptr);
  detail::GemmBatch g;
  const auto* p = static_cast<const std::uint16_t*>(parts.data());
  g.m = nb, g.n = nb, g.k = 3 * nb, g.a = p, g.lda = nb, g.b = p + elems, g.ldb = nb;
  g.c = dc.data_as<float>(), g.ldc = nb, g.scale = std::ldexp(1.0f, 2 * e);
  cuda::CublasHandle blas;
  detail::gemm_batched(blas.get(), GemmVariant::HP1, g);
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(flag.to(Memory::host).data_as<std::uint64_t>()[0], ~0ULL);
  const Array hc = dc.to(Memory::host);
  double worst = 0.0;
  for (std::int64_t j = 0; j < nb; ++j)
    for (std::int64_t i = 0; i < nb; ++i) {
      double ref = c[static_cast<std::size_t>(j * nb + i)];
      for (std::int64_t l = 0; l < nb; ++l)
        ref -= static_cast<double>(a[static_cast<std::size_t>(l * nb + i)]) *
               a[static_cast<std::size_t>(l * nb + j)];
      const double scale = std::sqrt(static_cast<double>(d[static_cast<std::size_t>(i)]) *
                                     d[static_cast<std::size_t>(j)]);
      worst = std::max(worst, std::abs(hc.data_as<float>()[j * nb + i] - ref) / scale);
    }
  const double k = static_cast<double>(nb);
  const double bound = 2 * (3 * std::ldexp(1.0, -22) + 2 * std::sqrt(k) * std::ldexp(1.0, -28) +
                            std::sqrt(3 * k) * std::ldexp(1.0, -24) + std::ldexp(1.0, -23));
  EXPECT_LE(worst, bound);
  std::cout << "[measured split16 diagonal update] k " << nb << " worst error " << worst
            << " (bound " << bound << ")\n";
#endif
}

}  // namespace
}  // namespace halfscope::linalg
