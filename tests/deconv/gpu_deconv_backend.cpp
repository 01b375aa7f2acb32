// The CUDA deconvolution backend (src/deconv/backend_cuda*.cu), operation by operation, per
// precision and boundary, against FP64 host references that use no FFT (direct sums), with
// bounds derived from the precision's unit roundoff (gpu_deconv_testing.hpp); the element-wise
// operations against a host emulation of their exact rounding; FP16 overflow and half's grid rule.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "gpu_deconv_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"

namespace halfscope::deconv {
namespace {

#if HALFSCOPE_WITH_CUDA

using namespace gputest;

constexpr std::int64_t kN = 32;  // 32x32: power-of-two (half's circular grid); zero grid 64 / 48
constexpr double kLambda = 0.01;

TEST(GpuDeconvBackend, NormalAndRhs_EveryPrecisionAndBoundary_MatchDirectSums) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  for (const Boundary b : kBoundaries)
    for (const Precision p : kBackendPrecisions) {
      SCOPED_TRACE(label(p, b));
      const detail::Problem prob = problem_of(t, kLambda, b);
      auto be = detail::make_cuda_backend(prob, p);
      EXPECT_EQ(be->precision(), p);
      EXPECT_EQ(be->device(), DeviceKind::Cuda);
      const bool pow2 = p == Precision::Half;
      const std::int64_t n = detail::grid_extent(kN, b, pow2);
      const double hmax = detail::max_abs_spectrum(prob, pow2);
      const int pairs = b == Boundary::Circular ? 1 : 2;

      const Array x = random_image(kN, kN, p, 11);
      const Vec vx = be->create(), vq = be->create(), vr = be->create();
      load(*be, vx, x);
      be->normal(vx, vq);
      const Array q = fetch(*be, vq);
      const Array q_ref = direct_normal(x, t.psf, kLambda, b);
      const double eq = diff_norm(q, q_ref) / ((hmax * hmax + kLambda) * norm(x));
      EXPECT_LE(eq, filter_bound(p, n * n, pairs)) << "normal: relative error " << eq;
      std::printf("measured %s: normal %.3g rhs ", label(p, b).c_str(), eq);
      // normal() reads x (the direct single / double path hands x itself to cuFFT's R2C).
      EXPECT_EQ(diff_norm(fetch(*be, vx), x), 0.0);

      be->rhs(vr);
      const Array g = rounded(t.dirty, p);
      const Array r_ref = direct_adjoint(g, t.psf, b);
      const double er = diff_norm(fetch(*be, vr), r_ref) / (hmax * norm(g));
      EXPECT_LE(er, filter_bound(p, n * n, 1)) << "rhs: relative error " << er;
      std::printf("%.3g (bounds %.3g, %.3g)\n", er, filter_bound(p, n * n, pairs),
                  filter_bound(p, n * n, 1));
      EXPECT_NO_THROW(be->synchronize());
    }
}

TEST(GpuDeconvBackend, Criterion_EveryPrecisionAndBoundary_MatchesFp64WithinDerivedBound) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  for (const Boundary b : kBoundaries)
    for (const Precision p : kBackendPrecisions) {
      SCOPED_TRACE(label(p, b));
      const detail::Problem prob = problem_of(t, kLambda, b);
      auto be = detail::make_cuda_backend(prob, p);
      const bool pow2 = p == Precision::Half;
      const std::int64_t n = detail::grid_extent(kN, b, pow2);
      const double hmax = detail::max_abs_spectrum(prob, pow2);
      // An iterate near the solution (the sky plus noise): r = g - H x is small against g, so
      // J's error bound is the meaningful one, not its cancellation.
      Array x = rounded(t.sky, p);
      const Vec vx = be->create();
      load(*be, vx, x);
      const double j = be->criterion(vx);

      const Array g = rounded(t.dirty, p);
      const Array hx = test::direct_psf(x, t.psf, b);
      double rr = 0, xx = 0;
      for (std::int64_t k = 0; k < x.size(); ++k) {
        const double r = g.data_as<double>()[k] - hx.data_as<double>()[k];
        rr += r * r;
        xx += x.data_as<double>()[k] * x.data_as<double>()[k];
      }
      const double j_ref = rr + kLambda * xx;
      // |J^ - J| <= 2 ||r|| dr + dr^2 + (2 u + n u_sum) J: dr bounds ||r^ - r|| (H x's error, and
      // for FP16 the roundings of H x and of r), products rounded with u (FP16 for half), sums
      // in FP32 (FP64 for double) over n terms.
      const double u = compute_unit_roundoff(p);
      const double u_sum = p == Precision::Double ? 0x1p-53 : 0x1p-24;
      double dr = filter_bound(p, n * n, 1) * hmax * norm(x);
      if (p == Precision::Half) dr += 2 * u * (norm(g) + hmax * norm(x));
      const double bound = 2 * std::sqrt(rr) * dr + dr * dr +
                           (2 * u + static_cast<double>(x.size()) * u_sum) * j_ref;
      EXPECT_LE(std::fabs(j - j_ref), bound) << "J " << j << " reference " << j_ref;
      std::printf("measured %s: criterion relative error %.3g (bound %.3g)\n", label(p, b).c_str(),
                  std::fabs(j - j_ref) / j_ref, bound / j_ref);
    }
}

TEST(GpuDeconvBackend, DotAndMaxAbs_EveryPrecision_MatchFp64WithinReductionBound) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  for (const Precision p : kBackendPrecisions) {
    SCOPED_TRACE(precision_name(p));
    auto be = detail::make_cuda_backend(problem_of(t, kLambda, Boundary::Circular), p);
    // Magnitudes spread over 2^-6 .. 2^6, so the half rule's scaling to max 1 matters.
    Array a = random_image(kN, kN, p, 21), c = random_image(kN, kN, p, 22);
    for (std::int64_t k = 0; k < a.size(); ++k)
      a.data_as<double>()[k] *= std::ldexp(1.0, static_cast<int>(k % 13) - 6);
    a = rounded(a, p);
    const Vec va = be->create(), vc = be->create();
    load(*be, va, a);
    load(*be, vc, c);
    double exact = 0, mag = 0, amax = 0;
    for (std::int64_t k = 0; k < a.size(); ++k) {
      exact += a.data_as<double>()[k] * c.data_as<double>()[k];
      mag += std::fabs(a.data_as<double>()[k] * c.data_as<double>()[k]);
      amax = std::max(amax, std::fabs(a.data_as<double>()[k]));
    }
    // Products rounded with u (FP16 for half: the scaled operands are exact but for subnormals,
    // at most 2^-25 each after scaling to max 1, so n 2^-24 2^(ea + eb) absolute), sums over n
    // terms in FP32 (FP64 for double).
    const double n = static_cast<double>(a.size());
    const double u_sum = p == Precision::Double ? 0x1p-53 : 0x1p-24;
    double bound = (compute_unit_roundoff(p) + n * u_sum) * mag;
    // (|c| < 1, so 2^eb <= 1; 2^ea <= 2 max|a|.)
    if (p == Precision::Half) bound += n * 0x1p-24 * 2 * amax;
    EXPECT_LE(std::fabs(be->dot(va, vc) - exact), bound);
    EXPECT_EQ(be->max_abs(va), amax);  // exact: no rounding involved
  }
}

/// The element-wise rules of backend.hpp on the host: half rounds each product and the sum to
/// FP16 (FP16 values sum exactly in FP64, so one rounding from there is FP16's), mixed computes in
/// FP32 and rounds once to FP16, single in FP32, double in FP64.
double expected_axpby(Precision p, double a, double x, double b, double y) {
  const auto h = [](double v) { return static_cast<double>(Half(v).to_float()); };
  switch (p) {
    case Precision::Double:
      return a * x + b * y;
    case Precision::Single: {
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      const float px = fa * static_cast<float>(x), py = fb * static_cast<float>(y);
      return static_cast<double>(px + py);
    }
    case Precision::Mixed: {
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      const float px = fa * static_cast<float>(x), py = fb * static_cast<float>(y);
      return static_cast<double>(Half(px + py).to_float());
    }
    default:
      return h(h(h(a) * x) + h(h(b) * y));
  }
}

TEST(GpuDeconvBackend, AxpbyCopyAssign_EveryPrecision_RoundExactlyAsSpecified) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  const double a = 0.3141592653589793, b = -1.7320508075688772;
  for (const Precision p : kBackendPrecisions) {
    SCOPED_TRACE(precision_name(p));
    auto be = detail::make_cuda_backend(problem_of(t, kLambda, Boundary::Circular), p);
    const Array x = random_image(kN, kN, p, 31), y = random_image(kN, kN, p, 32);
    const Vec vx = be->create(), vy = be->create(), vz = be->create();
    load(*be, vx, x);
    load(*be, vy, y);
    be->axpby(a, vx, b, vy);
    const Array got = fetch(*be, vy);
    std::int64_t wrong = 0;
    for (std::int64_t k = 0; k < x.size(); ++k)
      wrong += got.data_as<double>()[k] !=
               expected_axpby(p, a, x.data_as<double>()[k], b, y.data_as<double>()[k]);
    EXPECT_EQ(wrong, 0) << "axpby results differing from the host emulation";
    const double a_rounded = p == Precision::Double ? a
                             : p == Precision::Half ? static_cast<double>(Half(a).to_float())
                                                    : static_cast<double>(static_cast<float>(a));
    EXPECT_EQ(be->round_scalar(a), a_rounded);

    be->copy(vx, vz);
    EXPECT_EQ(diff_norm(fetch(*be, vz), x), 0.0);

    // assign: to = scale src + beta to in FP32 (FP64 for double), rounded once to storage, from
    // each source dtype; beta = 0 ignores `to`.
    const double scale = 0.7, beta = 0.25;
    for (const DType src_type : {DType::f64, DType::f32, DType::f16}) {
      SCOPED_TRACE(dtype_name(src_type));
      const Array src_host = random_image(kN, kN, Precision::Double, 33).astype(src_type);
      const Array src = src_host.astype(DType::f64);
      load(*be, vz, x);
      be->assign(src_host.to(Memory::device), scale, beta, vz);
      const Array out = fetch(*be, vz);
      std::int64_t bad = 0;
      for (std::int64_t k = 0; k < x.size(); ++k) {
        const double s = src.data_as<double>()[k], o = x.data_as<double>()[k];
        double want;
        if (p == Precision::Double) {
          want = scale * s + beta * o;
        } else {
          const float v = static_cast<float>(scale) * static_cast<float>(s) +
                          static_cast<float>(beta) * static_cast<float>(o);
          want = storage_dtype(p) == DType::f16 ? static_cast<double>(Half(v).to_float()) : v;
        }
        bad += out.data_as<double>()[k] != want;
      }
      EXPECT_EQ(bad, 0);
    }
    EXPECT_THROW(be->assign(Array::zeros(DType::f64, {kN, kN + 1}).to(Memory::device), 1, 0, vz),
                 InvalidInput);
    EXPECT_THROW(be->assign(Array::zeros(DType::f64, {kN, kN}), 1, 0, vz), InvalidInput);
  }
}

TEST(GpuDeconvBackend, Fp16Overflow_ThrowsNumericalErrorNamingTheOperation) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(kN, kN, Boundary::Circular);
  // A point of 60000 (exact in FP16): Q's peak there is sum h^2 ~ 3.5 times it, beyond 65504.
  Array spike = Array::zeros(DType::f64, {kN, kN});
  spike.data_as<double>()[kN * kN / 2 + 5] = 60000.0;
  for (const Precision p : {Precision::Half, Precision::Mixed})
    for (const Boundary b : kBoundaries) {
      SCOPED_TRACE(label(p, b));
      auto be = detail::make_cuda_backend(problem_of(t, kLambda, b), p);
      const Vec vx = be->create(), vy = be->create();
      load(*be, vx, spike);
      be->normal(vx, vy);
      try {
        be->synchronize();
        ADD_FAILURE() << "no overflow reported";
      } catch (const NumericalError& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(precision_name(p)) +
                                             ": normal operator overflowed FP16"),
                  std::string::npos)
            << e.what();
      }
      // Reported once; the backend goes on working.
      EXPECT_NO_THROW(be->synchronize());
      be->axpby(2.0, vx, 0.0, vy);  // 120000
      try {
        (void)be->dot(vx, vx);
        ADD_FAILURE() << "no overflow reported";
      } catch (const NumericalError& e) {
        EXPECT_NE(std::string(e.what()).find("axpby overflowed FP16"), std::string::npos)
            << e.what();
      }
      // half's dot scales its operands first, so 60000^2 does not overflow it (one FP16
      // rounding of the scaled product); mixed's FP32 product is exact.
      EXPECT_NEAR(be->dot(vx, vx), 3.6e9, 3.6e9 * 0x1p-11);
    }
}

TEST(GpuDeconvBackend, HalfOnNonPowerOfTwoCircularGrid_InvalidInputAsOnTheCpu) {
  HS_REQUIRE_GPU();
  const test::Problem t = test::make_problem(48, 32, Boundary::Circular);
  const detail::Problem prob = problem_of(t, kLambda, Boundary::Circular);
  std::string gpu, cpu;
  try {
    (void)detail::make_cuda_backend(prob, Precision::Half);
  } catch (const InvalidInput& e) {
    gpu = e.what();
  }
  try {
    (void)detail::make_cpu_backend(prob, Precision::Half);
  } catch (const InvalidInput& e) {
    cpu = e.what();
  }
  EXPECT_NE(gpu.find("row count 48 is not a power of two"), std::string::npos) << gpu;
  EXPECT_EQ(gpu, cpu);
  // The zero boundary rounds its grid up to powers of two: accepted.
  EXPECT_NO_THROW(
      (void)detail::make_cuda_backend(problem_of(t, kLambda, Boundary::Zero), Precision::Half));
  EXPECT_THROW((void)detail::make_cuda_backend(prob, Precision::Split), InvalidInput);
}

#endif  // HALFSCOPE_WITH_CUDA

}  // namespace
}  // namespace halfscope::deconv
