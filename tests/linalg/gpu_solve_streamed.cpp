// solve_right with the factor in host memory on one device (SolveOptions::device_memory,
// src/linalg/solve_ooc_cuda.cu): L streamed by slabs of tile columns, b on the device or in host
// memory by blocks of rows, against the in-core device solve of the same factor.
//
// Agreement: the forward pass is the in-core one step for step (the same spans); the backward
// pass takes each block's sum from one tile column (left-looking) in another order, from the same
// rounded operands. So the two differ by summation order only: far inside the Higham bound of
// gpu_solve_devices.cpp, within one unit of the operand format (1e-5 for SP and DP, 2^-11 for the
// FP16 variants' inputs, 2^-8 for BF16), which is what is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/solve.hpp"
#include "linalg/solve_devices.hpp"
#include "solve_test_support.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope::linalg {
namespace {

#if HALFSCOPE_WITH_CUDA

const double kRho = std::exp(-1.0 / 32.0);

struct Case {
  std::string policy;
  double unit;  // the agreement required (relative Frobenius)
};

using halfscope::test::relative_difference;

// The KMS matrix of order n (kappa < 64) factored in FP32 tiles of nb in host memory.
TileMatrix host_factor(std::int64_t n, std::int64_t nb) {
  TileMatrix host = test::tiled(test::kms(n, kRho, 1.0), n, nb, Memory::host);
  (void)cholesky_tiles(host, CholeskyOptions{});
  return host;
}

Array random_rows(std::int64_t r, std::int64_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> values(static_cast<std::size_t>(r * n));
  for (float& x : values) x = u(rng);
  return Array::from_values<float>(values, {r, n});
}

// n = 1100 in tiles of 64 (a short last tile), 200 right-hand sides (the tiles' inverses apply).
class GpuSolveStreamedTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuSolveStreamedTest, AgreesWithInCore) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 1100, nb = 64, r = 200;
  const Case c = GetParam();
  const std::vector<double> a = test::kms(n, kRho, 1.0);
  TileMatrix host = test::tiled(a, n, nb, Memory::host);
  (void)cholesky_tiles(host, CholeskyOptions{});
  TileMatrix device(host.layout, DType::f32, Memory::device);
  copy_bytes(device.storage.data(), Memory::device, host.storage.data(), Memory::host,
             host.storage.nbytes());
  SolveOptions options;
  options.policy = parse_policy(c.policy);
  const Array b = random_rows(r, n, 7);
  Array in_core = b.to(Memory::device);
  (void)solve_right(device, in_core, options);
  const Array ref = in_core.to(Memory::host);

  // L is 2.9 MB, one tile column 0.3 MB, b 0.9 MB. 0: everything at once; 3.5 MiB: b on the
  // device beside slabs of a few columns; 1.75 MiB: b in host memory by blocks of rows beside
  // slabs of one or two columns, for every policy here.
  options.devices = {0};
  const std::int64_t nt = host.layout.tile_rows();
  for (const std::int64_t budget :
       {std::int64_t{0}, std::int64_t{3584} << 10, std::int64_t{1792} << 10})
    for (const bool host_b : {true, false}) {
      if (budget != 0 && host_b != (budget == (std::int64_t{1792} << 10))) continue;
      options.device_memory = budget;
      Array x = host_b ? b.clone(Memory::host) : b.to(Memory::device);
      const SolveReport report = solve_right(host, x, options);
      const std::string what = c.policy + ", budget " + std::to_string(budget) +
                               (host_b ? ", b in host memory" : ", b on the device") + ": " +
                               std::to_string(report.slabs) + " slabs, " +
                               std::to_string(report.row_blocks) + " blocks of rows";
      EXPECT_LE(relative_difference(x.to(Memory::host), ref), c.unit) << what;
      std::int64_t tiles = 0;
      for (const std::int64_t t : report.tiles) tiles += t;
      EXPECT_EQ(tiles, nt * (nt - 1) / 2) << what;
      EXPECT_EQ(report.device_to_host_bytes, host_b ? b.nbytes() : 0) << what;
      if (budget == 0) {
        EXPECT_EQ(report.slabs, 1) << what;
        EXPECT_EQ(report.row_blocks, 1) << what;
        // L went over once, b's rows once each way.
        EXPECT_EQ(report.host_to_device_bytes, host.storage.nbytes() + (host_b ? b.nbytes() : 0))
            << what;
        continue;
      }
      EXPECT_GE(report.slabs, 3) << what;
      EXPECT_EQ(report.row_blocks > 1, host_b) << what;
      // Each block of rows streams L twice, less the slabs still on the device at the turns.
      EXPECT_GE(report.host_to_device_bytes, host.storage.nbytes() * report.row_blocks) << what;
      EXPECT_LE(report.host_to_device_bytes,
                2 * host.storage.nbytes() * report.row_blocks + (host_b ? b.nbytes() : 0))
          << what;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, GpuSolveStreamedTest,
    ::testing::Values(Case{"uniform:SP", 1e-5}, Case{"uniform:HP1", std::ldexp(1.0, -11)},
                      Case{"band:SP=2,BF16=rest", std::ldexp(1.0, -8)},
                      // C in FP64, one tile per GEMM (the C-rounding path of both passes).
                      Case{"band:SP=3,DP=rest", 1e-5}),
    [](const ::testing::TestParamInfo<Case>& param) {
      std::string name;
      for (const char ch : param.param.policy)
        name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

// A hook (detail::RowBlockHook, the reconstructor's device tip-tilt correction) sees every block
// of rows once, solved, on the device, cut from the end of b and handed over last first; what it
// writes there is what comes back.
TEST(GpuSolveStreamed, HookSeesEveryBlockFromTheEndAndItsWritesComeBack) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 1100, nb = 64, r = 200;
  const TileMatrix host = host_factor(n, nb);
  const Array b = random_rows(r, n, 11);
  SolveOptions options;
  options.devices = {0};
  for (const bool host_b : {true, false}) {
    options.device_memory = host_b ? std::int64_t{1792} << 10 : 0;
    Array plain = b.clone(Memory::host);
    (void)solve_right(host, plain, options);
    Array x = host_b ? b.clone(Memory::host) : b.to(Memory::device);
    std::vector<std::pair<std::int64_t, std::int64_t>> seen;  // (first, count)
    std::vector<float> written(static_cast<std::size_t>(r * n));
    double diff = 0, norm = 0;  // hook's blocks against the plain solve: Frobenius
    const SolveReport report = detail::solve_right_streamed_with(
        host, x, options, [&](float* rows, std::int64_t first, std::int64_t count, void* stream) {
          seen.emplace_back(first, count);
          ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
          float* block = written.data() + first * n;
          copy_bytes(block, Memory::host, rows, Memory::device, count * n * 4);
          const float* want = plain.data_as<float>() + first * n;
          for (std::int64_t e = 0; e < count * n; ++e) {
            diff += (double{block[e]} - want[e]) * (double{block[e]} - want[e]);
            norm += double{want[e]} * want[e];
            block[e] = -2 * block[e];
          }
          copy_bytes(rows, Memory::device, block, Memory::host, count * n * 4);
        });
    const std::string what = host_b ? "b in host memory" : "b on the device";
    ASSERT_FALSE(seen.empty()) << what;
    EXPECT_EQ(std::ssize(seen), report.row_blocks) << what;
    EXPECT_EQ(report.row_blocks > 1, host_b) << what;
    std::int64_t end = r;  // blocks tile [0, r) from the end
    for (const auto& [first, count] : seen) {
      EXPECT_EQ(first + count, end) << what;
      EXPECT_GT(count, 0) << what;
      end = first;
    }
    EXPECT_EQ(end, 0) << what;
    // Blocks cut from the end are not the plain solve's, so their GEMMs may round differently:
    // within the streamed-against-in-core agreement of SP above.
    EXPECT_LE(std::sqrt(diff / norm), 1e-5) << what;
    const Array back = x.to(Memory::host);
    EXPECT_EQ(std::memcmp(back.data(), written.data(), written.size() * 4), 0) << what;
  }
}

TEST(GpuSolveStreamed, Fp16OverflowNamesTheSameBlockAsInCore) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 300;
  const TileMatrix host = host_factor(n, 64);
  TileMatrix device(host.layout, DType::f32, Memory::device);
  copy_bytes(device.storage.data(), Memory::device, host.storage.data(), Memory::host,
             host.storage.nbytes());
  SolveOptions options;
  options.policy = parse_policy("uniform:HP1");
  const Array b = random_rows(3, n, 11, 1e6f);  // solved blocks beyond 65504
  const std::string in_core = halfscope::test::message_of<NumericalError>([&] {
    Array x = b.to(Memory::device);
    (void)solve_right(device, x, options);
  });
  options.devices = {0};
  options.device_memory = 1 << 20;
  const std::string streamed = halfscope::test::message_of<NumericalError>([&] {
    Array x = b.clone(Memory::host);
    (void)solve_right(host, x, options);
  });
  EXPECT_NE(in_core.find("solved block 0"), std::string::npos) << in_core;
  EXPECT_EQ(streamed, in_core);
}

TEST(GpuSolveStreamed, NonFiniteRightHandSideLeavesBUntouched) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 1100;
  const TileMatrix host = host_factor(n, 64);
  SolveOptions options;
  options.devices = {0};
  // 0: b in one block (checked on the device); 1.75 MiB: several blocks (checked on the host).
  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{1792} << 10}) {
    options.device_memory = budget;
    Array x = random_rows(200, n, 13);
    x.data_as<float>()[150 * n + 7] = std::nanf("");
    const Array before = x.clone(Memory::host);
    const std::string m =
        halfscope::test::message_of<InvalidInput>([&] { (void)solve_right(host, x, options); });
    EXPECT_NE(m.find("finite, found a non-finite one at row 150, column 7"), std::string::npos)
        << "budget " << budget << ": " << m;
    const float* a = x.data_as<float>();
    const float* c = before.data_as<float>();
    for (std::int64_t k = 0; k < x.size(); ++k)
      if (!(a[k] == c[k] || (std::isnan(a[k]) && std::isnan(c[k]))))
        FAIL() << "b changed at " << k << ", budget " << budget;
  }
}

TEST(GpuSolveStreamed, TooSmallBudgetNamesWhatItNeeds) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 1100;
  const TileMatrix host = host_factor(n, 64);
  SolveOptions options;
  options.devices = {0};
  options.device_memory = 100 << 10;
  Array x = random_rows(4, n, 3);
  const Array before = x.clone(Memory::host);
  const std::string m =
      halfscope::test::message_of<InvalidInput>([&] { (void)solve_right(host, x, options); });
  EXPECT_NE(m.find("device_memory: "), std::string::npos) << m;
  EXPECT_NE(m.find("is too small to solve with"), std::string::npos) << m;
  EXPECT_NE(m.find("n = 1100 in tiles of 64"), std::string::npos) << m;
  EXPECT_NE(m.find("it needs at least"), std::string::npos) << m;
  EXPECT_EQ(relative_difference(x, before), 0.0);  // untouched
  // b on the device must fit whole: with HP1, 2000 rows need their FP16 copy (4.6 MB).
  options.policy = parse_policy("uniform:HP1");
  options.device_memory = 1 << 20;
  Array big = random_rows(2000, n, 5).to(Memory::device);
  EXPECT_THROW((void)solve_right(host, big, options), InvalidInput);
}

#endif

}  // namespace
}  // namespace halfscope::linalg
