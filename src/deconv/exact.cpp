// The exact Tikhonov minimiser f* (the accuracy reference of every solver) and the FP64
// criterion.
//  - circular: H is circulant, so f* = IFFT(conj(h^) G / (|h^|^2 + lambda)) (the Wiener-Hunt
//    filter, references section 6), in FP64 with FFTW (or on the GPU by wiener_cuda);
//  - zero: H is not circulant; f* solves (H^T H + lambda I) f = H^T g by conjugate gradient in
//    FP64 through the double backend until ||b - Q f|| <= 1e-12 ||b|| (checked on the explicitly
//    recomputed residual); a run that does not get there is a NumericalError, never a silently
//    inaccurate reference.
#include <cmath>
#include <cstdio>
#include <string>

#include "deconv/backend_cpu.hpp"
#include "deconv/exact.hpp"
#include "deconv/solvers.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

namespace {

Array wiener_cpu(const Problem& p) {
  FftwOperator<double> op(p);
  const double n = static_cast<double>(op.grid_size());
  std::vector<std::complex<double>> mult(op.spectrum().size());
  for (std::size_t k = 0; k < mult.size(); ++k) {
    const std::complex<double> h = op.spectrum()[k] * n;  // h^
    mult[k] = h / ((std::norm(h) + p.lambda) * n);        // conj taken by filter()
  }
  Array out(DType::f64, {p.rows(), p.cols()});
  op.filter(p.dirty.data_as<double>(), out.data_as<double>(), mult, true);
  return out;
}

Array cg_fp64(const BackendFactory& make) {
  auto owned = make(Precision::Double);
  Backend& b = *owned;
  const Vec f = b.create(), rhs = b.create(), r = b.create(), d = b.create(), q = b.create();
  b.rhs(rhs);
  const double bb = b.dot(rhs, rhs);
  if (bb == 0) return image_of(b, f);  // H^T g = 0: f* = 0
  const double goal = kExactTolerance * kExactTolerance * bb;
  auto true_residual = [&] {
    b.normal(f, q);
    b.copy(rhs, r);
    b.axpby(-1.0, q, 1.0, r);
    return b.dot(r, r);
  };
  double rr = true_residual();
  b.copy(r, d);
  for (std::int64_t it = 1; it <= kExactMaxIterations; ++it) {
    b.normal(d, q);
    const double dq = b.dot(d, q);
    if (!(dq > 0)) break;  // only when r is already at rounding level
    const double alpha = rr / dq;
    b.axpby(alpha, d, 1.0, f);
    b.axpby(-alpha, q, 1.0, r);
    double rn = b.dot(r, r);
    if (it % kResidualRefresh == 0 || rn <= goal) {
      rn = true_residual();
      if (rn <= goal) return image_of(b, f);
    }
    b.axpby(1.0, r, rn / rr, d);
    rr = rn;
  }
  const double reached = std::sqrt(true_residual() / bb);
  if (reached <= kExactTolerance) return image_of(b, f);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", reached);
  throw NumericalError(
      "deconvolve: the FP64 reference (conjugate gradient, zero boundary) reached a relative "
      "residual of " +
      std::string(buf) + " after " + std::to_string(kExactMaxIterations) +
      " iterations, not 1e-12: the problem is too ill-conditioned (raise lambda)");
}

}  // namespace

Array exact_solution(const Problem& p, DeviceKind device, const BackendFactory& make) {
  if (p.boundary == Boundary::Circular) {
#if HALFSCOPE_WITH_CUDA
    if (device == DeviceKind::Cuda) return wiener_cuda(p);
#endif
    (void)device;
    return wiener_cpu(p);
  }
  return cg_fp64(make);
}

double criterion_fp64(const Problem& p, const Array& image) {
  FftwOperator<double> op(p);
  const Array x = image.to(Memory::host).astype(DType::f64).contiguous();
  const std::int64_t n = p.rows() * p.cols();
  std::vector<double> hx(static_cast<std::size_t>(n));
  op.apply(x.data_as<double>(), hx.data());
  const double* g = p.dirty.data_as<double>();
  const double* px = x.data_as<double>();
  double rr = 0, xx = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = g[i] - hx[static_cast<std::size_t>(i)];
    rr += r * r;
    xx += px[i] * px[i];
  }
  return rr + p.lambda * xx;
}

}  // namespace halfscope::deconv::detail
