// solve_right over several CUDA devices (SolveOptions::devices, src/linalg/solve_devices.cpp):
// rows of B split over the devices, each with its copy of L, against the one-device solve. On a
// one-GPU machine the device is listed twice and three times (the same copies and threads).
//
// Bound (gpu_solve.cpp): each solve is within 2 kappa 3 e of the exact solution, e = (gamma_{n+1}
// (2^-24) + the variant's term) trace(A) / ||A||_F, so two solves differ by at most twice that
// (cuBLAS may pick other kernels for fewer rows, so bit-identity is not promised); and, tighter,
// within one unit of the operand format (1e-5 for SP), as gpu_solve.cpp compares with the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/solve.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope::linalg {
namespace {

#if HALFSCOPE_WITH_CUDA

const double kRho = std::exp(-1.0 / 32.0);
const double kKappaBound = (1 + kRho) / (1 - kRho);

using test::device_lists;

TEST(GpuSolveDevices, RowsSplitOverDevicesAgreeWithOneDevice) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = test::kms(n, kRho, 1.0);
  double trace = 0, norm = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    trace += a[static_cast<std::size_t>(i * n + i)];
    for (std::int64_t j = 0; j < n; ++j)
      norm += a[static_cast<std::size_t>(i * n + j)] * a[static_cast<std::size_t>(i * n + j)];
  }
  for (const std::string policy : {"uniform:SP", "uniform:HP1"}) {
    TileMatrix l = test::tiled(a, n, nb, Memory::device);
    (void)cholesky_tiles(l, CholeskyOptions{});
    SolveOptions options;
    options.policy = parse_policy(policy);
    const GemmVariant v = policy == "uniform:SP" ? GemmVariant::SP : GemmVariant::HP1;
    const double e = (test::gamma(n + 1, std::ldexp(1.0, -24)) + test::variant_term(v, n)) * trace /
                     std::sqrt(norm);
    for (const std::int64_t r : {std::int64_t{7}, std::int64_t{1}}) {
      std::mt19937 rng(static_cast<unsigned>(r));
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> values(static_cast<std::size_t>(r * n));
      for (float& x : values) x = u(rng);
      const Array b = Array::from_values<float>(values, {r, n}).to(Memory::device);
      Array one = b.clone();
      (void)solve_right(l, one, options);
      const Array ref = one.to(Memory::host);
      for (const auto& devices : device_lists()) {
        options.devices = devices;
        Array many = b.clone();
        const SolveReport report = solve_right(l, many, options);
        options.devices.clear();
        const Array got = many.to(Memory::host);
        double num = 0, den = 0;
        for (std::int64_t k = 0; k < r * n; ++k) {
          const double d = static_cast<double>(got.data_as<float>()[k]) - ref.data_as<float>()[k];
          num += d * d;
          den += static_cast<double>(ref.data_as<float>()[k]) * ref.data_as<float>()[k];
        }
        EXPECT_LE(std::sqrt(num / den), 2 * (2 * kKappaBound * 3 * e))
            << policy << " r=" << r << " on " << devices.size() << " devices";
        // The same roundings of L's tiles and of each solved block on every device: apart from
        // summation order (and the few block entries it makes round the other way, one unit u
        // each) the two solves agree, far inside the bound above, which is O(1) for HP1.
        const double unit = v == GemmVariant::HP1 ? std::ldexp(1.0, -11) : 1e-5;
        EXPECT_LE(std::sqrt(num / den), unit)
            << policy << " r=" << r << " on " << devices.size() << " devices";
        EXPECT_EQ(report.count(v), (n / nb + 1) * (n / nb) / 2) << policy;
      }
    }
  }
}

TEST(GpuSolveDevices, HostMemoryAndUnknownDevicesAreInvalidInput) {
  HS_REQUIRE_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const std::vector<double> a = test::kms(64, kRho, 1.0);
  TileMatrix l = test::tiled(a, 64, 16, Memory::device);
  (void)cholesky_tiles(l, CholeskyOptions{});
  SolveOptions options;
  options.devices = {0, count};
  Array b = Array::from_values<float>(std::vector<float>(64, 1.0f), {1, 64}).to(Memory::device);
  EXPECT_THROW((void)solve_right(l, b, options), InvalidInput);
  TileMatrix host = test::tiled(a, 64, 16, Memory::host);
  (void)cholesky_tiles(host, CholeskyOptions{});
  Array hb = Array::from_values<float>(std::vector<float>(64, 1.0f), {1, 64});
  options.devices = {0, 0};  // one device streams a host factor (gpu_solve_streamed.cpp)
  EXPECT_THROW((void)solve_right(host, hb, options), InvalidInput);
}

#endif

}  // namespace
}  // namespace halfscope::linalg
