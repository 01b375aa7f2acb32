// The GPU matched-filter baselines called through the backend contract (backends.hpp): naive,
// cuBLAS variants 1-4 (study 001 Table I) and FFT overlap-save, against the FP64 reference of
// mfilter_testing.hpp: short / full normalization x network / per-channel x moveouts and weights
// x step 1 / 3; window statistics against FP64; flat windows and templates give exactly 0; the
// cuBLAS matrix chunked into many pieces; FFT with K not a power of two and blocks not dividing
// the data, in one batch and in many; FP16 overflow reported as NumericalError.
//
// Tolerances (per channel, in CC units; the network stack multiplies by sum_c |w|):
// - naive, cublas1: cc_error_bound(Single, K) = 2 u32 + gamma_K(u32) + 4 u32 (~2.4e-6 at K = 40).
// - cublas2 (FP16 operands, globally normalized, FP32 sums): cc_error_bound(Mixed, K, q) with q
//   the global-maxima ratio of the operands actually rounded (demeaned templates in full mode).
// - cublas3: the same plus the FP16 rounding of the dot product, |dot| <= sqrt(E_T E_S) in the
//   scaled units so u_h, plus its subnormal rounding 2^-25 q.
// - cublas4: cc_error_bound(Half, K, q) (FP16 accumulation) plus the same output terms.
// - fft: Higham's bound for radix-2 FFTs, ||fl(FFT x) - FFT x|| <= log2(N) eta ||FFT x||, eta ~
//   5 u32, taken three times (data forward, template forward, inverse) plus the products (2 u32):
//   |dy_j| <= ||dy||_2 <= (15 log2 N + 2) u32 ||seg||_2 ||F(T)||_inf, ||F(T)||_inf <= sqrt(K)
//   ||T||, divided by the smallest sqrt(E_T E_S); ||seg||_2 <= sqrt(N) max|S|.
// Full normalization multiplies each by full_normalization_factor (raw windows in the products).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_testing.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter_testing.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "mfilter/cublas_cuda.hpp"
#include "mfilter/fft_cuda.hpp"
#include "mfilter/window_stats.hpp"
#endif

namespace halfscope::mfilter {
namespace {

#if HALFSCOPE_WITH_CUDA

using mftest::Case;

enum class Method { Naive, Cublas1, Cublas2, Cublas3, Cublas4, FFT };
const char* name_of(Method m) {
  const char* names[] = {"naive", "cublas1", "cublas2", "cublas3", "cublas4", "fft"};
  return names[static_cast<int>(m)];
}

using mftest::DeviceVector;

using mftest::to_float;

Dims dims_of(const Case& c, MfNormalize normalize, std::int64_t step, bool network) {
  Dims d;
  d.templates = c.T, d.channels = c.C, d.length = c.K, d.samples = c.L, d.step = step;
  d.n_corr = mftest::n_corr_of(c.L, c.K, step);
  d.normalize = normalize;
  d.network_sum = network;
  return d;
}

/// Runs one baseline on a case (inputs rounded to float32); returns the output on the host.
std::vector<float> run(Method m, const Case& c, MfNormalize normalize, std::int64_t step,
                       bool network) {
  const Dims d = dims_of(c, normalize, step, network);
  DeviceVector<float> templates(to_float(c.templates)), data(to_float(c.data));
  DeviceVector<float> weights(to_float(c.weights));
  DeviceVector<std::int64_t> moveouts(c.moveouts);
  const std::int64_t n_out = (network ? c.T : c.T * c.C) * d.n_corr;
  DeviceVector<float> out(n_out);
  DeviceProblem p{d,         templates.get(), data.get(), moveouts.get(), weights.get(),
                  out.get(), nullptr};
  switch (m) {
    case Method::Naive:
      naive_cuda(p);
      break;
    case Method::FFT:
      fft_cuda(p);
      break;
    default:
      cublas_cuda(p, static_cast<int>(m) - static_cast<int>(Method::Cublas1) + 1);
  }
  std::vector<float> host(static_cast<std::size_t>(n_out));
  HS_CUDA_CHECK(
      cudaMemcpy(host.data(), out.get(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

/// The case with every template row demeaned (what the FP16 variants scale and round in full
/// normalization), for the underflow ratio q.
Case demeaned_templates(Case c) {
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    double mean = 0;
    for (std::int64_t k = 0; k < c.K; ++k)
      mean += c.templates[static_cast<std::size_t>(j * c.K + k)];
    mean /= static_cast<double>(c.K);
    for (std::int64_t k = 0; k < c.K; ++k)
      c.templates[static_cast<std::size_t>(j * c.K + k)] -= mean;
  }
  return c;
}

/// The FFT bound of the header comment for one channel.
double fft_bound(const Case& c) {
  const double n = static_cast<double>(fft_transform_length(c.K));
  double max_s = 0, max_t = 0, min_e = INFINITY;
  for (double v : c.data) max_s = std::max(max_s, std::fabs(v));
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    double e = 0;
    for (std::int64_t k = 0; k < c.K; ++k)
      e += c.templates[static_cast<std::size_t>(j * c.K + k)] *
           c.templates[static_cast<std::size_t>(j * c.K + k)];
    max_t = std::max(max_t, std::sqrt(e));
  }
  const double q = mftest::underflow_ratio(c);  // max|T| max|S| / min sqrt(E_T E_S)
  double max_abs_t = 0;
  for (double v : c.templates) max_abs_t = std::max(max_abs_t, std::fabs(v));
  min_e = max_abs_t * max_s / q;  // min sqrt(E_T E_S)
  const double u32 = 0x1p-24;
  return (15 * std::log2(n) + 2) * u32 * std::sqrt(n) * max_s * std::sqrt(double(c.K)) * max_t /
             min_e +
         4 * u32;
}

/// Per-channel bound of a method on a case (the header comment).
double channel_bound(Method m, const Case& c, MfNormalize normalize) {
  const double uh = 0x1p-11;
  const double q =
      mftest::underflow_ratio(normalize == MfNormalize::Full ? demeaned_templates(c) : c);
  double b = 0;
  switch (m) {
    case Method::Naive:
    case Method::Cublas1:
      b = mftest::cc_error_bound(Precision::Single, c.K);
      break;
    case Method::Cublas2:
      b = mftest::cc_error_bound(Precision::Mixed, c.K, q);
      break;
    case Method::Cublas3:
      b = mftest::cc_error_bound(Precision::Mixed, c.K, q) + uh + 0x1p-25 * q;
      break;
    case Method::Cublas4:
      b = mftest::cc_error_bound(Precision::Half, c.K, q) + uh + 0x1p-25 * q;
      break;
    case Method::FFT:
      b = fft_bound(c);
      break;
  }
  return b * mftest::full_normalization_factor(c, normalize);
}

/// Compares one run against the reference; returns the max error for the log.
void expect_matches(Method m, const Case& c, MfNormalize normalize, std::int64_t step,
                    bool network) {
  const Case cf = mftest::rounded_to_float(c);
  const std::vector<double> want = mftest::reference_cc(cf, normalize, step, network);
  const std::vector<float> got = run(m, c, normalize, step, network);
  const double bound = channel_bound(m, cf, normalize);
  const double tol = network ? mftest::stack_error_bound(cf, bound) : bound;
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << name_of(m) << " at " << i;
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(worst, tol) << name_of(m) << (normalize == MfNormalize::Full ? " full" : " short")
                        << (network ? " network" : " per-channel") << " step " << step;
}

/// Every normalization x output x step, with moveouts (some pushing windows out of the data)
/// and weights on the network, on one case shape.
void sweep(Method m, std::int64_t T, std::int64_t C, std::int64_t K, std::int64_t L) {
  for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full})
    for (bool network : {true, false})
      for (std::int64_t step : {1, 3}) {
        Case c = mftest::random_case(T, C, K, L, 1000 + K + step, 2.0);
        for (auto& v : c.data) v += 0.3;  // a DC offset so full normalization differs from short
        mftest::randomize_network(c, -7, 9, 77 + step);
        expect_matches(m, c, normalize, step, network);
      }
}

TEST(GpuBaselines, NaiveFp32_AllModes_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::Naive, 5, 3, 40, 700);
  sweep(Method::Naive, 3, 2, 300, 900);  // K beyond one 256-sample pass
}

TEST(GpuBaselines, NaiveFp32_StepBeyondTheSharedTile_ReadsGlobalMemory) {
  HS_REQUIRE_GPU();
  Case c = mftest::random_case(3, 2, 24, 20000, 5);
  mftest::randomize_network(c, 0, 30, 6);
  for (bool network : {true, false})
    expect_matches(Method::Naive, c, MfNormalize::Short, 97, network);
}

TEST(GpuBaselines, Cublas1Fp32_AllModes_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::Cublas1, 5, 3, 40, 700);
}

TEST(GpuBaselines, Cublas2Fp16InFp32Out_AllModes_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::Cublas2, 5, 3, 40, 700);
}

TEST(GpuBaselines, Cublas3Fp16InOutFp32Compute_AllModes_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::Cublas3, 5, 3, 40, 700);
}

TEST(GpuBaselines, Cublas4AllFp16_AllModes_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::Cublas4, 5, 3, 40, 700);
}

TEST(GpuBaselines, CublasAllVariants_MatrixChunkedSmall_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  // 7 rows of 40 FP32 samples plus 5 outputs per chunk: ~100 chunks per channel.
  const std::int64_t old = set_cublas_matrix_budget_bytes(7 * (40 * 4 + 5 * 4));
  for (Method m : {Method::Cublas1, Method::Cublas2, Method::Cublas3, Method::Cublas4}) {
    Case c = mftest::random_case(5, 2, 40, 700, 42);
    mftest::randomize_network(c, -5, 5, 43);
    expect_matches(m, c, MfNormalize::Full, 1, true);
    expect_matches(m, c, MfNormalize::Short, 3, false);
  }
  set_cublas_matrix_budget_bytes(old);
}

TEST(GpuBaselines, CublasFp16Variants_HighDynamicRange_StayWithinTheUnderflowBound) {
  HS_REQUIRE_GPU();
  // A burst 1e5 times the noise sets the global scale, so the quiet data reaches the FP16
  // operands as ~1e-5 (subnormals, spacing 2^-24): the study's dynamic-range weakness of global
  // normalization. The bound's underflow term 3 K 2^-25 q grows with q = max|T| max|S| /
  // min sqrt(E_T E_S) (~1e4 here) and must still hold.
  Case c = mftest::random_case(3, 1, 40, 700, 21);
  for (std::int64_t s = 300; s < 340; ++s) c.data[static_cast<std::size_t>(s)] *= 1e5;
  for (Method m : {Method::Cublas2, Method::Cublas3, Method::Cublas4})
    expect_matches(m, c, MfNormalize::Short, 1, false);
}

TEST(GpuBaselines, FftFp32_KNotPowerOfTwoBlocksNotDividingL_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  sweep(Method::FFT, 3, 2, 300, 5000);  // N = 4096, V = 3797: a second, partial block
  sweep(Method::FFT, 4, 2, 37, 900);
}

TEST(GpuBaselines, FftFp32_OneBlockPerBatch_MatchesFp64Reference) {
  HS_REQUIRE_GPU();
  const std::int64_t old = set_fft_batch_budget_bytes(1);
  Case c = mftest::random_case(3, 2, 2500, 20000, 9);  // N = 8192, V = 5693: 4 batches
  mftest::randomize_network(c, -50, 50, 10);
  expect_matches(Method::FFT, c, MfNormalize::Full, 3, true);
  expect_matches(Method::FFT, c, MfNormalize::Short, 1, false);
  set_fft_batch_budget_bytes(old);
}

/// Data with a zero gap after a large burst, a constant stretch, and one zero template channel.
Case flat_case() {
  Case c = mftest::random_case(2, 2, 32, 600, 11);
  for (std::int64_t s = 100; s < 140; ++s) c.data[static_cast<std::size_t>(s)] = 1e4;  // burst
  for (std::int64_t s = 140; s < 260; ++s) c.data[static_cast<std::size_t>(s)] = 0.0;  // gap
  for (std::int64_t s = 350; s < 450; ++s) c.data[static_cast<std::size_t>(600 + s)] = 3.5;
  for (std::int64_t k = 0; k < 32; ++k) c.templates[static_cast<std::size_t>(64 + k)] = 0.0;
  return c;
}

TEST(GpuBaselines, AllMethods_FlatWindowsAndTemplates_GiveExactlyZero) {
  HS_REQUIRE_GPU();
  const Case c = flat_case();
  for (Method m : {Method::Naive, Method::Cublas1, Method::Cublas2, Method::Cublas3,
                   Method::Cublas4, Method::FFT})
    for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
      const std::vector<float> got = run(m, c, normalize, 1, false);
      const std::int64_t n = mftest::n_corr_of(c.L, c.K, 1);
      for (std::int64_t i = 140; i + c.K <= 260; ++i)  // channel 0, all-zero windows
        for (std::int64_t t = 0; t < c.T; ++t)
          EXPECT_EQ(got[static_cast<std::size_t>((t * c.C) * n + i)], 0.0f) << name_of(m) << i;
      if (normalize == MfNormalize::Full) {  // channel 1, constant windows
        for (std::int64_t i = 350; i + c.K <= 450; ++i)
          EXPECT_EQ(got[static_cast<std::size_t>((0 * c.C + 1) * n + i)], 0.0f) << name_of(m);
      }
      for (std::int64_t i = 0; i < n; ++i)  // template 1, channel 0 is zero
        EXPECT_EQ(got[static_cast<std::size_t>((1 * c.C + 0) * n + i)], 0.0f) << name_of(m);
    }
}

/// window_stats_cuda against long-double sums: inverse norms within FP32 rounding plus the
/// running sums' drift, means within FP32 rounding, flat windows exactly 0.
void check_window_stats(const Case& c) {
  const Case cf = mftest::rounded_to_float(c);
  for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full}) {
    const Dims d = dims_of(cf, normalize, 1, true);
    const std::int64_t w = c.L - c.K + 1;
    DeviceVector<float> data(to_float(cf.data)), inv(c.C * w), mean(c.C * w);
    window_stats_cuda(d, data.get(), inv.get(), mean.get(), nullptr);
    std::vector<float> hi(static_cast<std::size_t>(c.C * w)), hm(hi.size());
    HS_CUDA_CHECK(cudaMemcpy(hi.data(), inv.get(), hi.size() * 4, cudaMemcpyDeviceToHost));
    HS_CUDA_CHECK(cudaMemcpy(hm.data(), mean.get(), hm.size() * 4, cudaMemcpyDeviceToHost));
    for (std::int64_t ch = 0; ch < c.C; ++ch)
      for (std::int64_t s = 0; s < w; ++s) {
        long double sum = 0, sq = 0;
        for (std::int64_t k = 0; k < c.K; ++k) {
          const long double v = cf.data[static_cast<std::size_t>(ch * c.L + s + k)];
          sum += v;
          sq += v * v;
        }
        const long double mu = normalize == MfNormalize::Full ? sum / c.K : 0;
        const long double e = sq - c.K * mu * mu;
        const std::size_t o = static_cast<std::size_t>(ch * w + s);
        const bool flat = e <= 1e-12L * sq;
        if (flat) {
          EXPECT_EQ(hi[o], 0.0f) << ch << " " << s;
          continue;
        }
        // FP32 rounding of 1/sqrt (u32) and of the stored mean, plus the FP64 running sums'
        // drift over a 64-window run relative to the energy: 64 * 4 u64 * (largest sq) / e.
        const double want = static_cast<double>(1 / std::sqrt(e));
        const double drift = 64 * 4 * 0x1p-53 * (1e8 * c.K + static_cast<double>(sq)) / double(e);
        EXPECT_NEAR(hi[o], want, (2 * 0x1p-24 + drift) * want) << ch << " " << s;
        if (normalize == MfNormalize::Full) {
          EXPECT_NEAR(hm[o], double(mu), 0x1p-23 * std::fabs(double(mu)) + 1e-12);
        }
      }
  }
}

TEST(GpuBaselines, WindowStats_BurstsGapsAndOffsets_MatchFp64) {
  HS_REQUIRE_GPU();
  Case c = flat_case();
  for (std::int64_t s = 0; s < c.L; ++s) c.data[static_cast<std::size_t>(600 + s)] += 1000.0;
  check_window_stats(c);
}

/// Several 2048-window tiles of the shared-memory kernel with K % 16 != 0 (K = 40), its longest
/// template (K = 2048) and the first length past it (K = 2049, the global-memory kernel); a
/// burst and a gap that end inside runs and tiles.
TEST(GpuBaselines, WindowStats_TilesAndLongTemplates_MatchFp64) {
  HS_REQUIRE_GPU();
  for (std::int64_t k : {40, 2048, 2049}) {
    SCOPED_TRACE(k);
    Case c = mftest::random_case(1, 2, k, 9000, 90 + static_cast<std::uint64_t>(k), 50.0);
    for (std::int64_t s = 2000; s < 2100; ++s) c.data[static_cast<std::size_t>(s)] = 1e4;
    for (std::int64_t s = 2100; s < 4500; ++s) c.data[static_cast<std::size_t>(s)] = 0.0;
    for (std::int64_t s = 0; s < c.L; ++s) c.data[static_cast<std::size_t>(c.L + s)] += 300.0;
    check_window_stats(c);
  }
}

/// window_stats_cuda against the CPU's FP64 window statistics (window_stats.cpp, the reference)
/// on the same float32 samples and channel offsets (null: zeros): flat decisions identical and
/// inverse norms within FP32 rounding. Tolerance: the reference is exact to ~1e-15 (compensated
/// sums); the GPU's FP64 energy errs by < 2^-25 relative (window_stats.cuh trusts a running value
/// only that far from its rounding bound, else recomputes it), i.e. < 2^-26 after the square
/// root, plus the float32 rounding of 1/sqrt (u32 = 2^-24): 2^-24 + 2^-26 < 2 u32.
void expect_window_stats_as_cpu(const std::vector<float>& x, std::int64_t channels, std::int64_t K,
                                MfNormalize normalize, const std::vector<double>& offsets) {
  const std::int64_t L = static_cast<std::int64_t>(x.size()) / channels, w = L - K + 1;
  Dims d;
  d.channels = channels, d.length = K, d.samples = L, d.normalize = normalize;
  DeviceVector<float> data(x), inv(channels * w), mean(channels * w);
  const std::vector<double> zeros(static_cast<std::size_t>(channels), 0.0);
  DeviceVector<double> dev_offsets(offsets.empty() ? zeros : offsets);
  if (!offsets.empty()) d.channel_offsets = dev_offsets.get();
  window_stats_cuda(d, data.get(), inv.get(), mean.get(), nullptr);
  std::vector<float> got(static_cast<std::size_t>(channels * w));
  HS_CUDA_CHECK(cudaMemcpy(got.data(), inv.get(), got.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<double> want(static_cast<std::size_t>(w));
  std::int64_t flat = 0;
  for (std::int64_t c = 0; c < channels; ++c) {
    window_inv_norms(x.data() + c * L, L, K, normalize, want.data(),
                     offsets.empty() ? 0.0 : offsets[static_cast<std::size_t>(c)]);
    for (std::int64_t s = 0; s < w; ++s) {
      const float g = got[static_cast<std::size_t>(c * w + s)];
      const double r = want[static_cast<std::size_t>(s)];
      flat += r == 0;
      ASSERT_EQ(g == 0.0f, r == 0.0)
          << "channel " << c << " window " << s << ": " << g << " vs " << r;
      ASSERT_NEAR(g, r, 2 * 0x1p-24 * r) << "channel " << c << " window " << s;
    }
  }
  // The cases below have flat windows; a run that finds none would test nothing of the rule.
  EXPECT_GT(flat, 0);
}

/// Reviewer finding 7: quiet windows (amplitude 1) right after a 1e9 burst inside the same
/// running-sum run are not flat (the CPU computes them), although their energy is far below the
/// rounding of the running sums. Bursts end at every phase of a 16-window run; both kernels
/// (K = 32: shared-memory tiles; K = 2049: global memory); gaps of zeros give flat windows.
TEST(GpuBaselines, WindowStats_QuietAfterBillionBurst_MatchCpu) {
  HS_REQUIRE_GPU();
  for (std::int64_t K : {32, 2049}) {
    SCOPED_TRACE(K);
    const Case c = mftest::random_case(1, 1, K, 40 * K + 4000, 7 + static_cast<std::uint64_t>(K));
    std::vector<float> x = to_float(c.data);
    for (std::int64_t b = 0; b < 17; ++b) {
      const std::int64_t start = b * (2 * K + 17) + 100;  // the burst ends at phase (b * 18) % 16
      for (std::int64_t j = 0; j < 5; ++j) x[static_cast<std::size_t>(start + j)] *= 1e9f;
    }
    const std::int64_t gap = 17 * (2 * K + 17) + 100 + K;  // zeros right after a last burst
    for (std::int64_t j = 0; j < 3; ++j) x[static_cast<std::size_t>(gap - 3 + j)] = 1e9f;
    for (std::int64_t j = gap; j < gap + K + 40; ++j) x[static_cast<std::size_t>(j)] = 0.0f;
    for (MfNormalize normalize : {MfNormalize::Short, MfNormalize::Full})
      expect_window_stats_as_cpu(x, 1, K, normalize, {});
  }
}

/// Reviewer finding 4: full normalization of a channel at a DC level of 1e5 that dispatch has
/// demeaned (offset = its mean): a constant stretch and a stretch with 1e-3 noise are flat (energy
/// <= 1e-12 sum (x + offset)^2), the unit noise elsewhere is not; a second channel keeps a DC of
/// 3e4 in its samples (offset 0), which the per-block shift must keep from cancelling.
TEST(GpuBaselines, WindowStats_FullDcOffsetAndConstantStretch_FlatAsCpu) {
  HS_REQUIRE_GPU();
  for (std::int64_t K : {48, 2049}) {
    SCOPED_TRACE(K);
    const std::int64_t L = 12 * K + 3000;
    const Case c = mftest::random_case(1, 2, K, L, 31 + static_cast<std::uint64_t>(K));
    std::vector<double> raw(c.data);
    for (std::int64_t s = 3 * K; s < 5 * K + 20; ++s) raw[static_cast<std::size_t>(s)] = 0.25;
    for (std::int64_t s = 7 * K; s < 9 * K + 20; ++s) raw[static_cast<std::size_t>(s)] *= 1e-3;
    for (std::int64_t s = 0; s < L; ++s) raw[static_cast<std::size_t>(s)] += 1e5;
    for (std::int64_t s = 2 * K; s < 4 * K; ++s) raw[static_cast<std::size_t>(L + s)] = 7.0;
    for (std::int64_t s = 0; s < L; ++s) raw[static_cast<std::size_t>(L + s)] += 3e4;
    double mu = 0;  // channel 0 demeaned in FP64 as prepare.cpp does, then rounded
    for (std::int64_t s = 0; s < L; ++s) mu += raw[static_cast<std::size_t>(s)] / double(L);
    std::vector<float> x(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i)
      x[i] = static_cast<float>(i < static_cast<std::size_t>(L) ? raw[i] - mu : raw[i]);
    expect_window_stats_as_cpu(x, 2, K, MfNormalize::Full, {mu, 0.0});
  }
}

TEST(GpuBaselines, Cublas3_DotAboveFp16Max_ThrowsNumericalError) {
  HS_REQUIRE_GPU();
  // Ones against ones: the scaled dot product is K = 70000 > 65504, the FP16 maximum, and an FP32
  // accumulator rounds it to inf in the FP16 output. (Variant 4's FP16 accumulator may stagnate
  // below the maximum instead of overflowing, so it is not part of this test.)
  Case c = mftest::random_case(1, 1, 70000, 70010, 3);
  for (auto& v : c.templates) v = 1.0;
  for (auto& v : c.data) v = 1.0;
  EXPECT_THROW(run(Method::Cublas3, c, MfNormalize::Short, 1, true), NumericalError);
  // FP32 output keeps it: every CC is 1.
  for (float v : run(Method::Cublas2, c, MfNormalize::Short, 1, true)) EXPECT_NEAR(v, 1.0f, 1e-3);
}

TEST(GpuBaselines, Cublas_GemmTime_IsReported) {
  HS_REQUIRE_GPU();
  const Case c = mftest::random_case(4, 1, 64, 5000, 4);
  const Dims d = dims_of(c, MfNormalize::Short, 1, true);
  DeviceVector<float> t(to_float(c.templates)), x(to_float(c.data)), w(to_float(c.weights));
  DeviceVector<std::int64_t> mv(c.moveouts);
  DeviceVector<float> out(c.T * d.n_corr);
  DeviceProblem p{d, t.get(), x.get(), mv.get(), w.get(), out.get(), nullptr};
  float ms = -1;
  cublas_cuda(p, 1, &ms);
  EXPECT_GT(ms, 0.0f);
  EXPECT_THROW(cublas_cuda(p, 5, &ms), InvalidInput);
}

TEST(GpuBaselines, Cublas_LeadingDimensionBeyondInt_IsRefused) {
  HS_REQUIRE_GPU();
  // C x K = 2^31 (the templates' leading dimension in the GEMM) no longer fits cuBLAS's int;
  // refused before any device memory is touched, so the problem needs no buffers.
  Dims d;
  d.templates = 1;
  d.channels = std::int64_t{1} << 21;
  d.length = std::int64_t{1} << 10;
  d.samples = 2048;
  d.n_corr = d.samples - d.length + 1;
  DeviceProblem p{d, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  try {
    cublas_cuda(p, 1);
    ADD_FAILURE() << "no InvalidInput for C x K = 2^31";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("C x K = 2147483648"), std::string::npos) << e.what();
  }
}

/// Study 001's case (16 templates x 256 samples x 4.32e6 correlation times, one channel, uniform
/// [-50, 50] data) timed for every baseline, with max |CC - CC_fp64| over the first 20000
/// correlation times. Opt-in: HALFSCOPE_MF_BASELINE_BENCH=1 (seconds of GPU time).
TEST(GpuBaselines, StudyCase_TimingsAndErrors_Printed) {
  HS_REQUIRE_GPU();
  const char* on = std::getenv("HALFSCOPE_MF_BASELINE_BENCH");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set HALFSCOPE_MF_BASELINE_BENCH=1";
  const std::int64_t T = 16, K = 256, n = 4320000, L = n + K - 1, n_check = 20000;
  const std::vector<float> tf = test::random_floats(T * K, -1.0f, 1.0f, 1);
  const std::vector<float> xf = test::random_floats(L, -50.0f, 50.0f, 2);
  Case sub;
  sub.T = T, sub.C = 1, sub.K = K, sub.L = n_check + K - 1;
  sub.templates.assign(tf.begin(), tf.end());
  sub.data.assign(xf.begin(), xf.begin() + sub.L);
  sub.moveouts.assign(T, 0);
  sub.weights.assign(T, 1.0);
  const std::vector<double> want = mftest::reference_cc(sub, MfNormalize::Short, 1, true);
  Dims d;
  d.templates = T, d.channels = 1, d.length = K, d.samples = L, d.step = 1, d.n_corr = n;
  DeviceVector<float> t(tf), x(xf), w(std::vector<float>(T, 1.0f)), out(T * n);
  DeviceVector<std::int64_t> mv(std::vector<std::int64_t>(T, 0));
  DeviceProblem p{d, t.get(), x.get(), mv.get(), w.get(), out.get(), nullptr};
  std::vector<float> host(static_cast<std::size_t>(T * n));
  for (Method m : {Method::Naive, Method::Cublas1, Method::Cublas2, Method::Cublas3,
                   Method::Cublas4, Method::FFT}) {
    std::vector<float> total, gemm;
    for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up (plans, handles, pools)
      cuda::EventTimer timer(nullptr);
      float g = 0;
      timer.start();
      if (m == Method::Naive)
        naive_cuda(p);
      else if (m == Method::FFT)
        fft_cuda(p);
      else
        cublas_cuda(p, static_cast<int>(m) - static_cast<int>(Method::Cublas1) + 1, &g);
      const float ms = timer.stop_ms();
      if (rep > 0) total.push_back(ms), gemm.push_back(g);
    }
    std::sort(total.begin(), total.end());
    std::sort(gemm.begin(), gemm.end());
    HS_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), host.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0;
    for (std::int64_t tt = 0; tt < T; ++tt)
      for (std::int64_t i = 0; i < n_check; ++i)
        err = std::max(err, std::fabs(host[static_cast<std::size_t>(tt * n + i)] -
                                      want[static_cast<std::size_t>(tt * n_check + i)]));
    std::printf("[study case] %-8s total %8.3f ms  gemm %8.3f ms  max|CC-CC_fp64| %.3e\n",
                name_of(m), total[1], gemm[1], err);
    EXPECT_LE(err, channel_bound(m, sub, MfNormalize::Short)) << name_of(m);
  }
}

#endif

}  // namespace
}  // namespace halfscope::mfilter
