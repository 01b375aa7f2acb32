// The CPU backends' arithmetic contract (backend.hpp) against the FP64 backend: the operator,
// the right-hand side and the criterion per precision, within bounds from the unit roundoff; the
// FP16 scalings (reductions of values whose squares overflow FP16); the pending overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "deconv/backend.hpp"
#include "deconv_testing.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {
namespace {

constexpr double kU16 = 0x1p-11, kU32 = 0x1p-24;

double norm(const Array& a) {
  const Array d = a.astype(DType::f64);
  double s = 0;
  for (std::int64_t k = 0; k < d.size(); ++k) s += d.data_as<double>()[k] * d.data_as<double>()[k];
  return std::sqrt(s);
}

Array minus(const Array& a, const Array& b) {
  Array d = a.astype(DType::f64).clone();
  const Array e = b.astype(DType::f64);
  for (std::int64_t k = 0; k < d.size(); ++k) d.data_as<double>()[k] -= e.data_as<double>()[k];
  return d;
}

Array random_image(std::int64_t rows, std::int64_t cols, double scale, std::uint64_t seed) {
  Array a(DType::f64, {rows, cols});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::int64_t k = 0; k < a.size(); ++k) a.data_as<double>()[k] = scale * u(rng);
  return a;
}

struct Param {
  Precision precision;
  Boundary boundary;
};

class BackendContract : public ::testing::TestWithParam<Param> {};

TEST_P(BackendContract, OperatorRhsAndCriterionMatchFp64) {
  const auto [prec, boundary] = GetParam();
  const std::int64_t n = 32;
  const auto t = test::make_problem(n, n, boundary);
  const Problem p{t.dirty, t.psf, 0.1, boundary};
  auto lo = make_cpu_backend(p, prec);
  auto hi = make_cpu_backend(p, Precision::Double);
  EXPECT_EQ(lo->precision(), prec);
  EXPECT_EQ(lo->device(), DeviceKind::Cpu);
  const Vec x = lo->create(), y = lo->create(), xd = hi->create(), yd = hi->create();
  lo->assign(random_image(n, n, 1.0, 5), 1.0, 0.0, x);
  EXPECT_EQ(lo->view(x).dtype(), storage_dtype(prec));
  // The reference reads the low-precision input as stored, so only the operator's error counts.
  hi->assign(lo->view(x), 1.0, 0.0, xd);
  lo->normal(x, y);
  hi->normal(xd, yd);
  // ||Q|| <= L / 2 = max|h^|^2 + lambda; an FFT of N points in arithmetic of unit roundoff u
  // errs by ~ u log2 N relative to its input's norm, each filter applies two, and the zero
  // boundary chains two filters: 8 u log2 N ||Q|| ||x|| covers every case; FP16 storage adds
  // the final rounding, u16 ||Q x||.
  const double m = max_abs_spectrum(p, false), qn = m * m + p.lambda;
  const double log2n = std::log2(static_cast<double>(4 * n * n));
  const double xn = norm(hi->view(xd)), qx = norm(hi->view(yd));
  const double u = prec == Precision::Half ? kU16 : kU32;
  const double store = storage_dtype(prec) == DType::f16 ? kU16 * qx : 0.0;
  EXPECT_LE(norm(minus(lo->view(y), hi->view(yd))), 8 * u * log2n * qn * xn + store);
  EXPECT_GT(norm(minus(lo->view(y), hi->view(yd))), 0.0);  // really the low precision ran
  // H^T g.
  lo->rhs(y);
  hi->rhs(yd);
  const double gn = norm(t.dirty);
  EXPECT_LE(norm(minus(lo->view(y), hi->view(yd))),
            8 * u * log2n * m * gn + (store > 0 ? kU16 * norm(hi->view(yd)) : 0.0));
  // J(x): the residual carries the operator's error (times 2 ||g - H x||) and the reductions
  // add N u relative (FP32 sums; half's products are rounded to FP16 too).
  const double jd = hi->criterion(xd), jl = lo->criterion(x);
  const double rn = std::sqrt(jd);
  const double sums = static_cast<double>(n) * 2 * (prec == Precision::Half ? kU16 : kU32);
  EXPECT_LE(std::fabs(jl - jd),
            2 * rn * (8 * u * log2n * m * xn + (store > 0 ? kU16 * gn : 0)) + sums * jd);
}

INSTANTIATE_TEST_SUITE_P(Precisions, BackendContract,
                         ::testing::Values(Param{Precision::Single, Boundary::Circular},
                                           Param{Precision::Single, Boundary::Zero},
                                           Param{Precision::Mixed, Boundary::Circular},
                                           Param{Precision::Mixed, Boundary::Zero},
                                           Param{Precision::Half, Boundary::Circular},
                                           Param{Precision::Half, Boundary::Zero}),
                         [](const auto& param_info) {
                           return std::string(precision_name(param_info.param.precision)) + "_" +
                                  std::string(boundary_name(param_info.param.boundary));
                         });

TEST(DeconvBackend, HalfReductionsScaleValuesWhoseSquaresOverflow) {
  // Values up to 1e3: their squares (1e6) overflow FP16, the scaled products do not. Each
  // product is rounded to FP16 (relative u16), the sums of N terms in FP32 (N u32).
  const auto t = test::make_problem(32, 32, Boundary::Circular);
  auto be = make_cpu_backend(Problem{t.dirty, t.psf, 0.1, Boundary::Circular}, Precision::Half);
  const Vec a = be->create(), b = be->create();
  be->assign(random_image(32, 32, 1e3, 1), 1.0, 0.0, a);
  be->assign(random_image(32, 32, 1e3, 2), 1.0, 0.0, b);
  const Array av = be->view(a).astype(DType::f64), bv = be->view(b).astype(DType::f64);
  double exact = 0, abs_sum = 0;
  for (std::int64_t k = 0; k < av.size(); ++k) {
    exact += av.data_as<double>()[k] * bv.data_as<double>()[k];
    abs_sum += std::fabs(av.data_as<double>()[k] * bv.data_as<double>()[k]);
  }
  EXPECT_NEAR(be->dot(a, b), exact, (kU16 + 1024 * kU32) * abs_sum);
  EXPECT_DOUBLE_EQ(be->max_abs(a), [&] {
    double mm = 0;
    for (std::int64_t k = 0; k < av.size(); ++k)
      mm = std::max(mm, std::fabs(av.data_as<double>()[k]));
    return mm;
  }());
}

TEST(DeconvBackend, Fp16OverflowIsPendingUntilTheNextScalar) {
  const auto t = test::make_problem(16, 16, Boundary::Circular);
  for (Precision prec : {Precision::Half, Precision::Mixed}) {
    auto be = make_cpu_backend(Problem{t.dirty, t.psf, 0.1, Boundary::Circular}, prec);
    const Vec x = be->create();
    be->assign(random_image(16, 16, 4e4, 3), 1.0, 0.0, x);
    be->axpby(4.0, x, 0.0, x);  // up to 1.6e5: beyond 65504
    try {
      be->dot(x, x);
      ADD_FAILURE() << "no NumericalError";
    } catch (const NumericalError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(precision_name(prec)) + ": axpby overflowed FP16"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("largest 1."), std::string::npos) << m;
    }
    EXPECT_NO_THROW(be->synchronize());  // reported once
  }
}

TEST(DeconvBackend, ScalarsAreRoundedToTheArithmeticType) {
  const auto t = test::make_problem(16, 16, Boundary::Circular);
  const Problem p{t.dirty, t.psf, 0.1, Boundary::Circular};
  EXPECT_EQ(make_cpu_backend(p, Precision::Half)->round_scalar(0.1),
            static_cast<double>(Half(0.1)));
  EXPECT_EQ(make_cpu_backend(p, Precision::Mixed)->round_scalar(0.1), static_cast<double>(0.1f));
  EXPECT_EQ(make_cpu_backend(p, Precision::Double)->round_scalar(0.1), 0.1);
  EXPECT_THROW(make_cpu_backend(p, Precision::Split), InvalidInput);
}

}  // namespace
}  // namespace halfscope::deconv::detail
