// GPU triangular solves (detail::solve_right_cuda, src/linalg/solve_cuda.cu) against an FP64
// LAPACK solve of the same FP32 matrix.
//
// X A = B with A = L L^T the KMS matrix of gpu_cholesky.cpp (kappa_2(A) < 64). The factor has
// backward error e_f = (gamma_{n+1}(2^-24) + e_v) trace(A) / ||A||_F (test_cholesky.cpp) and each
// triangular solve with the same GEMM variant the same first-order term (Higham Thm 8.5 with the
// variant's input and accumulation roundings), so the relative forward error of X is at most
// kappa (3 e_f) to first order; a factor 2 covers the second-order terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "linalg/solve_cpu.hpp"
#include "linalg/solve_cuda.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

namespace halfscope::linalg {
namespace {

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

// gamma_n(u) and the per-variant error term e_v: solve_test_support.hpp.
using test::gamma;
using test::variant_term;

struct Problem {
  std::int64_t n, nb, r;
  std::vector<float> a;  // FP32 matrix, row-major
  std::vector<float> b;  // r x n
  TileMatrix l;          // device factor, uniform:SP
};

Problem make_problem(std::int64_t n, std::int64_t nb, std::int64_t r, float b_scale) {
  Problem p{n, nb, r, {}, {}, {}};
  std::vector<double> a(static_cast<std::size_t>(n * n));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[static_cast<std::size_t>(i * n + j)] = std::pow(kRho, static_cast<double>(std::abs(i - j)));
  p.a.assign(a.begin(), a.end());
  p.b = halfscope::test::random_floats(r * n, -b_scale, b_scale, 42);
  p.l = TileMatrix::from_dense(Array::from_values<double>(a, {n, n}), nb, TileFill::lower,
                               DType::f32, Memory::device);
  (void)cholesky_tiles(p.l, CholeskyOptions{});
  return p;
}

// detail::solve_right_cuda exists only in CUDA builds; without CUDA every case skips before this.
void solve_on_device(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants) {
#if HALFSCOPE_WITH_CUDA
  detail::solve_right_cuda(l, b, variants);
#else
  (void)l, (void)b, (void)variants;
  throw Unsupported("gpu_solve: built without CUDA");
#endif
}

#if HALFSCOPE_HAS_LAPACKE
// Relative Frobenius error of the solved x (r x n, host) against LAPACK's FP64 solve of the same
// FP32 matrix, and the bound of a solve whose worst variant is v (header comment).
struct Checked {
  double error, bound;
};
Checked check_solve(const Problem& p, const Array& x, GemmVariant v) {
  const std::int64_t n = p.n;
  // Reference: X A = B in FP64 (LAPACK dposv of the same FP32 matrix and right-hand sides).
  const std::vector<double> ref = test::dposv_rows(std::vector<double>(p.a.begin(), p.a.end()),
                                                   std::vector<double>(p.b.begin(), p.b.end()), n);
  double trace = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    trace += p.a[static_cast<std::size_t>(i * n + i)];
    for (std::int64_t j = 0; j < n; ++j)
      norm += static_cast<double>(p.a[static_cast<std::size_t>(i * n + j)]) *
              p.a[static_cast<std::size_t>(i * n + j)];
  }
  const double e =
      (gamma(n + 1, std::ldexp(1.0, -24)) + variant_term(v, n)) * trace / std::sqrt(norm);
  return {test::relative_error(x.data_as<float>(), ref), 2 * kKappaBound * 3 * e};
}
#endif

// Relative Frobenius difference between the GPU solve's x (r x n, host) and the CPU emulation of
// the same solve (solve_right_cpu: the same variants, the same RNE roundings of L's tiles and of
// each solved block). They differ in FP32 summation order, and through it in the few solved-block
// entries that round to the other neighbour (one unit u of the operand format each, in a small
// fraction of the entries), so their difference stays well below u, while a span that applied a
// wrong tile or block is off by O(1): tolerance max(u, 1e-5) (the floor for SP and DP, whose
// difference is FP32 summation order alone, ~1e-6). The forward-error bound of check_solve, O(1)
// for the low-precision variants, could not tell.
double difference_from_cpu(const Problem& p, const Array& x,
                           const std::vector<GemmVariant>& variants) {
  TileMatrix host_l(p.l.layout, DType::f32, Memory::host);
  copy_bytes(host_l.storage.data(), Memory::host, p.l.storage.data(), Memory::device,
             p.l.storage.nbytes());
  std::vector<float> b = p.b;
  detail::solve_right_cpu(host_l, b.data(), p.r, variants);
  return test::relative_error(x.data_as<float>(), std::vector<double>(b.begin(), b.end()));
}
double emulation_tolerance(GemmVariant v) {
  const int bits = v == GemmVariant::BF16                         ? 8
                   : v == GemmVariant::SP || v == GemmVariant::DP ? 24
                                                                  : 11;
  return std::max(std::ldexp(1.0, -bits), 1e-5);
}

class GpuSolveTest : public ::testing::TestWithParam<GemmVariant> {};

// Uniform variants: with NT > 4 the low-precision ones update B' outside each span of 4 tile
// columns once (K = 4 nb), with a short last tile row in both passes (300 = 4 x 64 + 44,
// 97 = 13 x 7 + 6). With r >= nb (70, 9 and 300 right-hand sides) the diagonal tiles are solved
// by their inverses on tensor cores, else by strsm; with nb = 256 (700 = 2 x 256 + 188) each
// inverse joins two 128-wide leaves (the last tile's 128 + 60).
TEST_P(GpuSolveTest, MatchesFp64Solve) {
  HS_REQUIRE_GPU();
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "needs LAPACKE for the FP64 reference";
#else
  const GemmVariant v = GetParam();
  struct Case {
    std::int64_t n, nb, r;
  };
  for (const Case c : {Case{300, 64, 5}, Case{300, 64, 70}, Case{97, 7, 3}, Case{97, 7, 9},
                       Case{700, 256, 300}, Case{50, 64, 2}, Case{1, 8, 1}}) {
    const Problem p = make_problem(c.n, c.nb, c.r, 1.0f);
    const std::int64_t nt = p.l.layout.tile_rows();
    const std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), v);
    Array b = Array::from_values<float>(p.b, {c.r, c.n}).to(Memory::device);
    solve_on_device(p.l, b, variants);
    const Array x = b.to(Memory::host);
    const Checked e = check_solve(p, x, v);
    EXPECT_LE(e.error, e.bound) << gemm_variant_name(v) << " n=" << c.n << " nb=" << c.nb
                                << " r=" << c.r;
    // HP2 rounds every updated block to FP16, where an ulp flipped by the summation order is
    // 2^-11 of the block; it never runs in spans, so it is left out of this comparison.
    if (v != GemmVariant::HP2) {
      EXPECT_LE(difference_from_cpu(p, x, variants), emulation_tolerance(v))
          << gemm_variant_name(v) << " n=" << c.n << " nb=" << c.nb << " r=" << c.r;
    }
    if (c.n == 300)
      std::cout << "[measured gpu solve] " << gemm_variant_name(v) << " n=300 nb=64 r=" << c.r
                << " error " << e.error << " (bound " << e.bound << ")\n";
  }
#endif
}

// Variants that change from tile row to tile row: the forward spans 0-3, 4-7 and 12-15, whose
// rows below keep one variant across the span, fuse with runs of HP1, BF16 and TF32 rows; the
// forward span 8-11 (the SP tile (17, 9)) and the backward spans 4-7 (HP1 and BF16 rows), 12-15
// (HP1 and TF32) and 16-18 (the SP tile) run column by column, the backward span 8-11 fuses; both
// kinds meet in each pass.
TEST(GpuSolve, SpansOfMixedVariantsMatchFp64Solve) {
  HS_REQUIRE_GPU();
#if !HALFSCOPE_HAS_LAPACKE
  GTEST_SKIP() << "needs LAPACKE for the FP64 reference";
#else
  const Problem p = make_problem(600, 32, 7, 1.0f);  // NT = 19, last tile row 24 high
  const std::int64_t nt = p.l.layout.tile_rows();
  std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), GemmVariant::HP1);
  for (std::int64_t i = 0; i < nt; ++i)
    for (std::int64_t j = 0; j < i; ++j) {
      GemmVariant& v = variants[static_cast<std::size_t>(i * nt + j)];
      if (i >= 5 && i <= 7) v = GemmVariant::BF16;
      if (i == 13) v = GemmVariant::TF32;
    }
  variants[static_cast<std::size_t>(17 * nt + 9)] = GemmVariant::SP;
  Array b = Array::from_values<float>(p.b, {p.r, p.n}).to(Memory::device);
  solve_on_device(p.l, b, variants);
  // Bounded as a solve in the worst variant present (BF16), and against the CPU emulation of the
  // same variants.
  const Array x = b.to(Memory::host);
  const Checked e = check_solve(p, x, GemmVariant::BF16);
  EXPECT_LE(e.error, e.bound);
  const double emulation = difference_from_cpu(p, x, variants);
  EXPECT_LE(emulation, emulation_tolerance(GemmVariant::BF16));
  std::cout << "[measured gpu solve] mixed spans n=600 nb=32 r=7 error " << e.error << " (bound "
            << e.bound << "), against the CPU emulation " << emulation << "\n";
#endif
}

INSTANTIATE_TEST_SUITE_P(Variants, GpuSolveTest,
                         ::testing::Values(GemmVariant::DP, GemmVariant::SP, GemmVariant::TF32,
                                           GemmVariant::HP1, GemmVariant::HP2, GemmVariant::BF16),
                         [](const ::testing::TestParamInfo<GemmVariant>& param_info) {
                           return std::string(gemm_variant_name(param_info.param));
                         });

TEST(GpuSolve, Fp16OverflowOfSolvedBlockIsReported) {
  HS_REQUIRE_GPU();
  // Right-hand sides of size 1e6: the solved blocks exceed 65504, which HP1 GEMMs cannot read.
  const Problem p = make_problem(300, 64, 2, 1e6f);
  const std::int64_t nt = p.l.layout.tile_rows();
  const std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), GemmVariant::HP1);
  Array b = Array::from_values<float>(p.b, {2, 300}).to(Memory::device);
  try {
    solve_on_device(p.l, b, variants);
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("forward substitution"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("solved block 0"), std::string::npos) << e.what();
  }
}

// A diagonal tile whose FP32 inverse overflows (L_00 = 1e-20 I + strictly lower ones, inverse
// entries up to 1e20^64) solved by its inverse (r >= nb): reported, naming the tile, not left as
// Inf and NaN in X.
TEST(GpuSolve, NonFiniteDiagonalInverseIsReported) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 128, nb = 64, r = 64;
  std::vector<double> l(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      l[static_cast<std::size_t>(i * n + j)] = i == j ? (i < nb ? 1e-20 : 1.0) : (i < nb ? 1.0 : 0);
  const TileMatrix tiles = TileMatrix::from_dense(Array::from_values<double>(l, {n, n}), nb,
                                                  TileFill::lower, DType::f32, Memory::device);
  const std::vector<GemmVariant> variants(4, GemmVariant::SP);
  Array b = Array::from_values<float>(halfscope::test::random_floats(r * n, -1.0f, 1.0f, 3), {r, n})
                .to(Memory::device);
  try {
    solve_on_device(tiles, b, variants);
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("inverse of diagonal tile (0, 0)"), std::string::npos)
        << e.what();
  }
}

// A right-hand side at FLT_MAX, finite but past TF32's range once rounded (the 3xTF32 split of
// the block before its solve by the diagonal tile's inverse, r >= nb): reported as such under
// uniform:SP, naming the block, rather than solved into Inf.
TEST(GpuSolve, RightHandSidesPastTf32RangeAreReported) {
  HS_REQUIRE_GPU();
  const Problem p = make_problem(128, 64, 64, 1.0f);
  std::vector<float> b = p.b;
  b[0] = std::numeric_limits<float>::max();
  const std::vector<GemmVariant> variants(4, GemmVariant::SP);
  Array db = Array::from_values<float>(b, {p.r, p.n}).to(Memory::device);
  try {
    solve_on_device(p.l, db, variants);
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("block 0 of the right-hand sides"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace halfscope::linalg
