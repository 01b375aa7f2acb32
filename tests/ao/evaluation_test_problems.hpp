// Inputs the reconstructor / error-covariance tests share (test_evaluation_solve.cpp,
// test_evaluation_check.cpp, gpu_evaluation.cpp): random jointly SPD covariances, the "check"
// preset's FP64 covariances, Cmm with junk above its diagonal, long-double copies, and LAPACK's
// condition estimate of Cmm.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"

#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#endif

namespace halfscope::ao::test {

/// A row-major matrix in long double, for the independent references.
using Matrix = std::vector<long double>;

/// `a`'s elements in long double (exact: every double is a long double).
inline Matrix to_long(const Array& a) {
  Matrix out(static_cast<std::size_t>(a.size()));
  for (std::int64_t i = 0; i < a.size(); ++i) out[static_cast<std::size_t>(i)] = a.at_as_double(i);
  return out;
}

/// Cmm (n x n), Ctm (m x n), Ctt (m x m) of one joint slope covariance.
struct Problem {
  std::int64_t n = 0, m = 0;
  Array cmm, ctm, ctt;
};

/// A joint covariance J = B B^T / N + I of the (n + m) slopes, split into Cmm, Ctm, Ctt. B B^T / N
/// has its eigenvalues in [0, 4] (Marchenko-Pastur for a square standard normal B), so J's lie in
/// [1, 5]: kappa(Cmm) <= 5, and Cee (a Schur complement of J) is PSD with eigenvalues >= 1. The
/// products are summed in long double, so J is symmetric to the last bit.
inline Problem make_problem(std::int64_t n, std::int64_t m, unsigned seed) {
  const std::int64_t total = n + m;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> b(static_cast<std::size_t>(total * total));
  for (double& v : b) v = normal(rng);
  std::vector<double> j(static_cast<std::size_t>(total * total));
  for (std::int64_t r = 0; r < total; ++r)
    for (std::int64_t c = 0; c < total; ++c) {
      long double s = 0;
      for (std::int64_t k = 0; k < total; ++k)
        s += static_cast<long double>(b[r * total + k]) * b[c * total + k];
      j[r * total + c] = static_cast<double>(s / total) + (r == c ? 1.0 : 0.0);
    }
  Problem p{n, m, Array(DType::f64, {n, n}), Array(DType::f64, {m, n}), Array(DType::f64, {m, m})};
  for (std::int64_t r = 0; r < total; ++r)
    for (std::int64_t c = 0; c < total; ++c) {
      const double v = j[r * total + c];
      if (r < n && c < n) p.cmm.data_as<double>()[r * n + c] = v;
      if (r >= n && c < n) p.ctm.data_as<double>()[(r - n) * n + c] = v;
      if (r >= n && c >= n) p.ctt.data_as<double>()[(r - n) * m + (c - n)] = v;
    }
  return p;
}

/// The "check" preset (n = 912, m = 152) with its FP64 Cmm, Ctm, Ctt computed on the CPU.
struct PresetCovariances {
  AoSystem system;
  Array cmm, ctm, ctt;
};

/// The covariances of the "check" preset, FP64 on the CPU, noise on (the library's defaults).
inline PresetCovariances check_preset_covariances() {
  PresetCovariances out{ao_preset("check"), {}, {}, {}};
  CovarianceOptions co;
  co.device = DeviceKind::Cpu;
  out.cmm = covariance(out.system, CovarianceKind::cmm, co);
  out.ctm = covariance(out.system, CovarianceKind::ctm, co);
  out.ctt = covariance(out.system, CovarianceKind::ctt, co);
  return out;
}

/// Cmm with its strict upper triangle (row-major) replaced by uniform [-1e3, 1e3] junk drawn
/// with `seed`: a routine that reads only the lower triangle cannot tell it from Cmm.
inline Array with_junk_upper(const Array& cmm, unsigned seed) {
  Array junk = cmm.clone();
  const std::int64_t n = cmm.dim(0);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1e3, 1e3);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) junk.data_as<double>()[i * n + j] = uniform(rng);
  return junk;
}

/// The reconstructor and Cee computed on `device` from `p` and from Cmm with junk (seed
/// `junk_seed`) above its diagonal are bitwise equal: only the row-major lower triangle of Cmm is
/// read. A swapped fill mode (reading the junk) would change them by orders of magnitude or fail
/// the Cholesky factorisation.
inline void expect_only_lower_triangle_read(const Problem& p, unsigned junk_seed,
                                            DeviceKind device) {
  const Array junk = with_junk_upper(p.cmm, junk_seed);
  const Array r = reconstructor_fp64(p.cmm, p.ctm, device);
  const Array rj = reconstructor_fp64(junk, p.ctm, device);
  for (std::int64_t i = 0; i < r.size(); ++i) ASSERT_EQ(rj.at_as_double(i), r.at_as_double(i)) << i;
  const Array cee = error_covariance(p.ctt, p.ctm, p.cmm, r, device);
  const Array ceej = error_covariance(p.ctt, p.ctm, junk, r, device);
  for (std::int64_t i = 0; i < cee.size(); ++i)
    ASSERT_EQ(ceej.at_as_double(i), cee.at_as_double(i)) << i;
}

#if HALFSCOPE_HAS_LAPACKE
/// LAPACK's estimate (dpotrf + dpocon, 1-norm) of 1 / kappa_1 of the SPD matrix `spd` into
/// `*rcond`; fails the test (fatally: wrap the call in ASSERT_NO_FATAL_FAILURE) where the
/// Cholesky factorisation or the estimate fails.
inline void estimate_rcond(const Array& spd, double* rcond) {
  const std::int64_t n = spd.dim(0);
  std::vector<double> f(spd.data_as<double>(), spd.data_as<double>() + n * n);
  double anorm = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    double col = 0;
    for (std::int64_t i = 0; i < n; ++i) col += std::fabs(f[i * n + j]);
    anorm = std::max(anorm, col);
  }
  ASSERT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), f.data(),
                           static_cast<lapack_int>(n)),
            0);
  *rcond = 0;
  ASSERT_EQ(LAPACKE_dpocon(LAPACK_ROW_MAJOR, 'L', static_cast<lapack_int>(n), f.data(),
                           static_cast<lapack_int>(n), anorm, rcond),
            0);
}
#endif

}  // namespace halfscope::ao::test
