// The host side of the CUDA backend's device-side CG step (backend_cuda_cg.cuh): the state, the
// report ring in mapped page-locked memory, one event per slot.
#include "deconv/backend_cuda_cg.cuh"

#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::deconv::cudak {
namespace {

__global__ void cg_reset_kernel(CgState* s, double rr, double beta) {
  s->rr = rr;
  s->beta = beta;
  s->e = 1;
  s->halted = 0;
}

}  // namespace
}  // namespace halfscope::deconv::cudak

namespace halfscope::deconv::detail::cudab {

void CgQueue::FreeHost::operator()(cudak::CgSlot* p) const {
  if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

CgQueue::CgQueue(cudaStream_t stream)
    : stream_(stream), state_(device_buffer(static_cast<std::int64_t>(sizeof(cudak::CgState)))) {
  HS_CUDA_CHECK(cudaMemsetAsync(state(), 0, sizeof(cudak::CgState), stream_));
  cudak::CgSlot* host = nullptr;
  HS_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), kSlots * sizeof(cudak::CgSlot),
                              cudaHostAllocMapped));
  host_.reset(host);
  HS_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host, 0));
}

// Errors ignored: a destructor cannot throw. Steps still queued write their slots: wait for
// them before the memory goes.
CgQueue::~CgQueue() {
  for (int k = 0; k < pending_; ++k) {
    const int slot = (next_ - pending_ + k + kSlots) % kSlots;
    if (cudaEventSynchronize(events_[slot].get()) != cudaSuccess) (void)cudaGetLastError();
  }
}

void CgQueue::reset(double rr, double beta) {
  if (pending_ != 0)
    throw InvalidInput("deconv backend (cuda): cg_reset with " + std::to_string(pending_) +
                       " step reports unread");
  cudak::cg_reset_kernel<<<1, 1, 0, stream_>>>(state(), rr, beta);
  HS_CHECK_LAUNCH();
}

cudak::CgSlot* CgQueue::next_slot() const {
  if (pending_ == kSlots)
    throw InvalidInput("deconv backend (cuda): cg_step with " + std::to_string(kSlots) +
                       " step reports unread (read them with cg_report)");
  return device_ + next_;
}

void CgQueue::queued() {
  events_[next_].record(stream_);
  next_ = (next_ + 1) % kSlots;
  ++pending_;
}

cudak::CgSlot CgQueue::read() {
  if (pending_ == 0) throw InvalidInput("deconv backend (cuda): cg_report with no step queued");
  const int slot = (next_ - pending_ + kSlots) % kSlots;
  HS_CUDA_CHECK(cudaEventSynchronize(events_[slot].get()));
  --pending_;
  return host_[slot];
}

}  // namespace halfscope::deconv::detail::cudab
