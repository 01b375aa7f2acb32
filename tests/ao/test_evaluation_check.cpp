// The evaluation of the FP64 reconstructor on the "check" preset pinned against an independent
// evaluation written here in long double: Cee by its four-term definition, its projection and
// piston-free mean variance, and Marechal's formula, for both projections. The covariances, R and
// the projection matrices are the library's (each is tested against its own reference in
// test_covariance*.cpp, test_evaluation_solve.cpp and test_evaluation_projection.cpp); what is
// pinned is the chain from them to the printed tomographic error and Strehl ratio.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "evaluation_test_problems.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

constexpr double kUnitRoundoff = 0x1p-53;
using test::Matrix;
using test::to_long;

// Cee = Ctt - Ctm R^T - R Ctm^T + R Cmm R^T (m x m) and the matching magnitude |Ctt| + 2 |Ctm|
// |R|^T + |R| |Cmm| |R|^T, against which the FP64 rounding of the library's Cee is bounded.
struct CeeReference {
  Matrix cee, magnitude;
};

CeeReference reference_cee(const Matrix& tt, const Matrix& tm, const Matrix& mm, const Matrix& r,
                           std::int64_t m, std::int64_t n) {
  Matrix rc(static_cast<std::size_t>(m * n), 0.0L), rca(rc.size(), 0.0L);  // R Cmm, |R| |Cmm|
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t k = 0; k < n; ++k) {
      const long double rv = r[i * n + k];
      for (std::int64_t j = 0; j < n; ++j) {
        rc[i * n + j] += rv * mm[k * n + j];
        rca[i * n + j] += std::fabs(rv) * std::fabs(mm[k * n + j]);
      }
    }
  CeeReference out{Matrix(static_cast<std::size_t>(m * m)),
                   Matrix(static_cast<std::size_t>(m * m))};
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      long double s = tt[i * m + j], a = std::fabs(tt[i * m + j]);
      for (std::int64_t k = 0; k < n; ++k) {
        s += -tm[i * n + k] * r[j * n + k] - r[i * n + k] * tm[j * n + k] +
             rc[i * n + k] * r[j * n + k];
        a += std::fabs(tm[i * n + k] * r[j * n + k]) + std::fabs(r[i * n + k] * tm[j * n + k]) +
             rca[i * n + k] * std::fabs(r[j * n + k]);
      }
      out.cee[i * m + j] = s;
      out.magnitude[i * m + j] = a;
    }
  return out;
}

// mean diag(P C P^T) over P's rows (P row-major points x m), long double.
long double mean_projected(const Array& p, const Matrix& c, bool absolute) {
  const std::int64_t points = p.dim(0), m = p.dim(1);
  long double sum = 0;
  for (std::int64_t i = 0; i < points; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      long double t = 0;
      for (std::int64_t k = 0; k < m; ++k) {
        const long double pk = p.at_as_double(i * m + k);
        t += c[j * m + k] * (absolute ? std::fabs(pk) : pk);
      }
      const long double pj = p.at_as_double(i * m + j);
      sum += (absolute ? std::fabs(pj) : pj) * t;
    }
  return sum / static_cast<long double>(points);
}

#if HALFSCOPE_HAS_LAPACKE
TEST(EvaluationCheck, TomographicErrorAndMarechalStrehlMatchALongDoubleEvaluation) {
  const test::PresetCovariances c = test::check_preset_covariances();
  const AoSystem& s = c.system;
  const Array &cmm = c.cmm, &ctm = c.ctm, &ctt = c.ctt;
  const Array r = reconstructor_fp64(cmm, ctm, DeviceKind::Cpu);
  const std::int64_t m = ctt.dim(0), n = cmm.dim(0);
  const CeeReference ref =
      reference_cee(to_long(ctt), to_long(ctm), to_long(cmm), to_long(r), m, n);

  for (const ProjectionMethod method : {ProjectionMethod::matched, ProjectionMethod::fried}) {
    EvaluationOptions o;
    o.device = DeviceKind::Cpu;
    o.projection = method;
    const Evaluation e = evaluate_reconstructor(s, r, o);
    const PhaseProjection p = truth_phase_projection(s, method, DeviceKind::Cpu);
    const long double var = mean_projected(p.matrix, ref.cee, false);
    ASSERT_GT(var, 0.0L);
    // The library's Cee differs from the exact one by <= gamma_k |terms| elementwise, k <= 2 n + 2
    // additions per element (the symm + gemm form adds as many), plus the projection's own
    // rounding (2 m more per element, bounded by the same magnitudes since |Cee| <= magnitude):
    // |d var| <= (2 n + 2 m + 8) u mean diag(|P| magnitude |P|^T).
    const long double dvar = static_cast<long double>(2 * n + 2 * m + 8) * kUnitRoundoff *
                             mean_projected(p.matrix, ref.magnitude, true);
    const long double sigma_nm = std::sqrt(var) * 1e9L;
    const long double tol_nm = dvar / (2.0L * std::sqrt(var)) * 1e9L;  // d sqrt(v) = dv / 2 sqrt(v)
    std::printf(
        "check, %s projection: %.3f nm (reference %.3f nm, tolerance %.2g nm), Strehl "
        "Marechal %.4f OTF %.4f at %.2f um\n",
        method == ProjectionMethod::matched ? "matched" : "Fried", e.tomographic_error_nm,
        static_cast<double>(sigma_nm), static_cast<double>(tol_nm), e.strehl_marechal, e.strehl_otf,
        e.wavelength_m * 1e6);
    EXPECT_NEAR(e.tomographic_error_nm, static_cast<double>(sigma_nm),
                static_cast<double>(tol_nm + 4 * kUnitRoundoff * sigma_nm));  // + sqrt, x 1e9
    // Marechal from the reference sigma: exp(-(2 pi sigma / lambda)^2); its sensitivity to sigma
    // is 2 S k^2 sigma d sigma (k = 2 pi / lambda), plus a few ulp for exp.
    const long double k = 2.0L * 3.14159265358979323846264L / e.wavelength_m;
    const long double strehl = std::exp(-k * k * var);
    const long double tol_s =
        2.0L * strehl * k * k * (sigma_nm * 1e-9L) * (tol_nm * 1e-9L) + 8 * kUnitRoundoff;
    EXPECT_NEAR(e.strehl_marechal, static_cast<double>(strehl), static_cast<double>(tol_s));
    EXPECT_GT(e.strehl_otf, 0.0);
    EXPECT_LE(e.strehl_otf, 1.0);
  }
}

TEST(EvaluationCheck, AnyOtherReconstructorIsWorseOnTheRealModel) {
  // Cee(R') = Cee(R) + (R' - R) Cmm (R' - R)^T for R = Ctm Cmm^-1, a PSD increment, so every
  // projection of it grows: a scaled R and R rounded to FP16 (~5e-4 relative per element, far
  // smaller a change) are both worse, the FP16 one less.
  const test::PresetCovariances c = test::check_preset_covariances();
  const AoSystem& s = c.system;
  const Array r = reconstructor_fp64(c.cmm, c.ctm, DeviceKind::Cpu);
  EvaluationOptions o;
  o.device = DeviceKind::Cpu;
  o.psf_size = 64;
  const Evaluation e = evaluate_reconstructor(s, r, o);
  Array scaled = r.clone();
  for (std::int64_t i = 0; i < scaled.size(); ++i) scaled.data_as<double>()[i] *= 0.9;
  const Evaluation worse = evaluate_reconstructor(s, scaled, o);
  EXPECT_GT(worse.tomographic_error_nm, e.tomographic_error_nm);
  EXPECT_LT(worse.strehl_otf, e.strehl_otf);
  const Evaluation half = evaluate_reconstructor(s, r.astype(DType::f16), o);
  EXPECT_GE(half.tomographic_error_nm, e.tomographic_error_nm);
  EXPECT_LT(half.tomographic_error_nm, worse.tomographic_error_nm);
}
#endif

}  // namespace
}  // namespace halfscope::ao
