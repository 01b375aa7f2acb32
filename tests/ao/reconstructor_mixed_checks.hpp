// The mixed-precision reconstructor (ao::tomographic_reconstructor) on the "check" preset against
// the FP64 one (reconstructor_fp64): shared by test_reconstructor_mixed.cpp (CPU) and
// gpu_reconstructor_mixed.cpp (the same checks on the device).
//
// Bound. Cmm of the check preset has kappa_2 about 5.5e6, so kappa u32 ~ 0.3: no forward bound of
// an FP32 solve says anything (the FP32 rounding of Cmm alone may move R by that much; the
// measured forward error is printed with kappa). What a backward-stable tile solve guarantees
// whatever kappa is, is a small residual (Higham Thms 8.5, 10.4, first order, as in
// tests/linalg/solve_test_support.hpp): R (Cmm + dA) = Ctm + dB with |dA| <= e |L||L^T|,
// e = e_f + 2 e_s + u32 (factor, two substitutions, Cmm rounded to FP32) and |dB| <= u32 |Ctm|,
// hence ||Ctm - R Cmm||_F <= e ||R||_F || |L||L^T| ||_F + u32 ||Ctm||_F, with e_f =
// gamma_{n+1}(u32) + the largest GEMM-variant term of the factor's tiles and e_s = gamma_n(u32)
// + that of the solve's; |L| from LAPACK's FP64 dpotrf, kappa_2 from dsyev. Element by element,
// before norms are taken, |Ctm - R Cmm| <= e |R| |L||L^T| + u32 |Ctm|: tighter where R or |L|
// varies (tests/mpi/test_reconstructor_tolerance.cpp holds distributed runs to it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../linalg/solve_test_support.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/config.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::ao::test {

/// FP64 facts about the check preset's Cmm for the bound: lambda_min, kappa_2, |L||L^T| (n x n,
/// row-major) and its Frobenius norm.
struct CmmFacts {
  double lambda_min = 0, kappa = 0, abs_product_norm = 0;
  std::vector<double> abs_product;
};

#if HALFSCOPE_HAS_LAPACKE
inline CmmFacts cmm_facts(const Array& cmm64) {
  const std::int64_t n = cmm64.dim(0);
  const auto ln = static_cast<lapack_int>(n);
  CmmFacts f;
  std::vector<double> w(static_cast<std::size_t>(n));
  std::vector<double> e(cmm64.data_as<double>(), cmm64.data_as<double>() + n * n);
  EXPECT_EQ(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'L', ln, e.data(), ln, w.data()), 0);
  f.lambda_min = w.front();
  f.kappa = w.back() / w.front();
  std::vector<double> l(cmm64.data_as<double>(), cmm64.data_as<double>() + n * n);
  EXPECT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', ln, l.data(), ln), 0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) l[static_cast<std::size_t>(i * n + j)] = 0.0;
  f.abs_product.assign(static_cast<std::size_t>(n * n), 0.0);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k <= std::min(i, j); ++k)
        s += std::fabs(l[static_cast<std::size_t>(i * n + k)]) *
             std::fabs(l[static_cast<std::size_t>(j * n + k)]);
      f.abs_product[static_cast<std::size_t>(i * n + j)] = s;
      sum += s * s;
    }
  f.abs_product_norm = std::sqrt(sum);
  return f;
}
#endif

/// Errors of a reconstructor against the FP64 one.
struct RError {
  double frobenius = 0;  // ||R - R64||_F / ||R64||_F
  double max_rel = 0;    // max |R - R64| / max |R64|
};

inline RError compare(const Array& r, const Array& r64) {
  const Array rh = r.on_device() ? r.to(Memory::host) : r;
  double num = 0, den = 0, dmax = 0, rmax = 0;
  for (std::int64_t i = 0; i < r64.size(); ++i) {
    const double ref = r64.at_as_double(i), d = rh.at_as_double(i) - ref;
    num += d * d;
    den += ref * ref;
    dmax = std::max(dmax, std::fabs(d));
    rmax = std::max(rmax, std::fabs(ref));
  }
  return {std::sqrt(num / den), dmax / rmax};
}

/// The FP64 reference of a system (the check preset unless named): covariances on the CPU, R by
/// dposv, its evaluation.
struct CheckReference {
  AoSystem system;
  Array cmm, ctm, r64;
  Evaluation eval64;
};

inline CheckReference check_reference(AoSystem system = ao_preset("check")) {
  CheckReference ref{std::move(system), {}, {}, {}, {}};
  CovarianceOptions co;
  co.device = DeviceKind::Cpu;
  ref.cmm = covariance(ref.system, CovarianceKind::cmm, co);
  ref.ctm = covariance(ref.system, CovarianceKind::ctm, co);
  ref.r64 = reconstructor_fp64(ref.cmm, ref.ctm, DeviceKind::Cpu);
  EvaluationOptions eo;
  eo.device = DeviceKind::Cpu;
  ref.eval64 = evaluate_reconstructor(ref.system, ref.r64, eo);
  return ref;
}

/// ||Ctm - R Cmm||_F in FP64 (host R, float32).
inline double residual_norm(const CheckReference& ref, const Array& r) {
  const std::int64_t m = ref.ctm.dim(0), n = ref.ctm.dim(1);
  const float* rp = r.data_as<float>();
  const double* cmm = ref.cmm.data_as<double>();
  double sum = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    std::vector<double> row(ref.ctm.data_as<double>() + i * n,
                            ref.ctm.data_as<double>() + (i + 1) * n);
    for (std::int64_t k = 0; k < n; ++k) {
      const double rv = rp[i * n + k];
      for (std::int64_t j = 0; j < n; ++j) row[static_cast<std::size_t>(j)] -= rv * cmm[k * n + j];
    }
    for (const double v : row) sum += v * v;
  }
  return std::sqrt(sum);
}

inline double frobenius(const Array& a) {
  double sum = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) sum += a.at_as_double(i) * a.at_as_double(i);
  return std::sqrt(sum);
}

/// The constant e of the header comment for a reconstructor's factor and solve policies.
inline double backward_constant(const Reconstructor& rec, std::int64_t n) {
  const double u = 0x1p-24;
  return linalg::test::largest_term(rec.factor.tiles, n) + linalg::test::gamma(n + 1, u) +
         2 * (linalg::test::largest_term(rec.solve.tiles, n) + linalg::test::gamma(n, u)) + u;
}

/// The residual bound of the header comment for a reconstructor built from the reference's system.
inline void expect_residual_within_bound(const CheckReference& ref, const Reconstructor& rec,
                                         const CmmFacts& facts, const std::string& label) {
  const double u = 0x1p-24, e = backward_constant(rec, ref.cmm.dim(0));
  const Array rh = rec.matrix.on_device() ? rec.matrix.to(Memory::host) : rec.matrix;
  const double res = residual_norm(ref, rh);
  const double bound = e * frobenius(rh) * facts.abs_product_norm + u * frobenius(ref.ctm);
  std::printf("  kappa_2(Cmm) %.3e; ||Ctm - R Cmm||_F %.3e, bound %.3e\n", facts.kappa, res, bound);
  EXPECT_LE(res, bound) << label;
}

/// The same bound element by element, before norms are taken: |Ctm - R Cmm| <= e |R| |L||L^T| +
/// u32 |Ctm|. Returns the largest ratio over the rows of R of the bound's norm to the row's ||Ctm||
/// (below 1, the bound is below the residual of a row of zeros, so a wrong row fails it).
inline double expect_componentwise_residual_within_bound(const CheckReference& ref,
                                                         const Reconstructor& rec,
                                                         const CmmFacts& facts,
                                                         const std::string& label) {
  const std::int64_t m = ref.ctm.dim(0), n = ref.ctm.dim(1);
  const double u = 0x1p-24, e = backward_constant(rec, n);
  const Array rh = rec.matrix.on_device() ? rec.matrix.to(Memory::host) : rec.matrix;
  const float* r = rh.data_as<float>();
  const double *cmm = ref.cmm.data_as<double>(), *ctm = ref.ctm.data_as<double>();
  double worst = 0, bound_to_ctm = 0;
  std::int64_t outside = 0;
  std::vector<double> res(static_cast<std::size_t>(n)), bound(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < m; ++i) {
    std::copy(ctm + i * n, ctm + (i + 1) * n, res.begin());
    std::fill(bound.begin(), bound.end(), 0.0);
    for (std::int64_t k = 0; k < n; ++k) {
      const double rv = r[i * n + k];
      const double* pk = facts.abs_product.data() + k * n;
      for (std::int64_t j = 0; j < n; ++j) {
        res[static_cast<std::size_t>(j)] -= rv * cmm[k * n + j];
        bound[static_cast<std::size_t>(j)] += std::fabs(rv) * pk[j];
      }
    }
    double bound_sq = 0, ctm_sq = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const auto js = static_cast<std::size_t>(j);
      const double b = e * bound[js] + u * std::fabs(ctm[i * n + j]);
      worst = std::max(worst, std::fabs(res[js]) / b);
      outside += std::fabs(res[js]) > b ? 1 : 0;
      bound_sq += b * b;
      ctm_sq += ctm[i * n + j] * ctm[i * n + j];
    }
    bound_to_ctm = std::max(bound_to_ctm, std::sqrt(bound_sq / ctm_sq));
  }
  std::printf("  |Ctm - R Cmm| / bound at most %.3e; ||row bound|| / ||row of Ctm|| at most %.3e\n",
              worst, bound_to_ctm);
  EXPECT_EQ(outside, 0) << label << ": elements outside the componentwise bound, worst ratio "
                        << worst;
  return bound_to_ctm;
}

/// Builds R on `device` with `policy` (factor and solve), checks its shape, the residual bound
/// above and the Strehl tolerance, and prints the row of the comparison.
inline void check_policy(const CheckReference& ref, const std::string& policy_text,
                         DeviceKind device, double strehl_tolerance, const CmmFacts& facts) {
  ReconstructorOptions options;
  options.policy = linalg::parse_policy(policy_text);
  options.solve_policy = linalg::parse_policy(policy_text);
  options.tile = 128;  // 912 = 7 x 128 + 16: a partial last tile
  options.device = device;
  const Reconstructor rec = tomographic_reconstructor(ref.system, options);
  ASSERT_EQ(rec.matrix.shape(), ref.r64.shape());
  EXPECT_EQ(rec.matrix.dtype(), DType::f32);
  EXPECT_EQ(rec.matrix.memory(), Memory::host);
  EXPECT_EQ(rec.factor.policy, options.policy.name());
  EXPECT_EQ(rec.solve.policy, options.policy.name());
  EXPECT_EQ(rec.device, device);
  const RError err = compare(rec.matrix, ref.r64);
  EvaluationOptions eo;
  eo.device = DeviceKind::Cpu;
  const Evaluation ev = evaluate_reconstructor(ref.system, rec.matrix, eo);
  const double dstrehl = ev.strehl_otf - ref.eval64.strehl_otf;
  std::printf(
      "[reconstructor %s] %-22s R rel F %.3e, max|dR|/max|R| %.3e, Strehl %.6f (FP64 %.6f, "
      "diff %+.2e), tiles SP %lld HP1 %lld, covariance %.1f ms factor %.1f ms solve %.1f ms\n",
      device == DeviceKind::Cuda ? "gpu" : "cpu", policy_text.c_str(), err.frobenius, err.max_rel,
      ev.strehl_otf, ref.eval64.strehl_otf, dstrehl,
      static_cast<long long>(rec.factor.count(linalg::GemmVariant::SP)),
      static_cast<long long>(rec.factor.count(linalg::GemmVariant::HP1)), rec.covariance_ms,
      rec.factor_ms, rec.solve_ms);
  EXPECT_LE(std::fabs(dstrehl), strehl_tolerance) << policy_text;
  EXPECT_GT(rec.factor_ms, 0.0);
  EXPECT_GT(rec.solve_ms, 0.0);
  expect_residual_within_bound(ref, rec, facts, policy_text);
}

}  // namespace halfscope::ao::test
