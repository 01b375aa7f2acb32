// Precision policies of the tile Cholesky: parsing, error messages and the variant each tile gets.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/policy.hpp"

namespace halfscope::linalg {
namespace {

TileQuery tile(std::int64_t i, std::int64_t j, double tile_norm = 1.0, double matrix_norm = 1.0,
               std::int64_t nt = 1) {
  return TileQuery{i, j, tile_norm, matrix_norm, nt};
}

// Expects InvalidInput whose message contains every fragment.
void expect_invalid(const std::string& text, std::initializer_list<std::string> fragments) {
  try {
    (void)parse_policy(text);
    ADD_FAILURE() << "no InvalidInput for '" << text << "'";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    for (const std::string& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' missing from: " << msg;
  }
}

TEST(GemmVariant, NamesRoundTripCaseInsensitive) {
  for (const GemmVariant v : all_gemm_variants()) {
    std::string lower(gemm_variant_name(v));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(parse_gemm_variant(lower), v);
  }
  EXPECT_THROW((void)parse_gemm_variant("HP4"), InvalidInput);
}

TEST(GemmVariant, UnitRoundoffOfInputs) {
  EXPECT_EQ(gemm_variant_unit_roundoff(GemmVariant::DP), std::ldexp(1.0, -53));
  EXPECT_EQ(gemm_variant_unit_roundoff(GemmVariant::SP), std::ldexp(1.0, -24));
  EXPECT_EQ(gemm_variant_unit_roundoff(GemmVariant::TF32), std::ldexp(1.0, -11));
  EXPECT_EQ(gemm_variant_unit_roundoff(GemmVariant::HP3), std::ldexp(1.0, -11));
  EXPECT_EQ(gemm_variant_unit_roundoff(GemmVariant::BF16), std::ldexp(1.0, -8));
  EXPECT_TRUE(gemm_variant_uses_fp16(GemmVariant::HP2));
  EXPECT_FALSE(gemm_variant_uses_fp16(GemmVariant::BF16));
}

TEST(Policy, DefaultIsUniformSP) {
  const Policy p;
  EXPECT_EQ(p.name(), "uniform:SP");
  EXPECT_EQ(p(tile(5, 0)), GemmVariant::SP);
}

TEST(Policy, UniformEveryTile) {
  const Policy p = parse_policy("uniform:hp3");
  EXPECT_EQ(p.name(), "uniform:HP3");
  for (std::int64_t i = 1; i < 6; ++i)
    for (std::int64_t j = 0; j < i; ++j) EXPECT_EQ(p(tile(i, j)), GemmVariant::HP3);
}

TEST(Policy, BandByDistanceToDiagonal) {
  const Policy p = parse_policy("band:SP=2,HP1=rest");
  EXPECT_EQ(p.name(), "band:SP=2,HP1=rest");
  EXPECT_EQ(p(tile(1, 0)), GemmVariant::SP);
  EXPECT_EQ(p(tile(7, 5)), GemmVariant::SP);
  EXPECT_EQ(p(tile(3, 0)), GemmVariant::HP1);
  EXPECT_EQ(p(tile(9, 1)), GemmVariant::HP1);

  const Policy q = parse_policy("band: DP=1, SP=3, hp2=5, HP3=rest");
  EXPECT_EQ(q.name(), "band:DP=1,SP=3,HP2=5,HP3=rest");
  EXPECT_EQ(q(tile(4, 3)), GemmVariant::DP);
  EXPECT_EQ(q(tile(4, 1)), GemmVariant::SP);
  EXPECT_EQ(q(tile(5, 0)), GemmVariant::HP2);
  EXPECT_EQ(q(tile(6, 0)), GemmVariant::HP3);
  // The name parses back into the same policy.
  EXPECT_EQ(parse_policy(q.name()).name(), q.name());
  EXPECT_EQ(parse_policy("band:BF16=rest")(tile(1, 0)), GemmVariant::BF16);
}

TEST(Policy, AdaptiveLowestPrecisionThatMeetsTolerance) {
  const double tol = 1e-6;
  const Policy p = parse_policy("adaptive:tol=1e-6");
  EXPECT_EQ(p.name(), "adaptive:tol=1e-06");
  EXPECT_EQ(parse_policy(p.name()).name(), p.name());
  EXPECT_EQ(adaptive_policy(1.2345678901234e-5).name(), "adaptive:tol=1.2345678901234e-05");
  const double total = 1000.0;
  const std::int64_t nt = 10;
  // BF16 admits ||A_ij|| NT / ||A|| < tol / 2^-8 = 2.56e-4, i.e. ||A_ij|| < 2.56e-2 here.
  const double bf16_limit = tol / std::ldexp(1.0, -8) * total / static_cast<double>(nt);
  const double hp1_limit = tol / std::ldexp(1.0, -11) * total / static_cast<double>(nt);
  EXPECT_EQ(p(tile(2, 0, 0.99 * bf16_limit, total, nt)), GemmVariant::BF16);
  EXPECT_EQ(p(tile(2, 0, 1.01 * bf16_limit, total, nt)), GemmVariant::HP1);
  EXPECT_EQ(p(tile(2, 0, 0.99 * hp1_limit, total, nt)), GemmVariant::HP1);
  EXPECT_EQ(p(tile(2, 0, 1.01 * hp1_limit, total, nt)), GemmVariant::SP);
  EXPECT_EQ(p(tile(2, 0, 0.0, 0.0, nt)), GemmVariant::BF16);  // zero matrix
}

TEST(Policy, AdaptiveAvoidsFp16OverflowRange) {
  // tol = 1e-7: BF16 needs ||A_ij|| NT / ||A|| < 1e-7 / 2^-8 = 2.56e-5, HP1 < 1e-7 / 2^-11 =
  // 2.048e-4; NT = 4.
  const Policy p = adaptive_policy(1e-7);
  const std::int64_t nt = 4;
  EXPECT_EQ(p(tile(1, 0, 4e4, 1e10, nt)), GemmVariant::BF16);  // ratio 1.6e-5
  EXPECT_EQ(p(tile(1, 0, 4e4, 1e9, nt)), GemmVariant::HP1);    // ratio 1.6e-4, norm < 65504
  // Ratio 4e-5 admits HP1, but a tile of norm 1e5 may hold entries above 65504: SP instead.
  EXPECT_EQ(p(tile(1, 0, 1e5, 1e10, nt)), GemmVariant::SP);
  EXPECT_EQ(p(tile(1, 0, 6e5, 1e12, nt)), GemmVariant::BF16);  // ratio 2.4e-6: BF16 has range
}

TEST(Policy, CustomRuleAndName) {
  const Policy p("checker", [](const TileQuery& q) {
    return (q.i + q.j) % 2 == 0 ? GemmVariant::HP1 : GemmVariant::SP;
  });
  EXPECT_EQ(p.name(), "checker");
  EXPECT_EQ(p(tile(2, 0)), GemmVariant::HP1);
  EXPECT_EQ(p(tile(2, 1)), GemmVariant::SP);
  EXPECT_THROW(Policy("empty", Policy::Rule{}), InvalidInput);
}

TEST(Policy, ParseErrorsNameTextAndExpectation) {
  expect_invalid("uniform", {"'uniform'", "no ':'", "expected uniform:<V>"});
  expect_invalid("uniform:HP4", {"'uniform:HP4'", "unknown variant 'HP4'", "BF16"});
  expect_invalid("diag:SP", {"unknown policy kind 'diag'"});
  expect_invalid("band:SP=2", {"'band:SP=2'", "<V>=rest"});
  expect_invalid("band:SP=2,HP1=rest,HP3=4", {"'rest' must be the last"});
  expect_invalid("band:SP=x,HP1=rest", {"distance 'x'"});
  expect_invalid("band:SP=-1,HP1=rest", {"distance '-1'"});
  expect_invalid("band:SP=3,HP2=2,HP1=rest", {"strictly increasing", "found 2"});
  expect_invalid("band:SP,HP1=rest", {"step 'SP'"});
  expect_invalid("adaptive:tol=0", {"tol '0'", "(0, 1)"});
  expect_invalid("adaptive:tol=abc", {"tol 'abc'"});
  expect_invalid("adaptive:tol=1e-3x", {"tol '1e-3x'"});
  expect_invalid("adaptive:eps=1e-3", {"tol=<x>"});
  EXPECT_THROW((void)adaptive_policy(2.0), InvalidInput);
  EXPECT_THROW((void)band_policy({{GemmVariant::SP, 2}, {GemmVariant::HP1, 2}}, GemmVariant::HP3),
               InvalidInput);
}

TEST(Policy, SaysWhetherItReadsTheNorms) {
  // uniform and band choose by position only, so the out-of-core factorization may check the
  // input beside its first slab; adaptive and user rules may read the norms.
  EXPECT_FALSE(parse_policy("uniform:HP1").reads_norms());
  EXPECT_FALSE(parse_policy("band:SP=2,HP1=rest").reads_norms());
  EXPECT_TRUE(parse_policy("adaptive:tol=1e-6").reads_norms());
  EXPECT_TRUE(Policy("mine", [](const TileQuery&) { return GemmVariant::SP; }).reads_norms());
  EXPECT_FALSE(Policy().reads_norms());  // uniform:SP
}

}  // namespace
}  // namespace halfscope::linalg
