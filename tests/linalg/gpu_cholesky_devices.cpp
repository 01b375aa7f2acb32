// The tile Cholesky over several CUDA devices (CholeskyOptions::devices,
// src/linalg/cholesky_devices_cuda.cu) against the one-device factorization of the same input.
// On a one-GPU machine the device is listed two and three times (separate copies of the layout,
// the same peer copies and events); with several GPUs every device of the host is used.
//
// Matrix and bounds as gpu_cholesky.cpp: KMS A_ij = s rho^|i-j|, rho = e^-1/32, kappa_2(A) < 64;
// backward error ||L L^T - A||_F / ||A||_F <= e trace(A) / ||A||_F with e = gamma_{n+1}(2^-24) +
// the largest variant term in use. Both factorizations round every input alike and differ only
// in the GEMM kernels cuBLAS picks for other batch sizes (summation order), each is within the
// forward bound 2 kappa e trace / ||A|| of the exact factor, so ||L_many - L_one|| / ||L|| <=
// 4 kappa e trace / ||A||.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cholesky_test_support.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
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

using test::backward;
using test::device_lists;
using test::factor;
using test::Factored;
using test::rel_diff;

class GpuCholeskyDevicesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCholeskyDevicesTest, AgreesWithOneDevice) {
  HS_REQUIRE_GPU();
  struct Case {
    std::int64_t n, nb;
  };
  for (const Case c : {Case{300, 64}, Case{97, 7}, Case{50, 64}, Case{1, 8}}) {
    const std::vector<double> a = test::kms(c.n, kRho, 1.0);
    CholeskyOptions opts;
    opts.policy = parse_policy(GetParam());
    const Factored one = factor(a, c.n, c.nb, opts, Memory::device);
    const double bound = backward(one, a, c.n).second;
    for (const auto& devices : device_lists())
      for (const Memory memory : {Memory::device, Memory::host}) {
        opts.devices = devices;
        const Factored many = factor(a, c.n, c.nb, opts, memory);
        const auto [err, err_bound] = backward(many, a, c.n);
        const std::string what = GetParam() + " n=" + std::to_string(c.n) +
                                 " nb=" + std::to_string(c.nb) + " on " +
                                 std::to_string(devices.size()) + " devices, " +
                                 (memory == Memory::host ? "host" : "device");
        EXPECT_LE(err, err_bound) << what;
        EXPECT_LE(rel_diff(many.l, one.l), 4 * kKappaBound * bound) << what;
        EXPECT_EQ(many.report.tiles, one.report.tiles) << what;
        EXPECT_EQ(many.report.attempts, 1) << what;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltIns, GpuCholeskyDevicesTest,
                         ::testing::ValuesIn(test::builtin_policies()), test::policy_test_name);

TEST(GpuCholeskyDevices, NotPositiveDefiniteNamesTheSameTile) {
  HS_REQUIRE_GPU();
  std::vector<double> a = test::kms(300, kRho, 1.0);
  a[static_cast<std::size_t>(200 * 300 + 200)] = -1.0;  // minors of order <= 200 stay SPD
  for (const auto& devices : device_lists()) {
    CholeskyOptions opts;
    opts.policy = parse_policy("band:SP=1,HP1=rest");
    opts.devices = devices;
    TileMatrix t = test::tiled(a, 300, 64, Memory::device);
    try {
      (void)cholesky_tiles(t, opts);
      ADD_FAILURE() << "no NotPositiveDefinite on " << devices.size() << " devices";
    } catch (const NotPositiveDefinite& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tile (3, 3)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("leading minor of order 201"), std::string::npos) << msg;
    }
  }
}

TEST(GpuCholeskyDevices, RecoverFinishesFailingHp3Run) {
  HS_REQUIRE_GPU();
  // Scale 1e5: C entries exceed 65504, so HP3 (FP16 C) overflows on some device; the failure
  // travels back like the one-device one and the retry promotes the same tiles.
  const std::int64_t n = 300, nb = 64;
  const std::vector<double> a = test::kms(n, kRho, 1e5);
  CholeskyOptions opts;
  opts.policy = parse_policy("uniform:HP3");
  opts.recover = true;
  opts.scale = false;  // scaled, nothing would overflow
  const Factored one = factor(a, n, nb, opts, Memory::device);
  for (const auto& devices : device_lists()) {
    opts.devices = devices;
    const Factored many = factor(a, n, nb, opts, Memory::device);
    EXPECT_EQ(many.report.attempts, one.report.attempts);
    EXPECT_EQ(many.report.tiles, one.report.tiles);
    const auto [err, bound] = backward(many, a, n);
    EXPECT_LE(err, bound);
  }
}

TEST(GpuCholeskyDevices, UnknownDeviceIsInvalidInput) {
  HS_REQUIRE_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  TileMatrix t = test::tiled(test::kms(64, kRho, 1.0), 64, 16, Memory::device);
  CholeskyOptions opts;
  opts.devices = {0, count};
  try {
    (void)cholesky_tiles(t, opts);
    ADD_FAILURE() << "no InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device " + std::to_string(count)), std::string::npos)
        << e.what();
  }
}

#endif

}  // namespace
}  // namespace halfscope::linalg
