// Internal: the FP16/BF16 overflow check of the GPU direct and tensor convolutions (naive,
// register, tensor), without a device allocation, a memset or a copy per call.
//
// Each call takes a slot of a small per-thread ring of page-locked, device-mapped counters: the
// host zeroes the slot, the kernels add the number of outputs that became inf/NaN from finite
// inputs to it (kernels/direct_common.cuh: commit_overflow, at most one atomic per block and none
// when nothing overflowed), and the host reads it once the stream has passed the call.
//
// When the host reads it depends on the caller (dispatch decides, conv.cpp):
//  - immediate (the default): the call synchronises its stream and throws NumericalError before
//    it returns;
//  - deferred (ConvOptions::defer_overflow_check with a device output): the call records an event
//    and returns without waiting; the check runs when a later convolution on this thread polls
//    the ring (every convolve2d / convolve2d_into call does after its launch, without waiting) or
//    needs the slot (it then waits for that call), or when conv_check_overflow() is called. The
//    NumericalError then names the method of the earlier call. This is what lets back-to-back
//    calls on device arrays run at the kernel's speed (docs/conv.md, "Per-call overhead"). Slots
//    still pending when the thread exits are discarded unchecked (~Ring cannot throw): a caller
//    that defers must call conv_check_overflow().
#pragma once

#include <cstdint>
#include <string_view>

#include "halfscope/config.hpp"
#include "halfscope/core/precision.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope::conv {

/// Sets, for this thread and the object's lifetime, whether narrow-storage GPU calls may defer
/// their overflow check (see the file comment); restores the previous setting on destruction.
class OverflowDeferralScope {
 public:
  explicit OverflowDeferralScope(bool defer) noexcept;
  ~OverflowDeferralScope();
  OverflowDeferralScope(const OverflowDeferralScope&) = delete;
  OverflowDeferralScope& operator=(const OverflowDeferralScope&) = delete;

 private:
  bool previous_;
};

/// Checks the deferred calls of this thread that have completed, oldest first, without waiting;
/// throws NumericalError for the first that overflowed. No-op in CPU-only builds.
void poll_deferred_overflow();

/// Waits for every deferred call of this thread and checks them (conv_check_overflow()).
void wait_deferred_overflow();

#if HALFSCOPE_WITH_CUDA
/// One call's overflow counter (see the file comment). Construct before the launches, pass
/// counter() to the kernels, call finish() after the last launch.
class OverflowCheck {
 public:
  OverflowCheck(cudaStream_t stream, std::string_view method, Precision p, std::int64_t outputs);
  /// Error path (finish() not reached): waits for the stream, so the slot can be reused safely.
  ~OverflowCheck();
  OverflowCheck(const OverflowCheck&) = delete;
  OverflowCheck& operator=(const OverflowCheck&) = delete;

  /// The device address of this call's counter (zeroed).
  [[nodiscard]] unsigned int* counter() const noexcept { return device_; }
  /// Immediate: synchronises the stream and throws NumericalError if any output overflowed.
  /// Deferred: records the stream's position and returns.
  void finish();

 private:
  cudaStream_t stream_;
  int slot_ = -1;
  unsigned int* device_ = nullptr;
  bool finished_ = false;
};
#endif

}  // namespace halfscope::conv
