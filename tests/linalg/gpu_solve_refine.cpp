// The refinement on the GPU (solve_right_refined with device tiles): the FP32 cuBLAS residual
// against an FP64 host one, convergence of FP16 factors to the FP32 tolerance, and the memory
// checks of the solve's arguments. Skips without a device.
//
// Residual bound (Higham Thm 3.5 for each SGEMM chain, n terms per entry): the FP32 residual R of
// B - X A satisfies |R - R_exact| <= gamma_{n+1}(u32) (|B| + |X| |A|) element-wise.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/solve.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "linalg/solve_cpu.hpp"
#include "linalg/solve_support_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace {

Array random_rows(std::int64_t r, std::int64_t n, std::uint64_t seed) {
  const std::vector<float> v = halfscope::test::random_floats(r * n, -1.0f, 1.0f, seed);
  return Array::from_values<float>(v, {r, n});
}

// FP64 residual B - X A with the FP32 entries of A, and the magnitude |B| + |X| |A|.
void host_residual(const std::vector<double>& a, const Array& b, const Array& x, std::int64_t n,
                   std::vector<double>* r, std::vector<double>* magnitude) {
  const std::int64_t rhs = b.dim(0);
  r->assign(static_cast<std::size_t>(rhs * n), 0.0);
  magnitude->assign(r->size(), 0.0);
  for (std::int64_t c = 0; c < rhs; ++c)
    for (std::int64_t j = 0; j < n; ++j) {
      const double bv = b.data_as<float>()[c * n + j];
      double s = bv, m = std::fabs(bv);
      for (std::int64_t i = 0; i < n; ++i) {
        const double p = static_cast<double>(x.data_as<float>()[c * n + i]) *
                         static_cast<float>(a[static_cast<std::size_t>(i * n + j)]);
        s -= p;
        m += std::fabs(p);
      }
      (*r)[static_cast<std::size_t>(c * n + j)] = s;
      (*magnitude)[static_cast<std::size_t>(c * n + j)] = m;
    }
}

TEST(SolveRefineGpu, Fp32ResidualWithinBound) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t n = 157, nb = 32, rhs = 6;  // a partial last tile
  const std::vector<double> a = test::nugget_covariance(n);
  const TileMatrix ad = test::tiled(a, n, nb, Memory::device);
  const Array b = random_rows(rhs, n, 21), x = random_rows(rhs, n, 22);
  const Array bd = b.to(Memory::device), xd = x.to(Memory::device);
  Array rd(DType::f32, {rhs, n}, Memory::device);
  detail::residual_cuda(ad, xd.data_as<float>(), bd.data_as<float>(), rd.data_as<float>(), rhs);
  const Array r = rd.to(Memory::host);
  std::vector<double> ref, magnitude;
  host_residual(a, b, x, n, &ref, &magnitude);
  const double g = test::gamma(n + 1, 0x1p-24);
  for (std::size_t e = 0; e < ref.size(); ++e)
    ASSERT_LE(std::fabs(r.data_as<float>()[e] - ref[e]), g * magnitude[e]) << e;
  // The norm and the update helpers on the same data.
  double sum = 0;
  for (std::int64_t e = 0; e < r.size(); ++e)
    sum += static_cast<double>(r.data_as<float>()[e]) * r.data_as<float>()[e];
  EXPECT_NEAR(detail::norm_cuda(rd.data_as<float>(), rd.size()), std::sqrt(sum),
              1e-12 * std::sqrt(sum));
#endif
}

// The solve's device helpers against their host counterparts: the factor norms the solve policy
// sees (FP64 sums in another order: relative 1e-12), the finiteness scan and the transpose
// (exact).
TEST(SolveSupportGpu, KernelsMatchTheHost) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t n = 203, nb = 48;
  TileMatrix l = test::tiled(test::nugget_covariance(n), n, nb);
  (void)cholesky_tiles(l, {});  // the upper half of diagonal tiles still holds A: must not count
  TileMatrix ld;
  ld.layout = l.layout;
  ld.storage = l.storage.to(Memory::device);
  const std::vector<double> host = detail::factor_norms_cpu(l);
  const std::vector<double> device = detail::factor_norms_cuda(ld);
  ASSERT_EQ(host.size(), device.size());
  for (std::size_t e = 0; e < host.size(); ++e) EXPECT_NEAR(device[e], host[e], 1e-12 * host[e]);

  Array x = random_rows(3, 1000, 5);
  EXPECT_EQ(detail::first_non_finite_cuda(x.to(Memory::device).data_as<float>(), x.size()), -1);
  x.data_as<float>()[1717] = std::numeric_limits<float>::infinity();
  x.data_as<float>()[2222] = std::nanf("");
  EXPECT_EQ(detail::first_non_finite_cuda(x.to(Memory::device).data_as<float>(), x.size()), 1717);

  const Array t = random_rows(37, 70, 6), td = t.to(Memory::device);
  Array outd(DType::f32, {70, 37}, Memory::device);
  detail::transpose_cuda(td.data_as<float>(), 37, 70, outd.data_as<float>());
  const Array out = outd.to(Memory::host);
  for (std::int64_t i = 0; i < 37; ++i)
    for (std::int64_t j = 0; j < 70; ++j)
      ASSERT_EQ(out.data_as<float>()[j * 37 + i], t.data_as<float>()[i * 70 + j]);
#endif
}

TEST(SolveRefineGpu, Fp16FactorsReachTheTolerance) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, nb = 64, rhs = 5;
  const std::vector<double> a = test::nugget_covariance(n);  // kappa < 66, ||A||_2 < 66
  const TileMatrix ad = test::tiled(a, n, nb, Memory::device);
  const Array b = random_rows(rhs, n, 3);
  for (const char* factor_policy : {"uniform:HP1", "uniform:HP3", "band:SP=1,HP3=rest"}) {
    RefinementOptions options;
    options.factor.policy = parse_policy(factor_policy);
    Array xd = b.to(Memory::device);
    const RefinementReport report = solve_right_refined(ad, xd, options);
    const Array x = xd.to(Memory::host);
    std::vector<double> r, magnitude;
    host_residual(a, b, x, n, &r, &magnitude);
    double num = 0, den = 0, xnorm = 0;
    for (std::size_t e = 0; e < r.size(); ++e) {
      num += r[e] * r[e];
      den += static_cast<double>(b.data_as<float>()[e]) * b.data_as<float>()[e];
      xnorm += static_cast<double>(x.data_as<float>()[e]) * x.data_as<float>()[e];
    }
    const double exact = std::sqrt(num / den);
    std::cout << "[refine gpu] " << factor_policy << ": " << report.iterations
              << " corrections, last " << report.residuals.back() << ", FP64 " << exact << " ("
              << report.stop_reason << ")\n";
    EXPECT_TRUE(report.converged) << report.stop_reason;
    EXPECT_LE(report.residuals.back(), report.tolerance);
    // The FP64 residual of the returned X exceeds the FP32 one by at most the residual's own
    // error: gamma_{n+1}(u32) (||B|| + ||X|| ||A||_2) / ||B||, ||A||_2 < 66.
    const double slack = test::gamma(n + 1, 0x1p-24) * (1 + std::sqrt(xnorm / den) * 66.0);
    EXPECT_LE(exact, report.tolerance + slack) << factor_policy;
    if (std::string(factor_policy) == "uniform:HP3") {
      EXPECT_GE(report.iterations, 1);
    }
  }
}

TEST(SolveRefineGpu, MemoryMismatchIsInvalidInput) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 40;
  TileMatrix l = test::tiled(test::nugget_covariance(n), n, 16);  // host
  (void)cholesky_tiles(l, {});
  Array bd = random_rows(2, n, 1).to(Memory::device);
  try {
    (void)solve_right(l, bd);
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("host memory like the matrix"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device"), std::string::npos) << msg;
  }
  const TileMatrix ad = test::tiled(test::nugget_covariance(n), n, 16, Memory::device);
  Array bh = random_rows(2, n, 1);
  EXPECT_THROW((void)solve_right_refined(ad, bh), InvalidInput);
}

}  // namespace
}  // namespace halfscope::linalg
