// The overflow check of the narrow-storage GPU convolutions (overflow_check.hpp).
#include "conv/overflow_check.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>

#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::conv {

namespace {
thread_local bool t_defer = false;
}  // namespace

OverflowDeferralScope::OverflowDeferralScope(bool defer) noexcept : previous_(t_defer) {
  t_defer = defer;
}
OverflowDeferralScope::~OverflowDeferralScope() {
  t_defer = previous_;
}

#if HALFSCOPE_WITH_CUDA

namespace {

/// Slots per thread: deferred calls that may be in flight at once before a new call waits for
/// the oldest (a solver keeps a few convolutions queued; more only delays the report).
constexpr int kSlots = 16;

struct Slot {
  int device = -1;
  cudaEvent_t event = nullptr;
  std::string method;
  Precision precision = Precision::Half;
  std::int64_t outputs = 0;
};

/// This thread's counters (page-locked, mapped into every device's address space) and the FIFO
/// of slots whose calls were deferred.
struct Ring {
  unsigned int* host = nullptr;
  unsigned int* device = nullptr;
  Slot slots[kSlots];
  std::deque<int> pending;
  int next = 0;

  Ring() {
    HS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), kSlots * sizeof(unsigned int),
                                cudaHostAllocPortable | cudaHostAllocMapped));
    HS_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0));
  }
  // Errors ignored: at exit the runtime may already be gone. Pending slots are discarded without
  // reading their counters: a destructor cannot throw, which is why deferral is opt-in and its
  // users must call conv_check_overflow() (ConvOptions::defer_overflow_check).
  ~Ring() {
    // Deferred calls still running may write their counters: let them finish before freeing.
    for (const int k : pending)
      if (cudaEventSynchronize(slots[k].event) != cudaSuccess) (void)cudaGetLastError();
    for (Slot& s : slots)
      if (s.event && cudaEventDestroy(s.event) != cudaSuccess) (void)cudaGetLastError();
    if (host && cudaFreeHost(host) != cudaSuccess) (void)cudaGetLastError();
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
};

// Created on this thread's first narrow GPU call only: CPU-only use (no driver) never touches it.
thread_local std::unique_ptr<Ring> t_ring;

Ring& ring() {
  if (!t_ring) t_ring = std::make_unique<Ring>();
  return *t_ring;
}

[[noreturn]] void throw_overflow(const Slot& s, unsigned int n, bool deferred) {
  const bool bf16 = s.precision == Precision::BF16;
  throw NumericalError(s.method + ": " + std::to_string(n) + " of " + std::to_string(s.outputs) +
                       " output pixels overflowed " +
                       (bf16 ? "BF16" : "FP16 (largest finite 65504)") +
                       " although every input they read is finite; scale the image or the "
                       "kernel down" +
                       (s.precision == Precision::Half ? ", or use precision mixed" : "") +
                       (deferred ? " (an earlier call with a device output, checked after it "
                                   "returned)"
                                 : ""));
}

/// Takes the oldest pending slot off the FIFO (its call has completed) and checks it.
void retire_oldest(Ring& r) {
  const int k = r.pending.front();
  r.pending.pop_front();
  if (const unsigned int n = r.host[k]; n != 0) throw_overflow(r.slots[k], n, true);
}

}  // namespace

void poll_deferred_overflow() {
  if (!t_ring) return;
  Ring& r = *t_ring;
  while (!r.pending.empty()) {
    const cudaError_t q = cudaEventQuery(r.slots[r.pending.front()].event);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it from the last-error slot
      return;
    }
    HS_CUDA_CHECK(q);
    retire_oldest(r);
  }
}

void wait_deferred_overflow() {
  if (!t_ring) return;
  Ring& r = *t_ring;
  while (!r.pending.empty()) {
    HS_CUDA_CHECK(cudaEventSynchronize(r.slots[r.pending.front()].event));
    retire_oldest(r);
  }
}

OverflowCheck::OverflowCheck(cudaStream_t stream, std::string_view method, Precision p,
                             std::int64_t outputs)
    : stream_(stream) {
  Ring& r = ring();
  const int k = r.next;
  // Ring full (slot k still deferred): wait for the calls up to and including it, oldest first.
  while (std::find(r.pending.begin(), r.pending.end(), k) != r.pending.end()) {
    HS_CUDA_CHECK(cudaEventSynchronize(r.slots[r.pending.front()].event));
    retire_oldest(r);
  }
  r.next = (k + 1) % kSlots;
  Slot& s = r.slots[k];
  s.method = method;
  s.precision = p;
  s.outputs = outputs;
  r.host[k] = 0;  // visible to the kernels: a launch orders the host's earlier writes before it
  slot_ = k;
  device_ = r.device + k;
}

OverflowCheck::~OverflowCheck() {
  if (finished_) return;
  if (cudaStreamSynchronize(stream_) != cudaSuccess) (void)cudaGetLastError();
}

void OverflowCheck::finish() {
  finished_ = true;
  Ring& r = ring();
  Slot& s = r.slots[slot_];
  if (!t_defer) {
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (const unsigned int n = r.host[slot_]; n != 0) throw_overflow(s, n, false);
    return;
  }
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  if (s.event && s.device != device) {
    HS_CUDA_CHECK(cudaEventDestroy(s.event));
    s.event = nullptr;
  }
  if (!s.event) {
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming));
    s.device = device;
  }
  HS_CUDA_CHECK(cudaEventRecord(s.event, stream_));
  r.pending.push_back(slot_);
}

#else

void poll_deferred_overflow() {}
void wait_deferred_overflow() {}

#endif

}  // namespace halfscope::conv
