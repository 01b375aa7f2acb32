// The factorization's panel solve (detail::panel_trsm, src/linalg/panel_trsm_cuda.cu), the
// substitutions' diagonal solves by inverses (detail::apply_inverse) and the 3xTF32 GEMM against
// FP64 on the host.
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
TEST(GpuPanelTrsm, TileColumnMatchesFp64Solve) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
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
    detail::panel_trsm(blas.get(), dl.data_as<float>(), w, panel, w, scratch.data_as<float>());
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    const Array hx = dx.to(Memory::host);
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
    const double bound = 8.0 * std::sqrt(static_cast<double>(w)) * std::ldexp(1.0, -24);
    EXPECT_LE(err, bound) << "w " << w;
    std::cout << "[measured panel trsm] tile column w " << w << " error " << err << " (bound "
              << bound << ")\n";
  }
#endif
}

// L X = T and L^T X = T by the tile's inverse (detail::negated_inverse, then apply_inverse: 3xTF32
// on tensor cores), L as in MatchesFp64Solve (kappa < 4), X w x r with ld w + 5 (the padding rows
// must stay as they were). The inverse is formed in FP32 (leaves by substitution, the blocks
// below them by GEMMs; error below kappa sqrt(w) 2^-24 relative), each product entry of the
// application errs by at most 1.25 x 2^-20 of its absolute sum (Tf32x3GemmIsFp32Grade) plus sqrt(w)
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

// The diagonal tiles' 3xTF32 update (detail::gemm_tf32x3) of a factorization with a low-precision
// policy: C -= A B^T for two strided 200 x 1024 operand pairs, split on the device by tf32_split.
// Each product is exact to 1.25 x 2^-20 relative at worst (the TF32 truncation of the low part in
// each of the two mixed products, 2^-21 each, and the dropped low x low term, 2^-22), summed in
// FP32 (sqrt(k) 2^-24 with random signs): with a factor 2 of slack the error of an entry relative
// to sum_l |a_il b_jl| stays below 6.2e-6. One TF32 product per term (low parts lost) errs by
// about 2^-11 / sqrt(k) = 1.5e-5 per entry, several times that at the worst entry.
TEST(GpuPanelTrsm, Tf32x3GemmIsFp32Grade) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t m = 200, k = 1024, batch = 2, elems = m * k;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> a(static_cast<std::size_t>(batch * elems)), b(a.size());
  std::vector<float> c(static_cast<std::size_t>(batch * m * m));
  for (float& v : a) v = static_cast<float>(u(rng));
  for (float& v : b) v = static_cast<float>(u(rng));
  for (float& v : c) v = static_cast<float>(u(rng));
  Array da = Array::from_values<float>(a, {batch * elems}).to(Memory::device);
  Array db = Array::from_values<float>(b, {batch * elems}).to(Memory::device);
  Array dc = Array::from_values<float>(c, {batch * m * m}).to(Memory::device);
  Array parts(DType::f32, {4 * batch * elems}, Memory::device);
  float* p = parts.data_as<float>();
  const std::vector<std::uint64_t> none{~0ULL};
  Array flag = Array::from_values<std::uint64_t>(none, {1}).to(Memory::device);
  auto* f = reinterpret_cast<detail::FailureCode*>(flag.data_as<std::uint64_t>());
  detail::BlockSet set;
  set.count = 1, set.rows = batch * elems, set.last_rows = batch * elems, set.cols = 1;
  set.tag_base = 1;
  for (int side = 0; side < 2; ++side) {
    set.base = side == 0 ? da.data_as<float>() : db.data_as<float>();
    set.lo_offset = batch * elems;
    detail::convert_blocks(set, detail::Rounding::tf32_split, p + 2 * side * batch * elems, f,
                           nullptr);
  }
  detail::GemmBatch g;
  g.m = m, g.n = m, g.k = k, g.a = p, g.lda = m, g.stride_a = elems;
  g.b = p + 2 * batch * elems, g.ldb = m, g.stride_b = elems;
  g.c = dc.data_as<float>(), g.ldc = m, g.stride_c = m * m, g.batch = batch;
  detail::SplitOperands lo;
  lo.a_lo = p + batch * elems, lo.b_lo = p + 3 * batch * elems;
  cuda::CublasHandle blas;
  detail::gemm_tf32x3(blas.get(), g, lo);
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(flag.to(Memory::host).data_as<std::uint64_t>()[0], ~0ULL);
  const Array hc = dc.to(Memory::host);
  double worst = 0.0;
  for (std::int64_t t = 0; t < batch; ++t)
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t i = 0; i < m; ++i) {
        double ref = c[static_cast<std::size_t>(t * m * m + j * m + i)], scale = 0.0;
        for (std::int64_t l = 0; l < k; ++l) {
          const double x = a[static_cast<std::size_t>(t * elems + l * m + i)];
          const double y = b[static_cast<std::size_t>(t * elems + l * m + j)];
          ref -= x * y;
          scale += std::abs(x * y);
        }
        const double e = std::abs(hc.data_as<float>()[t * m * m + j * m + i] - ref) / scale;
        worst = std::max(worst, e);
      }
  const double bound =
      2 * (1.25 * std::ldexp(1.0, -20) + std::sqrt(static_cast<double>(k)) * std::ldexp(1.0, -24));
  EXPECT_LE(worst, bound);
  std::cout << "[measured gemm 3xTF32] k " << k << " worst relative error " << worst << " (bound "
            << bound << ")\n";
#endif
}

}  // namespace
}  // namespace halfscope::linalg
