// The tensor-core matched filter (src/mfilter/tensor_cuda.cu) called directly through the backend
// contract, against the FP64 reference of mfilter_testing.hpp, in mixed, bf16 and split:
// per-channel and network, short and full normalization, moveouts, weights, step 1 and 3, ragged
// sizes (T not a multiple of 16, K not a multiple of 16, K > 256, L not a multiple of the 512-lag
// tile), flat windows, non-finite operands. Optional timing of issue 4's cases (a) and (b):
// HALFSCOPE_MF_TENSOR_BENCH=1.
//
// Tolerances: cc_error_bound (mfilter_testing.hpp) per channel, sum_c |w| times it for a stack.
// For K = 256: mixed 2 u_h + gamma_K(u_32) + 4 u_32 ~ 9.9e-4 (operand rounding, u_h = 2^-11);
// bf16 2^-7 + ... ~ 7.8e-3; split 2 u_h^2 + 2 u_32 + gamma_3K(u_32) + 4 u_32 ~ 5.0e-5 (the
// hi + lo operands err by u_h^2 = 2^-22 each, FP32 accumulation of 3K terms dominates). The
// kernel scales each data tile and each template channel by a power of two chosen from its own
// maximum, so the underflow term q of the bound (global maxima over minimum norms) covers it.
// Built only with CUDA: a build without it has no GPU backends to test.
#include "halfscope/config.hpp"
#if HALFSCOPE_WITH_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/tensor_cuda.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

namespace halfscope::mfilter {
namespace {

using mftest::Case;

using mftest::DeviceVector;

using mftest::to_float;

/// Device inputs of a case, ready for tensor_cuda.
struct DeviceCase {
  DeviceVector<float> templates, data, weights;
  DeviceVector<std::int64_t> moveouts;
  explicit DeviceCase(const Case& c)
      : templates(to_float(c.templates)),
        data(to_float(c.data)),
        weights(to_float(c.weights)),
        moveouts(c.moveouts) {}
};

Dims dims_of(const Case& c, MfNormalize normalize, std::int64_t step, bool network) {
  Dims d;
  d.templates = c.T, d.channels = c.C, d.length = c.K, d.samples = c.L, d.step = step;
  d.n_corr = mftest::n_corr_of(c.L, c.K, step);
  d.normalize = normalize;
  d.network_sum = network;
  return d;
}

/// Every tiling of the kernel (kernels/tensor_tuning.hpp) runs every correctness case, and so does
/// the wgmma network kernel (Wgmma: where a call does not qualify, Auto's tiling runs instead).
constexpr TensorTiling kTilings[] = {TensorTiling::Wide, TensorTiling::Deep,
                                     TensorTiling::WidePairs, TensorTiling::DeepPairs,
                                     TensorTiling::Wgmma};

const char* tiling_name(TensorTiling t) {
  switch (t) {
    case TensorTiling::Wide:
      return "wide";
    case TensorTiling::Deep:
      return "deep";
    case TensorTiling::WidePairs:
      return "wide-pairs";
    case TensorTiling::DeepPairs:
      return "deep-pairs";
    case TensorTiling::Wgmma:
      return "wgmma";
    default:
      return "auto";
  }
}

/// Sets HALFSCOPE_MF_TENSOR_DIRECT for its lifetime ("0": every step takes the staged epilogue).
struct DirectStores {
  explicit DirectStores(bool on) {
    if (!on) setenv("HALFSCOPE_MF_TENSOR_DIRECT", "0", 1);
  }
  ~DirectStores() { unsetenv("HALFSCOPE_MF_TENSOR_DIRECT"); }
  DirectStores(const DirectStores&) = delete;
  DirectStores& operator=(const DirectStores&) = delete;
};

/// Runs the tensor backend on a case; returns the float32 output on the host (and, when `wgmma`
/// is not null, whether the wgmma network kernel ran).
std::vector<float> run_tensor(const Case& c, Precision precision, MfNormalize normalize,
                              std::int64_t step, bool network,
                              TensorTiling tiling = TensorTiling::Auto, bool* wgmma = nullptr) {
  const Dims d = dims_of(c, normalize, step, network);
  const DeviceCase dev(c);
  const std::int64_t n_out = (network ? c.T : c.T * c.C) * d.n_corr;
  DeviceVector<float> out(n_out);
  // Poison the output: every element must be written.
  HS_CUDA_CHECK(cudaMemset(out.get(), 0xff, static_cast<std::size_t>(n_out) * 4));
  DeviceProblem p{
      d,      dev.templates.get(), dev.data.get(), dev.moveouts.get(), dev.weights.get(), out.get(),
      nullptr};
  TensorPhaseTimes times;
  tensor_cuda_timed(p, precision, wgmma != nullptr ? &times : nullptr, tiling);
  if (wgmma != nullptr) *wgmma = times.wgmma;
  std::vector<float> host(static_cast<std::size_t>(n_out));
  HS_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), host.size() * 4, cudaMemcpyDeviceToHost));
  return host;
}

/// max |got - want|; +inf for a non-finite value (a poisoned element never written).
double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!std::isfinite(e)) return INFINITY;
    worst = std::max(worst, e);
  }
  return worst;
}

struct Shape {
  std::int64_t T, C, K, L, step;
  MfNormalize normalize;
  bool network, moveouts;
};

class TensorPrecision : public ::testing::TestWithParam<Precision> {};

/// Compares one shape against the FP64 reference on the float32-rounded inputs.
void check_shape(Precision precision, const Shape& s, std::uint64_t seed) {
  Case c = mftest::random_case(s.T, s.C, s.K, s.L, seed, 50.0);
  if (s.moveouts) mftest::randomize_network(c, -37, 95, seed + 1);
  c = mftest::rounded_to_float(c);
  const auto want = mftest::reference_cc(c, s.normalize, s.step, s.network);
  const double channel = mftest::cc_error_bound(precision, s.K, mftest::underflow_ratio(c));
  const double bound = s.network ? mftest::stack_error_bound(c, channel) : channel;
  for (TensorTiling tiling : kTilings) {
    const auto got = run_tensor(c, precision, s.normalize, s.step, s.network, tiling);
    EXPECT_LE(max_error(got, want), bound)
        << "T=" << s.T << " C=" << s.C << " K=" << s.K << " L=" << s.L << " step=" << s.step
        << " network=" << s.network << " tiling=" << tiling_name(tiling);
  }
  // Not trivially passing: the outputs are not all zero.
  double largest = 0;
  for (double v : want) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 0.1);
}

TEST_P(TensorPrecision, PerChannelShortRagged) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {19, 2, 40, 1500, 1, MfNormalize::Short, false, false}, 11);
}

TEST_P(TensorPrecision, PerChannelFullMoveoutsLongTemplates) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {17, 2, 300, 1700, 1, MfNormalize::Full, false, true}, 12);
}

/// K = 800: the template fragments no longer fit in shared memory beside the tile (two blocks
/// per SM), so the kernel reads them through L1 (KernelArgs::frags_in_shared = false).
TEST_P(TensorPrecision, PerChannelLongTemplatesFromL1) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {3, 1, 800, 2600, 1, MfNormalize::Short, false, false}, 16);
}

/// Per-channel, step 1, with moveouts shared by a template group on a channel (negative, pushing
/// windows off either end, and one group with differing moveouts): the direct epilogue stores
/// from the accumulators for the uniform groups, the staged one serves the other; n_corr is odd so
/// rows alternate between 64-bit and 32-bit stores, and T = 19 leaves padding rows. Both paths
/// (direct stores disabled by HALFSCOPE_MF_TENSOR_DIRECT=0) meet the bound.
TEST_P(TensorPrecision, PerChannelGroupMoveoutsDirectStores) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(19, 3, 40, 1500, 17, 50.0);
  const std::int64_t shared[3][2] = {{-37, 5}, {0, 95}, {0, 12}};
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t ch = 0; ch < c.C; ++ch) {
      std::int64_t mv = shared[ch][t / 16];
      if (ch == 2 && t < 16) mv = t % 3 - 1;  // group 0 on channel 2: not uniform
      c.moveouts[static_cast<std::size_t>(t * c.C + ch)] = mv;
    }
  c = mftest::rounded_to_float(c);
  const double bound = mftest::cc_error_bound(GetParam(), c.K, mftest::underflow_ratio(c));
  for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
    const auto want = mftest::reference_cc(c, normalize, 1, false);
    ASSERT_EQ(mftest::n_corr_of(c.L, c.K, 1) % 2, 1);
    for (bool direct : {true, false})
      for (TensorTiling tiling : kTilings) {
        const DirectStores env(direct);
        const auto got = run_tensor(c, GetParam(), normalize, 1, false, tiling);
        EXPECT_LE(max_error(got, want), bound) << tiling_name(tiling) << " direct=" << direct
                                               << " full=" << (normalize == MfNormalize::Full);
      }
  }
}

TEST_P(TensorPrecision, NetworkShortMoveoutsWeights) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {21, 3, 64, 1400, 1, MfNormalize::Short, true, true}, 13);
}

/// Network, step 1: the stack added to from the accumulators (direct epilogue) equals the stack
/// added to from the staged tile of w CC (HALFSCOPE_MF_TENSOR_DIRECT=0) bit for bit (same
/// values, same additions, same channel order), and both meet the bound; T = 21 leaves padding rows
/// and the moveouts push windows off both ends of the data.
TEST_P(TensorPrecision, NetworkDirectMatchesStaged) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(21, 3, 64, 1400, 18, 50.0);
  mftest::randomize_network(c, -37, 95, 19);
  c = mftest::rounded_to_float(c);
  const double channel = mftest::cc_error_bound(GetParam(), c.K, mftest::underflow_ratio(c));
  const double bound = mftest::stack_error_bound(c, channel);
  for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
    const auto want = mftest::reference_cc(c, normalize, 1, true);
    for (TensorTiling tiling : kTilings) {
      SCOPED_TRACE(std::string(tiling_name(tiling)) +
                   (normalize == MfNormalize::Full ? " full" : " short"));
      std::vector<float> got[2];
      for (bool direct : {true, false}) {
        const DirectStores env(direct);
        got[direct] = run_tensor(c, GetParam(), normalize, 1, true, tiling);
        EXPECT_LE(max_error(got[direct], want), bound) << "direct=" << direct;
      }
      ASSERT_EQ(got[0].size(), got[1].size());
      for (std::size_t i = 0; i < got[0].size(); ++i)
        ASSERT_EQ(got[1][i], got[0][i]) << "stack element " << i;
    }
  }
}

/// True on a device whose compute capability is 9.0 (the wgmma kernel's sm_90a code runs there).
bool runs_sm90a() {
  int device = 0, major = 0, minor = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

/// The wgmma network kernel on shapes that exercise its edges: T not a multiple of its 64
/// templates (a ragged second group), K not a multiple of 16 and K > 256 (K' up to 416 leaves one
/// block per SM), n_corr not a multiple of its 128 times, moveouts pushing windows off both ends
/// of the data (spans filled element by element, zero outside), zero weights (rows skipped and
/// exactly 0 when a template's weights all are), short and full normalization. On a compute
/// capability 9.0 device it must be the kernel that ran for mixed and bf16; a spread too long for
/// its shared memory (K' > 2000) goes back to the other kernels, within the same bound.
TEST_P(TensorPrecision, NetworkWgmmaEdges) {
  HS_REQUIRE_GPU();
  struct Edge {
    std::int64_t T, C, K, L, lo, hi;
    bool expect_wgmma;
  };
  const bool sm90a = runs_sm90a() && GetParam() != Precision::Split;
  for (const Edge& e : {Edge{70, 3, 45, 2000, -37, 95, true}, Edge{65, 2, 300, 1900, -20, 90, true},
                        Edge{20, 2, 48, 5000, -1000, 1500, false}}) {
    Case c = mftest::random_case(e.T, e.C, e.K, e.L, 71 + e.T, 50.0);
    mftest::randomize_network(c, e.lo, e.hi, 72 + e.T);
    for (std::int64_t ch = 0; ch < c.C; ++ch) c.weights[static_cast<std::size_t>(3 * c.C + ch)] = 0;
    c.weights[static_cast<std::size_t>(5 * c.C + 1)] = 0;
    c = mftest::rounded_to_float(c);
    const double channel = mftest::cc_error_bound(GetParam(), c.K, mftest::underflow_ratio(c));
    const double bound = mftest::stack_error_bound(c, channel);
    const std::int64_t n = mftest::n_corr_of(c.L, c.K, 1);
    for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
      SCOPED_TRACE("T=" + std::to_string(e.T) + " K=" + std::to_string(e.K) +
                   (normalize == MfNormalize::Full ? " full" : " short"));
      const auto want = mftest::reference_cc(c, normalize, 1, true);
      bool wgmma = false;
      const auto got = run_tensor(c, GetParam(), normalize, 1, true, TensorTiling::Wgmma, &wgmma);
      EXPECT_EQ(wgmma, sm90a && e.expect_wgmma);
      EXPECT_LE(max_error(got, want), bound);
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(3 * n + i)], 0.0f) << "zero-weight row, " << i;
    }
  }
}

TEST_P(TensorPrecision, NetworkFullStep3) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {33, 3, 77, 2100, 3, MfNormalize::Full, true, true}, 14);
}

TEST_P(TensorPrecision, PerChannelStep3Short) {
  HS_REQUIRE_GPU();
  check_shape(GetParam(), {5, 2, 256, 1900, 3, MfNormalize::Short, false, true}, 15);
}

/// Moveout spread beyond one tile of window starts (several tiles per channel), a template
/// group whose weights are all zero (its stack rows are exactly 0), and moveouts that push
/// windows off both ends of the data; network and per-channel.
TEST_P(TensorPrecision, LargeSpreadAndZeroWeights) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(20, 2, 48, 3000, 61, 50.0);
  mftest::randomize_network(c, -300, 400, 62);
  for (std::int64_t t = 16; t < 20; ++t)
    for (std::int64_t ch = 0; ch < c.C; ++ch) c.weights[static_cast<std::size_t>(t * c.C + ch)] = 0;
  c.weights[1] = 0;  // template 0, channel 1
  c = mftest::rounded_to_float(c);
  const double channel = mftest::cc_error_bound(GetParam(), c.K, mftest::underflow_ratio(c));
  for (const auto& [network, tiling] : {std::pair{true, TensorTiling::Wide},
                                        {true, TensorTiling::Deep},
                                        {true, TensorTiling::Wgmma},
                                        {false, TensorTiling::Wide},
                                        {false, TensorTiling::Deep}}) {
    SCOPED_TRACE(tiling_name(tiling));
    const auto want = mftest::reference_cc(c, MfNormalize::Short, 1, network);
    const auto got = run_tensor(c, GetParam(), MfNormalize::Short, 1, network, tiling);
    EXPECT_LE(max_error(got, want), network ? mftest::stack_error_bound(c, channel) : channel);
    if (network) {
      const std::int64_t n = mftest::n_corr_of(c.L, c.K, 1);
      for (std::int64_t i = 0; i < 4 * n; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(16 * n + i)], 0.0f) << "zero-weight row, " << i;
    }
  }
}

/// Zero-filled and constant stretches: flat windows give exactly 0 (full normalization makes the
/// constant stretch flat too). Elsewhere the reference bound holds, except for windows mostly in
/// the constant stretch: there the operands round relative to the offset 2.5, not to the small
/// demeaned energy (emulation.hpp), which the bound does not cover, so those are not compared.
TEST_P(TensorPrecision, FlatWindowsGiveZero) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(3, 2, 32, 1200, 21, 1.0);
  for (std::int64_t k = 300; k < 420; ++k) c.data[static_cast<std::size_t>(k)] = 0.0;
  for (std::int64_t k = 700; k < 800; ++k) c.data[static_cast<std::size_t>(c.L + k)] = 2.5;
  c = mftest::rounded_to_float(c);
  const auto want = mftest::reference_cc(c, MfNormalize::Full, 1, false);
  const std::int64_t n = mftest::n_corr_of(c.L, c.K, 1);
  const double bound = mftest::cc_error_bound(GetParam(), c.K, mftest::underflow_ratio(c));
  for (TensorTiling tiling : kTilings) {
    SCOPED_TRACE(tiling_name(tiling));
    const auto got = run_tensor(c, GetParam(), MfNormalize::Full, 1, false, tiling);
    for (std::int64_t t = 0; t < c.T; ++t)
      for (std::int64_t ch = 0; ch < c.C; ++ch)
        for (std::int64_t i = 0; i < n; ++i) {
          const auto at = static_cast<std::size_t>((t * c.C + ch) * n + i);
          const bool flat = ch == 0 ? (i >= 300 && i + c.K <= 420) : (i >= 700 && i + c.K <= 800);
          const std::int64_t in_const =
              ch == 1 ? std::max<std::int64_t>(0, std::min(i + c.K, std::int64_t{800}) -
                                                      std::max(i, std::int64_t{700}))
                      : 0;
          if (flat) {
            EXPECT_EQ(got[at], 0.0f) << "t=" << t << " ch=" << ch << " i=" << i;
          } else if (in_const <= c.K / 2) {
            EXPECT_LE(std::fabs(got[at] - want[at]), bound)
                << "t=" << t << " ch=" << ch << " i=" << i;
          }
        }
  }
}

/// The issue's accuracy target for split on the study's shape (uniform [-50, 50] data, K = 256,
/// 16 templates): max |CC - CC_fp64| <= 1e-5, beside the derived bound.
TEST(TensorSplit, StudyShapeMeetsIssueTarget) {
  HS_REQUIRE_GPU();
  Case c = mftest::rounded_to_float(mftest::random_case(16, 1, 256, 6000, 31, 50.0));
  const auto want = mftest::reference_cc(c, MfNormalize::Short, 1, false);
  for (TensorTiling tiling : kTilings)
    EXPECT_LE(
        max_error(run_tensor(c, Precision::Split, MfNormalize::Short, 1, false, tiling), want),
        1e-5)
        << tiling_name(tiling);
}

/// Non-finite data (inf or NaN, which dispatch would reject) are a NumericalError, never a silent
/// inf or NaN, per channel and in network mode.
TEST_P(TensorPrecision, NonFiniteOperandIsNumericalError) {
  HS_REQUIRE_GPU();
  for (const double bad : {double{INFINITY}, double{NAN}})
    for (bool network : {false, true}) {
      Case c = mftest::random_case(2, 2, 32, 700, 41, 1.0);
      c.data[700 + 500] = bad;
      for (TensorTiling tiling : kTilings)
        EXPECT_THROW(run_tensor(c, GetParam(), MfNormalize::Short, 1, network, tiling),
                     NumericalError)
            << bad << " network=" << network << " " << tiling_name(tiling);
    }
}

INSTANTIATE_TEST_SUITE_P(Tensor, TensorPrecision,
                         ::testing::Values(Precision::Mixed, Precision::BF16, Precision::Split),
                         [](const auto& p) { return std::string(precision_name(p.param)); });

TEST(TensorMethod, RejectsOtherPrecisions) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(1, 1, 16, 100, 51, 1.0);
  EXPECT_THROW(run_tensor(c, Precision::Single, MfNormalize::Short, 1, false), InvalidInput);
}

// ---- timing of issue 4's cases (only with HALFSCOPE_MF_TENSOR_BENCH=1) -------------------------

/// Median of `repeats` CUDA-event timings of fn() after two warm-up calls.
template <class F>
double median_ms(F&& fn, int repeats) {
  fn();
  fn();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    cuda::EventTimer timer;
    timer.start();
    fn();
    ms.push_back(timer.stop_ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Max error of a device result against the FP64 reference at `samples` random outputs.
double sampled_error(const Case& c, const Dims& d, const float* out_dev, int samples) {
  std::vector<float> out(static_cast<std::size_t>((d.network_sum ? c.T : c.T * c.C) * d.n_corr));
  HS_CUDA_CHECK(cudaMemcpy(out.data(), out_dev, out.size() * 4, cudaMemcpyDeviceToHost));
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> ti(0, c.T - 1), ii(0, d.n_corr - 1);
  double worst = 0;
  for (int j = 0; j < samples; ++j) {
    const std::int64_t t = ti(rng), i = ii(rng);
    double want = 0;
    for (std::int64_t ch = 0; ch < c.C; ++ch) {
      const auto tc = static_cast<std::size_t>(t * c.C + ch);
      const double v = mftest::reference_channel_cc(
          c.templates.data() + tc * static_cast<std::size_t>(c.K), c.data.data() + ch * c.L, c.K,
          c.L, i * d.step + c.moveouts[tc], d.normalize);
      want += d.network_sum ? c.weights[tc] * v : v;
    }
    const std::size_t at = static_cast<std::size_t>(t * d.n_corr + i);
    worst = std::max(worst, std::fabs(out[at] - want));
  }
  return worst;
}

void bench_case(const char* name, const Case& c, bool network, const std::vector<Precision>& ps) {
  Dims d = dims_of(c, MfNormalize::Short, 1, network);
  const DeviceCase dev(c);
  const std::int64_t n_out = (network ? c.T : c.T * c.C) * d.n_corr;
  DeviceVector<float> out(n_out);
  DeviceProblem p{
      d,      dev.templates.get(), dev.data.get(), dev.moveouts.get(), dev.weights.get(), out.get(),
      nullptr};
  const double flop = 2.0 * static_cast<double>(c.T * c.C * c.K) * static_cast<double>(d.n_corr);
  const double bytes = 4.0 * static_cast<double>(n_out + c.C * c.L);
  // HALFSCOPE_MF_TENSOR_BENCH_TILINGS: a comma-separated list of tiling names (default all).
  const char* only = std::getenv("HALFSCOPE_MF_TENSOR_BENCH_TILINGS");
  const auto wanted = [&](TensorTiling t) {
    return only == nullptr ||
           ("," + std::string(only) + ",").find("," + std::string(tiling_name(t)) + ",") !=
               std::string::npos;
  };
  for (Precision prec : ps)
    for (TensorTiling tiling : kTilings)
      for (bool direct : {true, false}) {
        // The wgmma kernel has one epilogue: HALFSCOPE_MF_TENSOR_DIRECT does not apply.
        if (!wanted(tiling) || (tiling == TensorTiling::Wgmma && !direct)) continue;
        const DirectStores env(direct);
        const double ms = median_ms([&] { tensor_cuda_timed(p, prec, nullptr, tiling); }, 10);
        std::vector<double> kernel;
        TensorPhaseTimes phases;
        for (int r = 0; r < 10; ++r) {
          tensor_cuda_timed(p, prec, &phases, tiling);
          kernel.push_back(phases.kernel_ms);
        }
        std::sort(kernel.begin(), kernel.end());
        const double kms = kernel[kernel.size() / 2];
        const double products = prec == Precision::Split ? 3.0 : 1.0;
        const double err = sampled_error(c, d, out.get(), network ? 300 : 200000);
        std::printf(
            "[bench] %s %s %s%s: call %.4f ms (window_stats %.4f, prepare %.4f) | kernel "
            "%.4f ms: %.1f GB/s = %.1f %% of 4227 | %.1f TFLOP/s tensor = %.1f %% of 778 | "
            "max err (sampled) %.3g\n",
            name, std::string(precision_name(prec)).c_str(),
            tiling == TensorTiling::Wgmma && !phases.wgmma ? "wgmma (not qualified: auto)"
                                                           : tiling_name(tiling),
            network  ? ""
            : direct ? " direct"
                     : " staged",
            ms, phases.window_stats_ms, phases.prepare_ms, kms, bytes / kms * 1e-6,
            bytes / kms * 1e-6 / 42.27, products * flop / kms * 1e-9,
            products * flop / kms * 1e-9 / 7.78, err);
      }
}

TEST(TensorBench, IssueCases) {
  HS_REQUIRE_GPU();
  // "1": both cases; "a" or "b": one of them (for a profiler run).
  const char* on = std::getenv("HALFSCOPE_MF_TENSOR_BENCH");
  if (on == nullptr) GTEST_SKIP() << "HALFSCOPE_MF_TENSOR_BENCH unset";
  const std::string which = on;
  if (which == "1" || which == "a") {
    // (a) the study's case: 16 templates x 256 samples, 4.32e6 correlation times, one channel.
    const Case a =
        mftest::rounded_to_float(mftest::random_case(16, 1, 256, 4320000 + 255, 3, 50.0));
    bench_case("(a) T=16 C=1 K=256 N=4.32e6 per-channel", a, false,
               {Precision::Mixed, Precision::BF16, Precision::Split});
  }
  if (which == "1" || which == "b") {
    // (b) reduced to a tenth of a day: 1000 templates x 30 channels, moveouts 0..63 (or
    // 0..HALFSCOPE_MF_TENSOR_BENCH_MOVEOUT: what the moveout spread costs), weights.
    const char* mv = std::getenv("HALFSCOPE_MF_TENSOR_BENCH_MOVEOUT");
    const std::int64_t spread = mv != nullptr ? std::atoll(mv) : 63;
    Case b = mftest::random_case(1000, 30, 256, 432000 + 255 + spread, 4, 50.0);
    mftest::randomize_network(b, 0, spread, 5);
    b = mftest::rounded_to_float(b);
    const std::string name =
        "(b/10) T=1000 C=30 K=256 N=4.32e5 moveouts 0.." + std::to_string(spread) + " network";
    bench_case(name.c_str(), b, true, {Precision::Mixed, Precision::Split});
  }
}

}  // namespace
}  // namespace halfscope::mfilter

#endif  // HALFSCOPE_WITH_CUDA
