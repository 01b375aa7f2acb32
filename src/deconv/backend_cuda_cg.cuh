// Internal (CUDA builds only): the device-side conjugate-gradient step of the CUDA backend
// (Backend::cg_step in backend.hpp). The scalars (rr, beta, e, p.Qp, alpha) live in a CgState on
// the device, every kernel of a step reads them there, and the step's last kernel writes its
// report into page-locked, mapped host memory: queuing a step needs no host round trip, and the
// host reads a report after an event, while the next step runs. The values are those of the
// default host-scalar step (cg_step.cpp) run through the same backend: the same element
// arithmetic (axpby_kernel's, DotTerm's) and the same reduction kernel and order.
//
// One step, on the backend's stream:
//   direction   p = r + beta p, and max|p| -> e (FP16 storage; e = 1 otherwise)
//   operator    q = Q fl16(p / e) (mixed, circular: scaled in the pad pass; zero boundary: a
//               scaled copy in tmp first; single / double: q = Q p)
//   curvature   pq = e (p . q); halted = !(pq > 0) || rr == 0; alpha = rr / pq
//   update      x += alpha p; r -= (alpha e) q; rn = r . r; beta = rn / rr; rr = rn; report
// A halted state makes every later kernel of every step a no-op until reset.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "deconv/backend.hpp"
#include "deconv/backend_cuda.hpp"
#include "deconv/backend_cuda_reduce.cuh"
#include "deconv/normal_scale.hpp"
#include "halfscope/core/cuda.hpp"

namespace halfscope::deconv::cudak {

/// The scalars between a step's kernels (device memory).
struct CgState {
  double rr, beta, e, pq, alpha;
  unsigned halted;
  DeviceBox counter;  // the reductions' last-block counter (its result slots are unused)
};

/// A step's report as the update kernel writes it (mapped host memory).
struct CgSlot {
  double rr, e, pq, alpha, rn;
  unsigned halted;
  DeviceStatus status;  // the backend's FP16 overflow status after the step
};

// The terms reduce over chunks (backend_cuda_reduce.cuh) in the order of DotTerm, so p . q and
// r . r equal what Backend::dot returns for the same vectors.

/// p = r + beta p, as axpby(1, r, beta, p); max|p| -> e when `scaled` (FP16 storage).
template <class T, class A>
struct CgDirection {
  const T* r;
  T* p;
  std::int64_t n;
  CgState* s;
  DeviceStatus* status;
  int t;  // normal_scale_bias(||Q||)
  bool scaled;
  __device__ void operator()(std::int64_t c, Acc<double>& acc) const {
    if (s->halted) return;
    const A beta = from_double<A>(s->beta);
    const Chunk<T> rc = load_chunk(r, c, n);
    Chunk<T> pc = load_chunk(p, c, n);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      pc.v[i] = axpby_value(A(1.0f), rc.v[i], beta, pc.v[i], status, detail::cudab::kOpAxpby);
      if (scaled) acc.v[0] = nan_max(acc.v[0], fabs(to_double(pc.v[i])));
    }
    store_chunk(p, c, n, pc);
  }
  __device__ void finish(const Acc<double>& acc, double*) const {
    if (!s->halted) s->e = scaled ? detail::normal_scale(acc.v[0], t) : 1.0;
  }
};

/// tmp = p / e, as axpby(1 / e, p, 0, tmp) (the zero boundary's operator reads its input twice).
template <class T, class A>
__global__ void cg_scale_kernel(std::int64_t n, const T* p, const CgState* s, T* tmp,
                                DeviceStatus* status) {
  if (s->halted) return;
  const A a = from_double<A>(1.0 / s->e);
  for (std::int64_t k = thread_index(); k < n; k += thread_count())
    tmp[k] = axpby_value(a, p[k], A(0.0f), tmp[k], status, detail::cudab::kOpAxpby);
}

/// pq = e (p . q) as DotTerm sums it; halts, or alpha = rr / pq.
template <class T, class A, class S>
struct CgCurvature {
  const T* p;
  const T* q;
  std::int64_t n;
  CgState* s;
  __device__ void operator()(std::int64_t c, Acc<S>& acc) const {
    if (s->halted) return;
    const Chunk<T> pc = load_chunk(p, c, n), qc = load_chunk(q, c, n);
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      acc.v[0] = add(acc.v[0], static_cast<S>(to_double(mul(load<A>(pc.v[i]), load<A>(qc.v[i])))));
  }
  __device__ void finish(const Acc<S>& acc, double*) const {
    if (s->halted) return;
    const double pq = s->e * static_cast<double>(acc.v[0]);
    s->pq = pq;
    if (!(pq > 0) || s->rr == 0)
      s->halted = 1;
    else
      s->alpha = s->rr / pq;
  }
};

/// x += alpha p; r -= (alpha e) q (as two axpby); rn = r . r; beta, rr; the report.
template <class T, class A, class S>
struct CgUpdate {
  T* x;
  T* r;
  const T* p;
  const T* q;
  std::int64_t n;
  CgState* s;
  DeviceStatus* status;
  CgSlot* slot;
  __device__ void operator()(std::int64_t c, Acc<S>& acc) const {
    if (s->halted) return;
    const A one(1.0f);
    const A a = from_double<A>(s->alpha), b = from_double<A>(-s->alpha * s->e);
    const Chunk<T> pc = load_chunk(p, c, n), qc = load_chunk(q, c, n);
    Chunk<T> xc = load_chunk(x, c, n), rc = load_chunk(r, c, n);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      xc.v[i] = axpby_value(a, pc.v[i], one, xc.v[i], status, detail::cudab::kOpAxpby);
      rc.v[i] = axpby_value(b, qc.v[i], one, rc.v[i], status, detail::cudab::kOpAxpby);
      acc.v[0] = add(acc.v[0], static_cast<S>(to_double(mul(load<A>(rc.v[i]), load<A>(rc.v[i])))));
    }
    store_chunk(x, c, n, xc);
    store_chunk(r, c, n, rc);
  }
  __device__ void finish(const Acc<S>& acc, double*) const {
    CgSlot out{s->rr, s->e, s->pq, s->alpha, 0.0, s->halted, {}};
    if (!s->halted) {
      out.rn = static_cast<double>(acc.v[0]);
      s->beta = out.rn / s->rr;
      s->rr = out.rn;
    }
    // Written by other blocks' atomics before their fence: read past the L1.
    const volatile DeviceStatus* st = status;
    out.status.op = st->op;
    out.status.largest_bits = st->largest_bits;
    *slot = out;
  }
};

}  // namespace halfscope::deconv::cudak

namespace halfscope::deconv::detail::cudab {

/// The host side: the device state, a ring of report slots in mapped page-locked memory and an
/// event per slot.
class CgQueue {
 public:
  explicit CgQueue(cudaStream_t stream);
  ~CgQueue();
  CgQueue(const CgQueue&) = delete;
  CgQueue& operator=(const CgQueue&) = delete;

  [[nodiscard]] cudak::CgState* state() const {
    return static_cast<cudak::CgState*>(state_->data());
  }
  /// Queues the state's reset (every report must have been read).
  void reset(double rr, double beta);
  /// The device address of the next step's slot (InvalidInput when every slot is unread).
  [[nodiscard]] cudak::CgSlot* next_slot() const;
  /// After the step's last kernel: marks its slot written when the stream gets there.
  void queued();
  /// Waits for the oldest unread report and returns it.
  cudak::CgSlot read();

 private:
  static constexpr int kSlots = 4;
  struct FreeHost {
    void operator()(cudak::CgSlot* p) const;
  };
  cudaStream_t stream_;
  std::shared_ptr<Buffer> state_;                    // device
  std::unique_ptr<cudak::CgSlot[], FreeHost> host_;  // mapped page-locked
  cudak::CgSlot* device_ = nullptr;                  // its device address
  cuda::Event events_[kSlots];
  int next_ = 0, pending_ = 0;
};

}  // namespace halfscope::deconv::detail::cudab
