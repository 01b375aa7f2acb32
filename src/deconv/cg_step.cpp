// The host-scalar conjugate-gradient step of backend.hpp: the reference sequence of operations
// that the CUDA backend's device-side step (backend_cuda_cg.cuh) reproduces value for value.
#include <string>

#include "deconv/backend.hpp"
#include "deconv/solvers.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

void Backend::cg_reset(double rr, double beta) {
  if (!cg_host_.reports.empty())
    throw InvalidInput("deconv backend: cg_reset with " + std::to_string(cg_host_.reports.size()) +
                       " step reports unread");
  cg_host_.rr = rr;
  cg_host_.beta = beta;
  cg_host_.halted = false;
}

void Backend::cg_step(Vec x, Vec r, Vec p, Vec q, Vec tmp, double norm_q) {
  CgReport s;
  s.rr = cg_host_.rr;
  if (!cg_host_.halted) {
    axpby(1.0, r, cg_host_.beta, p);
    s.e = scaled_normal(*this, p, tmp, q, norm_q);
    s.pq = s.e * dot(p, q);
    cg_host_.halted = !(s.pq > 0) || s.rr == 0;
  }
  s.halted = cg_host_.halted;
  if (!s.halted) {
    s.alpha = s.rr / s.pq;
    axpby(s.alpha, p, 1.0, x);
    axpby(-s.alpha * s.e, q, 1.0, r);
    s.rn = dot(r, r);
    cg_host_.beta = s.rn / s.rr;
    cg_host_.rr = s.rn;
  }
  cg_host_.reports.push_back(s);
}

CgReport Backend::cg_report() {
  if (cg_host_.reports.empty()) throw InvalidInput("deconv backend: cg_report with no step queued");
  const CgReport s = cg_host_.reports.front();
  cg_host_.reports.pop_front();
  return s;
}

}  // namespace halfscope::deconv::detail
