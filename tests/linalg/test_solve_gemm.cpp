// The transposed-operand GEMM updates the triangular solves use (gemm_update in
// src/linalg/gemm_variants.hpp), against gemm_nt_update (tested against FP64 in
// test_cholesky_gemm.cpp) on explicitly transposed copies.
//
// Both round the same operand values the same way, so they differ only by the order of the FP32
// sums: |C_1 - C_2| <= 2 gamma_k(u32) (|C| + |op(A)| |op(B)|) (Higham Thm 3.5 for each), plus
// one FP16 rounding of the result for HP2 (u16 |C|, where a different FP32 sum can round to the
// neighbouring FP16 value). HP3 sums in a fixed order in both: bitwise equal.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "linalg/gemm_variants.hpp"
#include "test_support.hpp"

namespace halfscope::linalg::detail {
namespace {

// Column-major rows x cols copy of the transpose of a column-major cols x rows matrix.
std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(x.size());
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i)
      t[static_cast<std::size_t>(i + j * rows)] = x[static_cast<std::size_t>(j + i * cols)];
  return t;
}

class GemmUpdateTest : public ::testing::TestWithParam<GemmVariant> {};

TEST_P(GemmUpdateTest, TransposesMatchTheNtForm) {
  const GemmVariant v = GetParam();
  const std::int64_t m = 13, n = 7, k = 9;
  const double u32 = 0x1p-24, g = k * u32 / (1 - k * u32);
  // op(A) is m x k, op(B) k x n; A^T is stored k x m, B (no-transpose) k x n.
  const std::vector<float> a = halfscope::test::random_floats(m * k, -2.0f, 2.0f, 1);   // m x k
  const std::vector<float> bt = halfscope::test::random_floats(n * k, -2.0f, 2.0f, 2);  // n x k
  const std::vector<float> c0 = halfscope::test::random_floats(m * n, -4.0f, 4.0f, 3);
  const std::vector<float> at = transposed(a, k, m);  // k x m: the stored A of op_a = T
  const std::vector<float> b = transposed(bt, k, n);  // k x n: the stored B of op_b = N
  std::vector<float> ref = c0;
  gemm_nt_update(v, m, n, k, a.data(), m, bt.data(), n, ref.data(), m, {});
  struct Form {
    Op op_a, op_b;
    const std::vector<float>* a;
    std::int64_t lda;
    const std::vector<float>* b;
    std::int64_t ldb;
  };
  for (const Form f : {Form{Op::N, Op::N, &a, m, &b, k}, Form{Op::T, Op::N, &at, k, &b, k},
                       Form{Op::T, Op::T, &at, k, &bt, n}, Form{Op::N, Op::T, &a, m, &bt, n}}) {
    std::vector<float> c = c0;
    gemm_update(v, f.op_a, f.op_b, m, n, k, f.a->data(), f.lda, f.b->data(), f.ldb, c.data(), m,
                {});
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) {
        const std::size_t e = static_cast<std::size_t>(i + j * m);
        double mag = std::fabs(c0[e]);
        for (std::int64_t l = 0; l < k; ++l)
          mag += std::fabs(a[static_cast<std::size_t>(i + l * m)] *
                           bt[static_cast<std::size_t>(j + l * n)]);
        double tol = 2 * g * mag;
        if (v == GemmVariant::HP2) tol += 0x1p-10 * std::fabs(ref[e]);
        if (v == GemmVariant::HP3) tol = 0.0;
        EXPECT_LE(std::fabs(c[e] - ref[e]), tol)
            << gemm_variant_name(v) << " op_a " << (f.op_a == Op::N ? "N" : "T") << " op_b "
            << (f.op_b == Op::N ? "N" : "T") << " at (" << i << ", " << j << ")";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GemmUpdateTest, ::testing::ValuesIn(all_gemm_variants()),
                         [](const ::testing::TestParamInfo<GemmVariant>& param_info) {
                           return std::string(gemm_variant_name(param_info.param));
                         });

// The solves' labels name the tile of L and leave out the factorization's --recover hint.
TEST(GemmUpdate, SolveLabelsInOverflowMessages) {
  std::vector<float> a{1.0f}, b{7e4f}, c{0.0f};
  try {
    gemm_update(GemmVariant::HP1, Op::T, Op::N, 1, 1, 1, a.data(), 1, b.data(), 1, c.data(), 1,
                {5, 3, "of the backward substitution with tile of L", false});
    ADD_FAILURE() << "no NumericalError";
  } catch (const NumericalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GEMM HP1 of the backward substitution with tile of L (5, 3): B entry"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("--recover"), std::string::npos) << msg;
  }
  EXPECT_EQ(c[0], 0.0f);
}

}  // namespace
}  // namespace halfscope::linalg::detail
