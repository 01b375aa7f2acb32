// Internal: the validated, normalized form of a matched-filtering call that mfilter.cpp hands to
// the CPU path, the GPU path (dispatch_cuda.cpp) and detection (detect.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::mfilter {

/// Auto picks the FFT for single precision on the GPU from this template length on: the
/// overlap-save cost grows as log(L) per output against K for the direct methods.
inline constexpr std::int64_t kFftMinTemplateLength = 1024;

/// One call after validation. Templates are host float64 (Double) or float32 (everything else),
/// C-contiguous (T * C * K), demeaned in FP64 in full normalization and scaled to unit energy in
/// FP64 (CC does not depend on a template's scale), and a flat template channel (backends.hpp's
/// rule, judged before rounding) is zeroed so every backend gives it CC = 0. Data are (C * L),
/// float64 or float32, host, or device (float32) when the call runs on the GPU with device data;
/// each channel is demeaned in FP64 over the whole channel in full normalization (so every time
/// chunk sees the same shift) and, when max |S| lies outside [2^-32, 2^32], multiplied by a power
/// of two bringing it into [0.5, 1) (exact), before the rounding to float32; `channel_offsets`
/// holds each channel's removed mean in those scaled units (0 in short normalization) for the flat
/// rule's raw sum. Moveouts are clamped to [-(L + 1), L + 1]: beyond that a window is outside the
/// data for every correlation time either way, and the clamp keeps i * step + moveout + K far from
/// int64 overflow.
struct Prepared {
  Dims dims;
  MfMethod method = MfMethod::Direct;
  Precision precision = Precision::Single;
  bool on_gpu = false;          // runs a GPU method
  bool data_on_device = false;  // the caller's data is device memory (result goes there)
  Array templates, data;
  std::vector<std::int64_t> moveouts;
  std::vector<float> weights;
  std::vector<double> channel_offsets;  // (C), see above
  Shape out_shape;                      // (T, n_corr) or (T, C, n_corr)
  /// A template group of a call spread over devices (devices.cpp): the largest moveout spread
  /// within a tile of 16 templates over the WHOLE call, which the tensor kernel then uses for
  /// its tiles of correlation times instead of its group's own (0: the group's own).
  std::int64_t tile_spread_floor = 0;
  /// A template group of a call spread over devices: the whole call's contributing moveout range
  /// (contributing_moveout_range), which then plans the group's time chunks, so every group cuts
  /// time exactly as the whole call does (unset: the group's own).
  std::optional<std::pair<std::int64_t, std::int64_t>> chunk_moveout_range;
  /// A template group of a call spread over devices or MPI ranks: its rows must equal the whole
  /// call's bit for bit, so the tensor method keeps the 16-template tiles the groups are aligned
  /// to, and runs the wgmma kernel (64-template tiles) only where wgmma_aligned.
  bool template_group = false;
  /// A template group that starts at a multiple of 64 templates of the whole call, as all of that
  /// call's groups do (devices.cpp: group_granule): the wgmma kernel's tiles are the whole call's.
  bool wgmma_aligned = false;
  /// Such a group's floor for the wgmma kernel's longest template row K' (wgmma_row_length over
  /// the whole call): it sizes the shared memory, so every group falls back to the other kernel
  /// exactly when the whole call does (0: the group's own).
  std::int64_t wgmma_kp_floor = 0;
  /// The processes that share this call's GPU (MPI ranks on one device, mpi::device_sharers):
  /// each sizes its time chunks and its data placement from this share of the free device memory
  /// it sees, so that ranks planning at once cannot together ask for more than the device has.
  int device_share = 1;
};

/// Validates and converts (every message names the argument, what was expected and found).
Prepared prepare(const Array& templates, const Array& data, const MfOptions& options,
                 const MfNetwork& network);

/// What prepare_call needs to know of an input (the data, or the templates) before any value of
/// it is read.
struct ArrayInfo {
  Shape shape;  // data: (C, L) or (L); templates: (T, C, K) or (T, K)
  DType dtype = DType::f32;
  bool on_device = false;
  bool empty = false;       // a default-constructed Array
  std::string description;  // Array::describe(), for messages
  static ArrayInfo of(const Array& a);
};

/// prepare without the templates' values, the data and the network's values, from their shapes:
/// every check of the call and its plan (dims, method, precision, the network's shapes and the
/// moveouts' type; an `empty` moveouts or weights: none given), so that callers holding only a
/// group of the templates, its rows of the network and windows of the data (the MPI ranks)
/// prepare the same call; prepare_template_rows and prepare_network_rows then prepare their
/// group. `templates`, `data`, `channel_offsets`, `moveouts` and `weights` stay empty.
Prepared prepare_call(const ArrayInfo& templates, const ArrayInfo& data, const MfOptions& options,
                      const ArrayInfo& moveouts, const ArrayInfo& weights);

/// A template group's rows of the network: (n, C) moveouts and weights, as Prepared holds them.
struct NetworkRows {
  std::vector<std::int64_t> moveouts;
  std::vector<float> weights;
};

/// The network of templates [first, first + n) of a call prepared by prepare_call, given as
/// n * C values each in C order (any shape; empty arrays: moveouts 0, weights 1): what
/// p.moveouts and p.weights hold for them when prepare prepares the whole network (moveouts
/// clamped to +-(samples + 1), weights as float32). InvalidInput naming the first non-finite
/// weight's template (counted from `first`) and channel.
NetworkRows prepare_network_rows(const Prepared& p, const Array& moveouts, const Array& weights,
                                 std::int64_t first, std::int64_t n);

/// Templates [first, first + n) of a call prepared by prepare_call, given as a host (n, C, K)
/// array of any real type: what p.templates holds for them (n * C * K values of storage_type(p))
/// when prepare prepares the whole bank. InvalidInput naming the first non-finite value's
/// template (counted from `first`), channel and sample.
Array prepare_template_rows(const Prepared& p, const Array& rows, std::int64_t first);

/// The storage type of a prepared call's operands: float64 in double precision, else float32.
inline DType storage_type(const Prepared& p) {
  return p.precision == Precision::Double ? DType::f64 : DType::f32;
}

/// Runs a prepared CPU call into a host float32 array of out_shape.
Array run_cpu(const Prepared& p);

#if HALFSCOPE_WITH_CUDA
/// Runs a prepared GPU call; the result lives where the caller's data lives. Device data: the
/// whole device is synchronized first, so the caller's writes on any stream and prepare's upload
/// (pageable cudaMemcpy on the legacy stream) are complete before the backends' non-blocking
/// streams read them (the public API takes no stream).
Array run_cuda(const Prepared& p);
/// run_cuda with host data into `host`, the caller's (rows, n_corr) float32 block of p.out_shape
/// (every element written), so that device groups write straight into their rows of one result.
void run_cuda_into(const Prepared& p, float* host);
/// matched_filter_detect on the GPU: the stack of each time chunk searched on the device.
std::vector<Detection> detect_cuda(const Prepared& p, const DetectOptions& detect);
/// detect_cuda before the declustering: every local maximum of |stack| above its row's
/// threshold (detect_peaks' rule; threshold, correlation index and sample filled, channels_used
/// 0), time chunk after time chunk, each in template and time order. A part of a call whose other
/// parts lie elsewhere (MPI time parts) declusters its candidates together with theirs.
std::vector<Detection> detect_candidates_cuda(const Prepared& p, const DetectOptions& detect);
/// The moveout range that decides the time chunks' sample overlap: over the channels that can
/// contribute (weight-0 channels of a network stack and channels off the data at every
/// correlation time left out); {0, 0} when none can.
std::pair<std::int64_t, std::int64_t> contributing_moveout_range(const Prepared& p);
/// Correlation times per time chunk of a GPU detection with an absolute threshold (a threshold
/// that needs no whole row): the stack is searched chunk by chunk and never held whole (0: the
/// default, kDetectChunkCorrelations), so tests can reach several chunks on small inputs.
void set_detect_chunk_for_testing(std::int64_t max_corr);
/// The correlation times per chunk of such a detection (the forced count, else the default).
std::int64_t detect_chunk_correlations();
/// Forces at most `max_corr` correlation times per GPU time chunk (0: size chunks from free
/// device memory, the default), so tests can exercise the streaming on small inputs.
void set_chunk_correlations_for_testing(std::int64_t max_corr);
/// Whether a test forces the chunk size (then several devices stream host data in chunks instead
/// of placing them on the devices, so the tests reach that path on small inputs).
bool chunks_forced_for_testing();
/// detect_peaks on a device stack: thresholds and candidates on the device, the exact
/// declustering on the host.
std::vector<Detection> detect_device_stack(const float* stack, std::int64_t templates,
                                           std::int64_t n_corr, const DetectOptions& detect,
                                           std::int64_t step, cudaStream_t stream);
#endif

/// Fills channels_used of each detection from a prepared call (mf_count_channels_used's rule:
/// weight != 0, window inside the data, template channel not zero, window not flat by the CPU
/// backends' window_inv_norms). InvalidInput for a detection outside the call's stack.
void count_channels_used(std::vector<Detection>& detections, const Prepared& p);

/// Exact strongest-first declustering of candidate peaks of one template (EQcorrscan's
/// decluster: a peak is dropped when a kept one lies within `separation` correlation times,
/// distance <= separation; ties in |value| go to the earlier time). Returns the kept peaks
/// sorted by time.
std::vector<Detection> decluster(std::vector<Detection> candidates, std::int64_t separation);

/// min_separation (samples) in correlation times: two peaks d correlation times apart are d * step
/// samples apart, within the separation when d * step <= min_separation, i.e. d <=
/// floor(min_separation / step).
std::int64_t separation_in_correlations(std::int64_t min_separation, std::int64_t step);

/// The threshold of one stack row of n values: options.threshold (absolute) or
/// options.threshold * median(|row|) (the mean of the two middle values for even n, as NumPy).
/// `template_index` names the row in check_mad_median's error.
double row_threshold(const float* row, std::int64_t n, const DetectOptions& options,
                     std::int64_t template_index = 0);

/// A MAD threshold of 0 (median |row| == 0: at least half the row exactly 0, e.g. a station
/// zero-filled for half the day, or windows outside the data) would make every local maximum a
/// detection. NumericalError naming the template, the row length and the remedy, when
/// options.threshold > 0 and the median is 0; nothing otherwise.
void check_mad_median(double median, std::int64_t template_index, std::int64_t n,
                      const DetectOptions& options);

/// Checks the detection options (finite threshold >= 0, min_separation >= 0, step >= 1).
void validate_detect_options(const DetectOptions& options, std::int64_t step);

}  // namespace halfscope::mfilter
