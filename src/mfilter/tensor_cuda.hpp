// Internal: the tensor-core backend with per-phase timing, for the benchmark and the GPU tests
// (tensor_cuda of backends.hpp is this with no timing).
#pragma once

#include <optional>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/precision.hpp"
#include "mfilter/backends.hpp"
#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::mfilter {

#if HALFSCOPE_WITH_CUDA
/// Milliseconds of each phase of one tensor_cuda call, from CUDA events on its stream:
/// window statistics (window_stats_cuda), template preparation (operands in fragment order) and
/// the correlation kernel itself (the part the floors in docs/mfilter-tensor.md are about).
struct TensorPhaseTimes {
  float window_stats_ms = 0;
  float prepare_ms = 0;
  float kernel_ms = 0;
  bool wgmma = false;  // the call ran the wgmma network kernel (network_sm90a.cu)
};

/// The phase boundaries of one call on its stream (events only when `times` is not null): mark(0)
/// before the window statistics, mark(1) before the template preparation, mark(2) before the
/// correlation kernel, mark(3) after it; read() fills `times` once the stream has passed mark(3).
class PhaseMarks {
 public:
  PhaseMarks(TensorPhaseTimes* times, cudaStream_t stream) : times_(times), stream_(stream) {}
  void mark(int k);
  void read() const;

 private:
  TensorPhaseTimes* times_;
  cudaStream_t stream_;
  std::optional<cuda::Event> at_[4];
};

/// After the stream's work: throws NumericalError naming `kernel` when the device count of
/// non-finite template channels, data tiles or operands `bad` is not 0.
void throw_if_not_finite(const int* bad, cudaStream_t stream, const std::string& kernel);

/// How the kernel cuts a block's 16 x 512 tile among its warps (kernels/tensor_tuning.hpp):
/// Wide = 4 warps x 128 lags, Deep = 8 warps x 64 lags; the *Pairs variants stage the
/// observation as 64-bit operand pairs (Tiling::kPairs). Wgmma = the network kernel of
/// network_sm90a.cu where the call qualifies (network_wgmma_cuda), else Auto's tiling. Auto = the
/// measured default: Wgmma for the network stack (unless HALFSCOPE_MF_TENSOR_WGMMA=0), else
/// default_tiling.
enum class TensorTiling { Auto, Wide, Deep, WidePairs, DeepPairs, Wgmma };

/// The network stack on Hopper's wgmma (kernels/network_wgmma.cuh), 64 templates x 2 x 128 times
/// a block with the stack in registers: runs the call and returns true when it qualifies
/// (wgmma_network_call, a device of compute capability 9.0, not a template group of a call spread
/// over devices or MPI ranks unless the groups are aligned to its 64 templates
/// (Prepared::wgmma_aligned), K + the largest moveout spread of a 64-template group short enough
/// for shared memory, at most 65535 groups); otherwise returns false having written nothing.
bool network_wgmma_cuda(const DeviceProblem& problem, Precision precision, TensorPhaseTimes* times);

/// tensor_cuda with a chosen tiling, and when `times` is not null the phase timings of this call.
void tensor_cuda_timed(const DeviceProblem& problem, Precision precision, TensorPhaseTimes* times,
                       TensorTiling tiling = TensorTiling::Auto);
#endif

}  // namespace halfscope::mfilter
