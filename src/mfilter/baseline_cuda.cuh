// Internal (CUDA builds only): pieces shared by the GPU matched-filter baselines (naive, cuBLAS,
// FFT): the FP64 window statistics of a problem's data, the FP64 statistics and operand copy of
// its templates, the global scales of the FP16 variants, and the normalization / network-sum
// launch. Each holds stream-ordered scratch, freed when the call ends.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/baseline_tuning.hpp"
#include "mfilter/kernels/normalize.cuh"

namespace halfscope::mfilter::baseline {

/// Window count L - K + 1 (window starts of one channel).
inline std::int64_t window_count(const Dims& d) {
  return d.samples - d.length + 1;
}

/// inv_norm (and the means in full normalization) of every window start of every channel.
class WindowStats {
 public:
  explicit WindowStats(const DeviceProblem& p);
  [[nodiscard]] const float* inv_norm() const { return inv_.as<float>(); }
  [[nodiscard]] const float* mean() const { return full_ ? mean_.as<float>() : nullptr; }

 private:
  bool full_;
  cuda::StreamScratch inv_, mean_;
};

/// Template rows (t, c): 1 / sqrt(energy of the (demeaned) row) or 0 when flat, and the operand
/// copy float(row - mean) in FP32, or in FP16 divided by the global max |row - mean| (`half`).
class TemplateOperands {
 public:
  TemplateOperands(const DeviceProblem& p, bool half);
  [[nodiscard]] const float* inv_norm() const { return inv_.as<float>(); }
  /// FP64 sum of each operand row, unscaled (used by full normalization's mean correction).
  [[nodiscard]] const double* sum() const { return sum_.as<double>(); }
  [[nodiscard]] const void* operand() const { return op_.get(); }
  /// Device float: the global max |row - mean| (the FP16 operand's scale is its inverse).
  [[nodiscard]] const float* absmax() const { return absmax_.as<float>(); }

 private:
  cuda::StreamScratch inv_, mean_, sum_, absmax_, op_;
};

/// Device float: max |x| over all the data of a problem (the FP16 variants' global scale).
class DataAbsMax {
 public:
  explicit DataAbsMax(const DeviceProblem& p);
  [[nodiscard]] const float* get() const { return max_.as<float>(); }

 private:
  cuda::StreamScratch max_;
};

/// A device flag raised when a dot product or a CC is inf or NaN; check() throws
/// NumericalError naming the method (it synchronises the stream).
class NonfiniteFlag {
 public:
  explicit NonfiniteFlag(cudaStream_t stream);
  [[nodiscard]] int* get() const { return flag_.as<int>(); }
  void check(cudaStream_t stream, const char* method) const;

 private:
  cuda::StreamScratch flag_;
};

/// Zeroes the output (windows outside the data contribute 0; the network sum accumulates).
void clear_output(const DeviceProblem& p);

/// The normalization arguments common to every chunk of a problem.
kernels::NormalizeArgs normalize_args(const DeviceProblem& p, const WindowStats& ws,
                                      const TemplateOperands& tmpl, const NonfiniteFlag& flag);

/// Normalizes the dot products of channel a.channel, window starts [a.s0, a.s0 + a.rows).
template <class Dot>
void launch_normalize(const kernels::NormalizeArgs& a, Dot dot, cudaStream_t stream) {
  const std::int64_t per_template = std::min(a.rows, a.n_corr);
  const int bx = static_cast<int>(
      std::min<std::int64_t>((per_template + tuning::kThreads - 1) / tuning::kThreads, 4096));
  const dim3 grid(std::max(bx, 1),
                  static_cast<unsigned>(std::min<std::int64_t>(a.templates, 65535)));
  kernels::normalize_kernel<<<grid, tuning::kThreads, 0, stream>>>(a, dot);
  HS_CHECK_LAUNCH();
}

}  // namespace halfscope::mfilter::baseline
