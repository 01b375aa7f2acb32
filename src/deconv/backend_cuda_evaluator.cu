// FP64 on the GPU (backend.hpp): the trace's evaluator (J and the distance to the exact solution
// of iterates that stay on the device) and the circular Wiener solution. Both use D2Z / Z2D on the
// FP64 grid of the problem (grid_extent with smooth sizes), the PSF spectrum with the inverse
// transform's 1/N folded in, and the one-pass reduction of backend_cuda_kernels.cuh.
#include <cuda_fp16.h>

#include <cmath>
#include <memory>
#include <string>

#include "deconv/backend_cuda.hpp"
#include "deconv/backend_cuda_reduce.cuh"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

namespace {

using namespace cudab;

/// ||g - H x||^2, ||x||^2 and ||x - f*||^2 in FP64 (f* null: no distance).
template <class T>
struct EvalTerm {
  const double* hx;
  std::int64_t gc, cols;
  const double* g;
  const T* x;
  const double* exact;
  __device__ void operator()(std::int64_t k, cudak::Acc<double>& acc) const {
    const double xv = cudak::to_double(x[k]);
    const double r = g[k] - hx[cudak::window_index(k, cols, gc)];
    acc.v[0] += r * r;
    acc.v[1] += xv * xv;
    if (exact) {
      const double d = xv - exact[k];
      acc.v[2] += d * d;
    }
  }
  __device__ void finish(const cudak::Acc<double>& acc, double* out) const {
    for (int c = 0; c < 3; ++c) out[c] = acc.v[c];
  }
};

/// spec = conj(h^) G / ((|h^|^2 + lambda) N) (the Wiener filter, with the inverse transform's
/// 1/N) from h = h^ / N: conj(h) G / (|h|^2 + lambda / N^2) / N^2.
__global__ void wiener_kernel(double2* spec, const double2* h, std::int64_t n, double lambda_n2,
                              double inv_n2) {
  for (std::int64_t k = cudak::thread_index(); k < n; k += cudak::thread_count()) {
    const double2 hv = h[k];
    const double2 v = cudak::cmul<true>(spec[k], hv);
    const double den = hv.x * hv.x + hv.y * hv.y + lambda_n2;
    spec[k] = make_double2(v.x / den * inv_n2, v.y / den * inv_n2);
  }
}

/// The FP64 pieces both need: grid, plans, h^ / N, the transform buffers.
struct Fp64Operator {
  Fp64Operator(const Problem& problem, cudaStream_t stream)
      : grid(make_grid(problem, false)),
        plans(make_plans(grid, CUDA_R_64F, stream)),
        h(psf_spectrum64(problem, grid, plans.get(), stream)),
        real(device_buffer(grid.points() * static_cast<std::int64_t>(sizeof(double)))),
        spec(device_buffer(grid.spectrum() * static_cast<std::int64_t>(sizeof(double2)))) {
    // Fold the 1/N of the inverse transform into h^ (exact for power-of-two N, one rounding
    // otherwise): spectra_kernel with hs = 1/N and no q.
    cudak::spectra_kernel<double2, double>
        <<<blocks_for(grid.spectrum()), cudak::kThreads, 0, stream>>>(
            static_cast<const double2*>(h->data()), grid.spectrum(),
            1.0 / static_cast<double>(grid.points()), 0.0, 1.0, hn(), nullptr);
    HS_CHECK_LAUNCH();
  }
  double2* hn() { return static_cast<double2*>(h->data()); }
  double* grid_values() { return static_cast<double*>(real->data()); }
  double2* spectrum() { return static_cast<double2*>(spec->data()); }

  Grid grid;
  std::unique_ptr<PlanPair> plans;
  std::shared_ptr<Buffer> h, real, spec;
};

class CudaEvaluator final : public Evaluator {
 public:
  CudaEvaluator(const Problem& problem, const Array& exact)
      : op_(problem, stream_.get()),
        lambda_(problem.lambda),
        box_(device_buffer(sizeof(cudak::DeviceBox))),
        partials_(device_buffer(cudak::kMaxReduceBlocks *
                                static_cast<std::int64_t>(sizeof(cudak::Acc<double>)))) {
    HS_CUDA_CHECK(cudaMemsetAsync(box_->data(), 0, sizeof(cudak::DeviceBox), stream_.get()));
    g_ = problem.dirty.astype(DType::f64).contiguous().to(Memory::device);
    if (!exact.empty()) {
      if (exact.ndim() != 2 || exact.dim(0) != problem.rows() || exact.dim(1) != problem.cols())
        throw InvalidInput("deconv evaluator (cuda): the exact solution must be " +
                           std::to_string(problem.rows()) + "x" + std::to_string(problem.cols()) +
                           ", found " + exact.describe());
      const Array f = exact.to(Memory::host).astype(DType::f64).contiguous();
      double s = 0;
      for (std::int64_t k = 0; k < f.size(); ++k)
        s += f.data_as<double>()[k] * f.data_as<double>()[k];
      exact_norm_ = std::sqrt(s);
      exact_ = f.to(Memory::device);
    }
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  Evaluation evaluate(const Array& x) override {
    const Grid& g = op_.grid;
    if (!x.empty() && !x.on_device()) {
      // A host image (the driver's Wiener solution): one upload; iterates stay on the device.
      const Array d = x.contiguous().to(Memory::device);
      return evaluate(d);
    }
    check_device_image(x, g.rows, g.cols, "deconv evaluator (cuda): iterate");
    switch (x.dtype()) {
      case DType::f64:
        return run(static_cast<const double*>(x.data()));
      case DType::f32:
        return run(static_cast<const float*>(x.data()));
      default:
        return run(static_cast<const __half*>(x.data()));
    }
  }

 private:
  template <class T>
  Evaluation run(const T* x) {
    const Grid& g = op_.grid;
    const cudaStream_t s = stream_.get();
    cudak::pad_kernel<T, double><<<blocks_for(g.points()), cudak::kThreads, 0, s>>>(
        x, g.rows, g.cols, op_.grid_values(), g.gr, g.gc, nullptr, 0);
    HS_CHECK_LAUNCH();
    exec(op_.plans->forward, op_.grid_values(), op_.spectrum(), false);
    cudak::multiply_complex_kernel<false, double2, double>
        <<<blocks_for(g.spectrum()), cudak::kThreads, 0, s>>>(op_.spectrum(), op_.hn(),
                                                              g.spectrum(), 1.0, false);
    HS_CHECK_LAUNCH();
    exec(op_.plans->inverse, op_.spectrum(), op_.grid_values(), true);
    const EvalTerm<T> term{op_.grid_values(),
                           g.gc,
                           g.cols,
                           static_cast<const double*>(g_.data()),
                           x,
                           exact_.empty() ? nullptr : static_cast<const double*>(exact_.data())};
    auto* dbox = static_cast<cudak::DeviceBox*>(box_->data());
    cudak::reduce_kernel<double, false, EvalTerm<T>>
        <<<reduce_blocks(g.pixels()), cudak::kThreads, 0, s>>>(
            g.pixels(), term, static_cast<cudak::Acc<double>*>(partials_->data()), dbox);
    HS_CHECK_LAUNCH();
    const cudak::DeviceBox box = read_box(dbox, s);
    Evaluation e;
    e.criterion = box.result[0] + lambda_ * box.result[1];
    // As the CPU evaluator: the absolute distance when the exact solution is zero.
    e.distance = exact_.empty()    ? std::nan("")
                 : exact_norm_ > 0 ? std::sqrt(box.result[2]) / exact_norm_
                                   : std::sqrt(box.result[2]);
    return e;
  }

  cuda::Stream stream_;  // first: destroyed last
  Fp64Operator op_;
  double lambda_;
  std::shared_ptr<Buffer> box_, partials_;
  Array g_, exact_;
  double exact_norm_ = 0;
};

}  // namespace

std::unique_ptr<Evaluator> make_cuda_evaluator(const Problem& problem, const Array& exact) {
  if (!cuda_available())
    throw Unsupported("deconvolve: the CUDA evaluator needs a CUDA device; none is usable");
  return std::make_unique<CudaEvaluator>(problem, exact);
}

Array wiener_cuda(const Problem& problem) {
  if (problem.boundary != Boundary::Circular)
    throw InvalidInput(
        "wiener_cuda: the FFT Wiener filter is the exact solution only for the "
        "circular boundary; the zero boundary is solved by FP64 conjugate gradient");
  if (!cuda_available())
    throw Unsupported("deconvolve: the CUDA Wiener filter needs a CUDA device; none is usable");
  cuda::Stream stream;
  Fp64Operator op(problem, stream.get());
  const Grid& g = op.grid;  // circular: the image itself
  const Array dirty = problem.dirty.astype(DType::f64).contiguous().to(Memory::device);
  exec(op.plans->forward, dirty.data(), op.spectrum(), false);
  const double n = static_cast<double>(g.points());
  wiener_kernel<<<blocks_for(g.spectrum()), cudak::kThreads, 0, stream.get()>>>(
      op.spectrum(), op.hn(), g.spectrum(), problem.lambda / (n * n), 1.0 / (n * n));
  HS_CHECK_LAUNCH();
  Array out(DType::f64, {g.rows, g.cols}, Memory::device);
  exec(op.plans->inverse, op.spectrum(), out.data(), true);
  HS_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  Array host = out.to(Memory::host);
  const double* v = host.data_as<double>();
  for (std::int64_t k = 0; k < host.size(); ++k)
    if (!std::isfinite(v[k]))
      throw NumericalError("wiener_cuda: the filter is not finite at pixel " + std::to_string(k) +
                           " (|h^|^2 + lambda = 0 where the PSF spectrum vanishes and lambda = 0)");
  return host;
}

}  // namespace halfscope::deconv::detail
