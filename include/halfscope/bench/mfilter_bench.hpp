// `halfscope bench mfilter`: study 001's Table I on today's GPU (case a) and a network-scale
// matched filter with detection (case b), next to the machine's ceilings. Inputs live on the GPU
// before timing; CUDA events around each call; warm-up, median of repeats; fresh random data.
//
// Case (a), the study's: 16 templates x K = 256 samples against L = 4.32e6 samples of one channel
// (2 T K n_corr = 35.4 GFLOP), every GPU method (naive, cuBLAS variants 1-4 timed both as the
// GemmEx call alone and as the whole call, tensor mixed / bf16 / split timed both as the backend
// and as the public matched_filter() on device arrays, fft), error
// max |CC - CC_fp64| on real data (a recorded seismogram tiled to L, templates cut around its
// loudest segments) and on uniform [-50, 50] data. Case (b): 1000 templates x 30 channels x 256
// x 4.32e6 with moveouts, weights and MAD detection (quick: 64 x 8 x 256 x 2^22).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "halfscope/bench/report.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::bench {

/// Sizes of one benchmark problem (64-bit throughout: 30 x 4.32e6 samples exceed 2^31 bytes).
struct MfBenchSize {
  std::int64_t templates = 0;  // T
  std::int64_t channels = 1;   // C
  std::int64_t length = 0;     // K, samples per template
  std::int64_t samples = 0;    // L, samples per channel
  std::int64_t step = 1;
  /// (L - K) / step + 1. Throws InvalidInput when K < 1, K > L or step < 1.
  [[nodiscard]] std::int64_t correlation_count() const;
  /// Multiply-adds counted as two flops, direct-equivalent: 2 T C K n_corr (what the study and
  /// every method are compared by, whatever a method actually executes).
  [[nodiscard]] double flops() const;
  /// The traffic floor of an FP32 implementation, in bytes: read the data (C L) and the templates
  /// (T C K) once and write the output once, T n_corr (network stack) or T C n_corr (per channel).
  /// Achieved GB/s are these bytes over the time, so every method is measured on one scale.
  [[nodiscard]] double min_bytes(bool network_sum) const;
};

/// Study 001's case: 16 x 1 x 256 x 4.32e6, step 1.
MfBenchSize study_case_size();
/// The network case: 1000 x 30 x 256 x 4.32e6; quick: 64 x 8 x 256 x 2^22.
MfBenchSize network_case_size(bool quick);

/// One row of Table I: a method, the precision it runs and the timing reported.
struct MfBenchMethod {
  MfMethod method = MfMethod::Naive;
  std::string name;  // "naive", "cublas1".."cublas4", "tensor", "fft"
  Precision precision = Precision::Single;
  /// cuBLAS variants only: true for the row that reports cublasGemmEx alone (the study's
  /// timing, which excludes building the observation matrix); false for the whole call.
  bool gemm_only = false;
  /// true: the row times the public matched_filter() on device arrays (argument checks, the
  /// inputs' finiteness scan, the output allocation included; params timing "public"), not the
  /// internal backend (timing "call"). The PyTorch peers are timed as whole public pipelines.
  bool public_call = false;
};

/// The rows of case (a): naive single; cublas1..4 in the study's types (single, mixed, mixed,
/// half), each twice (whole call, GemmEx alone); tensor mixed, bf16, split; fft single.
std::vector<MfBenchMethod> study_methods();
/// The "public call" rows of case (a), measured after study_methods(): tensor mixed, bf16 and
/// split through matched_filter() on device arrays (public_call = true).
std::vector<MfBenchMethod> study_public_methods();

/// How many leading correlation times the FP64 CPU reference covers in case (a): `requested`
/// when > 0, else all of them (quick: 2^20), never more than `n_corr`. The whole case is 35 GFLOP
/// in FP64, seconds on a 16-core host (direct_cpu ran at 1.6 GFLOP/s per thread here); 2^20
/// still covers every window of the 936,001-sample real trace once plus the first seam of its
/// tiling, and uniform data is stationary, so its leading windows are as representative as any.
std::int64_t study_reference_times(std::int64_t n_corr, std::int64_t requested, bool quick);
/// Leading correlation times of the FP64 reference in case (b): 2^30 multiply-adds' worth,
/// at least 256 and at most `n_corr`.
std::int64_t network_reference_times(const MfBenchSize& size);

// ---- inputs (host, float32) ------------------------------------------------------------------

/// Reads the staged real trace (.npy, 1-D or (1, n), any real dtype, finite). InvalidInput
/// naming `path` when it is missing, of another shape, shorter than `min_length` or not finite.
Array load_real_trace(const std::filesystem::path& path, std::int64_t min_length);
/// The trace repeated end to end to `samples` samples (float32, shape (samples)).
Array tile_trace(const Array& trace, std::int64_t samples);
/// Starts of `count` non-overlapping windows of `length` samples around the largest |x|:
/// the samples are visited by decreasing |x| (ties by position), and each one not inside an
/// already chosen window starts a window centred on it (clamped to the data), unless that window
/// would overlap a chosen one. Sorted ascending.
/// InvalidInput when fewer than `count` such windows fit.
std::vector<std::int64_t> loudest_window_starts(const Array& trace, std::int64_t count,
                                                std::int64_t length);
/// Windows [start, start + length) of a 1-D trace as a (starts.size(), length) float32 array.
Array cut_windows(const Array& trace, const std::vector<std::int64_t>& starts, std::int64_t length);
/// Uniform random float32 values in [lo, hi), reproducible from `seed` (rows of the first axis
/// drawn from independent streams, in parallel).
Array uniform_array(const Shape& shape, float lo, float hi, std::uint64_t seed);

/// Inputs of case (b): uniform [-1, 1) noise on every channel; moveouts uniform in
/// [0, max_moveout]; weights uniform in [0.5, 1); template t copied from the data at a planted
/// origin o_t: templates[t, c, :] = data[c, o_t + moveout[t, c] : + K], so cc_sum(t, o_t) is
/// sum_c weight[t, c] (every channel correlates to 1) and detection must find o_t.
struct MfNetworkInputs {
  Array templates;                    // (T, C, K) float32
  Array data;                         // (C, L) float32
  Array moveouts;                     // (T, C) int64
  Array weights;                      // (T, C) float32
  std::vector<std::int64_t> origins;  // o_t, correlation times (step 1)
};
MfNetworkInputs make_network_inputs(const MfBenchSize& size, std::int64_t max_moveout,
                                    std::uint64_t seed);
/// Fraction of templates with a detection within `tolerance` correlation times of its origin.
double planted_found_fraction(const std::vector<Detection>& detections,
                              const std::vector<std::int64_t>& origins, std::int64_t tolerance);

// ---- the JSON cases --------------------------------------------------------------------------

/// Seed of case (a)'s uniform [-50, 50] data (its templates; the data take seed + 1).
inline constexpr std::uint64_t kMfUniformSeed = 20261121;
/// Seed of case (b)'s inputs, its largest moveout (1 s at 100 Hz) in samples.
inline constexpr std::uint64_t kMfNetworkSeed = 4320000;
inline constexpr std::int64_t kMfMaxMoveout = 100;

/// A case (a) row before measurement: implementation "halfscope", the method's name and
/// precision, and params case "a", templates, channels, length, samples, step, n_corr,
/// normalize, timing ("gemm" or "call"), timed_data, real_data (`real_note`), reference,
/// reference_times (`n_ref`), bytes_model, memory. bench/peers and tools/perf_tables.py read
/// these keys.
BenchCase study_case_template(const MfBenchMethod& method, const MfBenchSize& size,
                              std::int64_t n_ref, const std::string& real_note);
/// A case (b) row before measurement: method "tensor" (the backend, whole stack),
/// "tensor+detect" (matched_filter_detect on device inputs) or "tensor+detect-host" (on host
/// inputs, streamed in chunks), params case "b", the sizes, network_sum, data,
/// moveouts, weights, reference_times, bytes_model, memory.
BenchCase network_case_template(const MfBenchSize& size, const std::string& method,
                                Precision precision, std::int64_t n_ref);

// ---- the run ---------------------------------------------------------------------------------

struct MfBenchOptions {
  bool study = true;    // case (a)
  bool network = true;  // case (b)
  bool quick = false;   // case (b) reduced, case (a) reference on 2^20 times, fewer repeats
  int repeats = 20;     // timed calls per case (case b: at most 5)
  double max_ms_per_case = 3000;  // stop repeating a case after this much measured time
  /// The real trace (.npy) tiled to L for case (a); empty: no real-data error is recorded.
  std::filesystem::path real_data;
  /// Case (a) FP64 reference coverage; 0: study_reference_times' default.
  std::int64_t reference_times = 0;
  /// Where to write case (a)'s inputs and FP64 references for bench/peers/mfilter_peers.py:
  /// {templates,data,reference}_{real,uniform}.npy.
  std::filesystem::path export_dir;
  std::function<void(const std::string&)> progress;
};

/// Runs the selected cases on CUDA device 0 and returns one report ("mfilter"). A method that
/// throws (Unsupported, NumericalError, CudaError) is recorded with params["failed"] and the
/// run goes on. Throws Unsupported in a build without CUDA.
BenchReport run_mfilter_bench(const MfBenchOptions& options);

}  // namespace halfscope::bench
