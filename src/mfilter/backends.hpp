// Internal: what mfilter.cpp (validation, chunking, dispatch) hands the backends. Dispatch has
// already checked shapes, finiteness, step and the method x precision table, filled default
// moveouts (0) and weights (1), and sliced time chunks; a backend computes exactly one Problem.
//
// Window rule shared by every backend: on channel c, template t, correlation time i, the window
// starts at s = i * step + moveouts[t * C + c]. If s < 0 or s + K > L the channel contributes 0
// and is not used. Otherwise CC_c = num / sqrt(E_T * E_S), with E_S the window energy (demeaned in
// full normalization) computed in FP64, and CC_c = 0 when the window or the template is flat
// (window_is_flat below). CC_c is clamped to [-1, 1] (rounding can exceed 1 by a few ulps).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"
#include "halfscope/mfilter.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope::mfilter {

/// Sizes of one problem (one time chunk). All 64-bit.
struct Dims {
  std::int64_t templates = 0;  // T
  std::int64_t channels = 0;   // C
  std::int64_t length = 0;     // K, samples per template
  std::int64_t samples = 0;    // L, samples per channel in this chunk
  std::int64_t step = 1;
  std::int64_t n_corr = 0;  // correlation times in this chunk
  MfNormalize normalize = MfNormalize::Short;
  bool network_sum = true;
  /// GPU only: (C) device array of what dispatch subtracted from each channel (as
  /// HostProblem::channel_offsets), read by window_stats_cuda's full-normalization flat rule;
  /// null: 0 for every channel. CPU backends ignore it (they use HostProblem's).
  const double* channel_offsets = nullptr;
};

/// A window is flat when its energy is no larger than kFlatRelative times the sum of the
/// squares of its samples before demeaning, or is zero (short normalization: energy == 0
/// exactly, up to the rounding of FP64 running sums, which window_stats bounds the same way).
/// The same rule applies to each template channel.
inline constexpr double kFlatRelative = 1e-12;

/// One problem in host memory (CPU backends). templates (T*C*K), data (C*L), float64 or float32
/// as `Precision` needs (Double: f64, everything else: f32), C-contiguous; moveouts int64 (T*C),
/// weights f32 (T*C); out f32, (T, n_corr) or (T, C, n_corr).
struct HostProblem {
  Dims dims;
  const Array* templates = nullptr;
  const Array* data = nullptr;
  const std::int64_t* moveouts = nullptr;
  const float* weights = nullptr;
  float* out = nullptr;
  /// (C) what dispatch subtracted from each channel (its mean in full normalization, in the
  /// channel's scaled units; dispatch.hpp's Prepared), added back in the flat rule's raw sum of
  /// squares; null: 0 for every channel.
  const double* channel_offsets = nullptr;
};

/// CPU: Double is the FP64 reference (compensated running sums of squares, recomputed every
/// kRecomputeEvery windows so the error does not drift); Single is FP32 with OpenMP; Half, Mixed,
/// BF16 and Split emulate the GPU methods' arithmetic exactly (operand rounding, local
/// normalization, hi + lo split) with FP32 accumulation (Half: FP16 accumulation).
void direct_cpu(const HostProblem& problem, Precision precision);

#if HALFSCOPE_WITH_CUDA
/// One problem in device memory: templates (T*C*K) and data (C*L) float32, moveouts int64 and
/// weights float32 (T*C), out float32 (T*n_corr or T*C*n_corr), all C-contiguous, on `stream`.
struct DeviceProblem {
  Dims dims;
  const float* templates = nullptr;
  const float* data = nullptr;
  const std::int64_t* moveouts = nullptr;
  const float* weights = nullptr;
  float* out = nullptr;
  cudaStream_t stream = nullptr;
  std::int64_t tile_spread_floor = 0;  // Prepared::tile_spread_floor
  bool template_group = false;         // Prepared::template_group
  bool wgmma_aligned = false;          // Prepared::wgmma_aligned
  std::int64_t wgmma_kp_floor = 0;     // Prepared::wgmma_kp_floor
};

/// Inverse window norms for every window start s in [0, L - K] of every channel:
/// inv_norm[c * (L - K + 1) + s] = 1 / sqrt(E_S) in float32, or 0 when the window is flat.
/// Full normalization also writes the window means to `mean` (same layout; may be null in short
/// normalization). FP64 running sums restarted every block so rounding does not drift.
void window_stats_cuda(const Dims& dims, const float* data, float* inv_norm, float* mean,
                       cudaStream_t stream);

/// Naive FP32: one thread per (template, correlation time), network sum fused in registers.
void naive_cuda(const DeviceProblem& problem);

/// Study 001 Table I, variant 1..4 (see MfMethod). `gemm_ms`, when not null, receives the time
/// of the cublasGemmEx call alone (the study's timing excludes building the matrices).
void cublas_cuda(const DeviceProblem& problem, int variant, float* gemm_ms = nullptr);

/// cuFFT overlap-save in FP32.
void fft_cuda(const DeviceProblem& problem);

/// Tensor cores: Mixed (study 001's kernel), BF16 and Split; network mode never writes
/// per-channel CC to device memory.
void tensor_cuda(const DeviceProblem& problem, Precision precision);

/// Candidate peaks of a device stack (T, n_corr) above per-template thresholds (device array of
/// T doubles), local maxima of |x| within min_separation correlation times; returned to the host
/// for the final (exact, strongest-first) declustering.
///
/// CandidateSearch splits that in two so a pipeline can queue the search behind a chunk's
/// kernels and read it once the chunk's stream has finished (dispatch_cuda.cpp): launch() queues
/// the search and the copy of its count on `stream`; collect(), called after the stream has
/// finished and before anything else is queued on it, reruns the search once with room for all
/// when more candidates were found than fit, and returns them sorted by (template, time), with
/// template_index, correlation_index and value set. The stack and thresholds must stay valid
/// until collect() returns.
class CandidateSearch {
 public:
  explicit CandidateSearch(cudaStream_t stream);
  ~CandidateSearch();
  CandidateSearch(const CandidateSearch&) = delete;
  CandidateSearch& operator=(const CandidateSearch&) = delete;
  void launch(const float* stack, std::int64_t templates, std::int64_t n_corr,
              const double* thresholds, std::int64_t min_separation);
  [[nodiscard]] std::vector<Detection> collect();

 private:
  struct State;
  std::unique_ptr<State> s_;
};
std::vector<Detection> stack_candidates_cuda(const float* stack, std::int64_t templates,
                                             std::int64_t n_corr, const double* thresholds,
                                             std::int64_t min_separation, cudaStream_t stream);
/// Median of |x| of each row of a device (T, n_corr) stack, exactly (selection, not sorting the
/// whole row on the host). Writes T doubles to host memory `medians`.
void stack_abs_medians_cuda(const float* stack, std::int64_t templates, std::int64_t n_corr,
                            double* medians, cudaStream_t stream);
/// The same, queued on `stream` without waiting for it: T doubles into the device array
/// `medians` and, when `thresholds` (device, T doubles) is given, factor * median into it, as
/// the host would round that product.
void stack_abs_medians_enqueue(const float* stack, std::int64_t templates, std::int64_t n_corr,
                               double* medians, double factor, double* thresholds,
                               cudaStream_t stream);
/// The windows data[starts[w] .. starts[w] + length) of device data, gathered on the device and
/// returned back to back (windows x length): what counting the channels of detections reads, so
/// the whole data never has to come to the host.
std::vector<float> gather_windows_cuda(const float* data, const std::vector<std::int64_t>& starts,
                                       std::int64_t length);
#endif

}  // namespace halfscope::mfilter
