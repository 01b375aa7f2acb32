// Matched filtering (study 001): normalized cross-correlation of many templates against continuous
// multi-channel data, per channel or stacked over a network with per-channel moveouts and weights
// (Fast Matched Filter's semantics), on the CPU and the GPU in every precision; detection on the
// stack with EQcorrscan's semantics.
//
//   cc = matched_filter(templates, data, {.precision = Precision::Split});
//
// Shapes: templates (T, C, K) or (T, K) for one channel; data (C, L) or (L). Correlation time i
// (0 <= i < n_corr, n_corr = (L - K) / step + 1) uses, on channel c for template t, the window
// of K samples starting at s = i * step + moveout[t, c]:
//
//   CC_c(t, i) = sum_k T[t,c,k] S[c, s+k] / sqrt(sum_k T[t,c,k]^2 * sum_k S[c, s+k]^2)   (short)
//
// `full` normalization demeans the template and the window first (Fast Matched Filter's
// normalize="full", EQcorrscan's normxcorr). CC_c is 0, never NaN, where the window or the
// template has no energy (flat or zero-filled data; the rule is in docs/mfilter.md) and where the
// window runs outside the data (s < 0 or s + K > L); such channels do not count as used. The
// network stack is cc_sum(t, i) = sum_c weight[t, c] * CC_c(t, i); defaults: moveouts 0, weights 1
// (so |cc_sum| <= C, EQcorrscan's cccsum). Window energies are computed in FP64 in every
// precision: they are O(L) work and decide whether a window is flat. Every index is 64-bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope {

/// How each window and template is normalized: Short divides by the raw norms (study 001, FMF's
/// "short"); Full demeans both first (FMF's "full", EQcorrscan's normxcorr).
enum class MfNormalize { Short, Full };

/// How the correlation is computed. CPU: Direct (FP64 reference with compensated running sums;
/// FP32 with OpenMP; the other precisions emulated exactly). GPU: Naive (one thread per output,
/// FP32), Cublas1..Cublas4 (study 001 Table I: explicit observation matrix and cublasGemmEx;
/// 1 = FP32, 2 = FP16 in / FP32 out and compute, 3 = FP16 in and out / FP32 compute,
/// 4 = all FP16 on tensor cores; FP16 variants normalize the matrices globally by their maximum),
/// Tensor (the study's kernel: FP16 operands with local normalization per 16 samples, FP32
/// accumulation, sliding observation in shared memory, mma.sync fragments built from registers;
/// in mixed, bf16 and split), FFT (cuFFT overlap-save, FP32, for long templates).
enum class MfMethod { Auto, Direct, Naive, Cublas1, Cublas2, Cublas3, Cublas4, Tensor, FFT };

/// The CLI / Python names of the enums above.
std::string_view mf_normalize_name(MfNormalize n) noexcept;  // "short", "full"
std::string_view mf_method_name(MfMethod m) noexcept;        // "auto", "direct", "naive",
                                                       // "cublas1".."cublas4", "tensor", "fft"
/// Parsers take the names above (lower case) and throw InvalidInput listing the valid names.
MfNormalize parse_mf_normalize(std::string_view text);
MfMethod parse_mf_method(std::string_view text);

/// Per-channel alignment and weighting of the network stack. Empty arrays mean moveouts 0 and
/// weights 1. moveouts: integers (any integer dtype) in samples, shape (T, C); weights: reals,
/// shape (T, C); a weight of 0 skips the channel. Host arrays.
struct MfNetwork {
  Array moveouts;
  Array weights;
};

/// Options of one matched-filtering call.
struct MfOptions {
  MfNormalize normalize = MfNormalize::Short;
  MfMethod method = MfMethod::Auto;
  /// Unset: the method's natural precision (mf_default_precision).
  std::optional<Precision> precision;
  DeviceKind device = DeviceKind::Auto;
  /// Samples between consecutive correlation times (>= 1).
  std::int64_t step = 1;
  /// true: the network stack (T, n_corr); false: per-channel CC (T, C, n_corr), unweighted,
  /// each channel aligned by its moveout.
  bool network_sum = true;
  /// CUDA devices of this host to spread the templates over (GPU methods; empty: the current
  /// device). The call is validated and converted once; each listed device gets a contiguous
  /// group of templates (multiples of 16, the tensor kernel's tile; balanced) and runs it on its
  /// own host thread. Host data that fit are placed on every device (a slice uploaded by each,
  /// the rest copied peer to peer), and the merged result then equals the same call on one listed
  /// device bit for bit (detections too; FFT: within its rounding, cuFFT's batches differ); larger
  /// host data are streamed by every device in its own time chunks, equal to a one-device call
  /// within the method's rounding (MAD thresholds are per chunk there). Device data run only on
  /// their own device. A device may be listed twice (two threads share it). An error on one device
  /// ends the call with that error, its message prefixed "CUDA device i: " (halfscope errors;
  /// others keep theirs), after the other devices have finished.
  std::vector<int> devices;
};

/// n_corr = (L - K) / step + 1; throws InvalidInput when K > L, K < 1 or step < 1.
std::int64_t mf_correlation_count(std::int64_t data_length, std::int64_t template_length,
                                  std::int64_t step);

/// Computes the correlation. Inputs of any real dtype on the host or a device (data must be
/// finite: NaN or inf is an InvalidInput naming the channel and the sample). Full normalization
/// at half, mixed or bf16 is a NumericalError naming the channel and window where a window's
/// level sits so far from its channel's mean that the 16-bit operands' rounding could move its
/// CC by more than 0.1 (docs/mfilter.md: level steps; run split or single there). The result is
/// float32 in the memory of `data`; host data on the GPU is streamed through in time chunks
/// (K - 1 plus the moveout spread of overlap) so data larger than device memory works, and
/// per-channel CC never reaches device memory in network mode on the tensor method.
Array matched_filter(const Array& templates, const Array& data, const MfOptions& options = {},
                     const MfNetwork& network = {});

/// The method a call runs: `options.method`, or what Auto picks (docs/mfilter.md): on the CPU
/// Direct; on the GPU by precision: mixed, bf16, split -> Tensor; half -> Cublas4; single -> FFT
/// for templates of at least 1024 samples, else Naive; double -> Direct (on the CPU: a call with
/// device data copies them to the host and the result back). Unset precision: split on the GPU.
MfMethod mf_resolve_method(const MfOptions& options, std::int64_t template_length);

/// The precision a method runs when none is asked for: split for tensor, single for naive, fft
/// and direct, the study's types for cublas1..4 (single, mixed, mixed, half). Auto: split (what
/// Auto runs on the GPU; with no GPU an Auto call without a precision runs direct in single).
Precision mf_default_precision(MfMethod method);

/// The precisions a method supports on a device kind, for messages and the benchmark's sweep.
/// Direct always runs on the CPU, so its list does not depend on `device`; the GPU methods
/// support nothing on the CPU.
std::vector<Precision> mf_supported_precisions(MfMethod method, DeviceKind device);

// ---- detection -------------------------------------------------------------------------------

/// Detection threshold: an absolute value of the stack, or a multiple of median |stack| per row.
enum class ThresholdType { Absolute, Mad };
/// "abs", "mad"; the parser also takes EQcorrscan's "absolute" and "MAD".
std::string_view threshold_type_name(ThresholdType t) noexcept;
ThresholdType parse_threshold_type(std::string_view text);

/// How peaks of the stack become detections (EQcorrscan's semantics).
struct DetectOptions {
  /// Absolute: the threshold itself. Mad: threshold * median(|cc_sum|) of each template's row
  /// (EQcorrscan's MAD threshold).
  double threshold = 8.0;
  ThresholdType type = ThresholdType::Mad;
  /// Minimum separation between kept peaks of one template, in samples of the data (converted
  /// to correlation times with `step`). Strongest first; weaker peaks within the separation of a
  /// kept one are dropped (EQcorrscan's decluster).
  std::int64_t min_separation = 1;
};

/// One detection: a declustered peak of one template's stack row.
struct Detection {
  std::int64_t template_index = 0;
  std::int64_t correlation_index = 0;  // i
  std::int64_t sample = 0;             // i * step: start of the window before moveouts
  double value = 0;                    // cc_sum (signed; peaks are found on |cc_sum|)
  double threshold = 0;                // the threshold this template's row used
  std::int64_t channels_used = 0;  // channels with weight != 0, window inside the data, not flat
};

/// Peaks of a (T, n_corr) float32 stack (host or device) above the threshold, declustered,
/// sorted by template then time. channels_used is left 0 (see mf_count_channels_used).
std::vector<Detection> detect_peaks(const Array& stack, const DetectOptions& options,
                                    std::int64_t step = 1);

/// Fills channels_used of each detection from the data, the templates and the network.
void mf_count_channels_used(std::vector<Detection>& detections, const Array& templates,
                            const Array& data, const MfOptions& options,
                            const MfNetwork& network = {});

/// Correlation and detection in one call, without keeping the whole stack: on the GPU the stack
/// of each time chunk is searched on the device and only candidate peaks come back (local maxima
/// above the threshold), declustered exactly on the host across chunks. The MAD threshold is
/// taken over each processed chunk when host data are streamed in several chunks, over the
/// whole row otherwise (the default whenever the data fit in device memory). Always runs on the
/// network stack (`options.network_sum` is ignored); channels_used is filled.
std::vector<Detection> matched_filter_detect(const Array& templates, const Array& data,
                                             const MfOptions& options, const MfNetwork& network,
                                             const DetectOptions& detect);

}  // namespace halfscope
