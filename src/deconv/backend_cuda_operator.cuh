// Internal (CUDA builds only): the deconvolution operator of the CUDA backend (backend.hpp) for one
// precision: the PSF spectra, the cuFFT plans, the transform buffers, all made once, and H x,
// H^T g and Q x as passes on the backend's stream.
//
// Passes (backend.hpp's operator; T storage, R / C transform types):
//   circular Q x:  [pad] -> R2C -> * q -> C2R -> [readout]      (q = |h^|^2 + lambda, real)
//   zero Q x:      pad -> R2C -> * h^ -> C2R -> crop -> R2C -> * conj(h^) -> C2R -> readout +
//   lambda x H x (J):       [pad] -> R2C -> * h^ -> C2R   (the criterion kernel reads the window)
//   H^T g:         [pad] -> R2C -> * conj(h^) -> C2R -> [readout]
// single / double on the circular grid transform the vector itself and write the result directly
// (bracketed passes skipped): the storage is the transform type and the 1/N of the inverse
// transform is folded into the stored spectra. mixed widens FP16 to FP32 in the pad pass and rounds
// once in the readout. half follows study 000 section V and the CPU backend (backend_cpu_half.cpp)
// step for step: with N = 2^m grid points, h1 = ceil(m/2), h2 = floor(m/2), the input of each
// forward transform is scaled by 2^-(h1 + ceil(log2 max|input|)) (in the pad or crop pass; the
// maximum is reduced on the device first) and the spectrum product by 2^-h2 before the inverse;
// the stored spectra are h^ 2^-ch and (|h^|^2 + lambda) 2^-cq with c = ceil(log2 max), so their
// magnitudes are at most 1: every intermediate stays of the order of one whatever N, max|h^|^2 or
// the pixels' units. The readout multiplies by the powers of two taken out (exact).
#pragma once

#include <cuda_fp16.h>
#include <library_types.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "deconv/backend_cuda.hpp"
#include "deconv/backend_cuda_reduce.cuh"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail::cudab {

/// Storage T, arithmetic A, transform R / C, reduction accumulator S, cuFFT real type.
template <class T_, class A_, class R_, class C_, class S_, cudaDataType kRealType, Precision kP>
struct Types {
  using T = T_;
  using A = A_;
  using R = R_;
  using C = C_;
  using S = S_;
  static constexpr cudaDataType real_type = kRealType;
  static constexpr Precision precision = kP;
  static constexpr bool half = std::is_same_v<R, __half>;
  static constexpr bool storage_is_transform = std::is_same_v<T, R>;
};
using DoubleTypes = Types<double, double, double, double2, double, CUDA_R_64F, Precision::Double>;
using SingleTypes = Types<float, float, float, float2, float, CUDA_R_32F, Precision::Single>;
using MixedTypes = Types<__half, float, float, float2, float, CUDA_R_32F, Precision::Mixed>;
using HalfTypes = Types<__half, __half, __half, __half2, float, CUDA_R_16F, Precision::Half>;

/// 2^-ceil(log2 m) for finite m > 0: the largest power of two whose product with m is at most 1.
inline double unit_scale(double m) {
  int e = 0;
  const double f = std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1)
  return std::ldexp(1.0, f == 0.5 ? 1 - e : -e);
}

template <class P>
class Operator {
 public:
  using T = typename P::T;
  using A = typename P::A;
  using R = typename P::R;
  using C = typename P::C;

  Operator(const Problem& problem, cudaStream_t stream, cudak::DeviceStatus* status)
      : grid_(make_grid(problem, P::half)), stream_(stream), status_(status) {
    if constexpr (P::half) check_half_grid(problem);
    if constexpr (std::is_same_v<A, double>)
      lambda_ = problem.lambda;
    else if constexpr (P::half)
      lambda_ = __double2half(problem.lambda);  // one rounding
    else
      lambda_ = static_cast<A>(problem.lambda);
    plans_ = make_plans(grid_, P::real_type, stream);
    grid_buf_ = device_buffer(grid_.points() * static_cast<std::int64_t>(sizeof(R)));
    spec_buf_ = device_buffer(grid_.spectrum() * static_cast<std::int64_t>(sizeof(C)));
    h_ = device_buffer(grid_.spectrum() * static_cast<std::int64_t>(sizeof(C)));
    if (grid_.circular) q_ = device_buffer(grid_.spectrum() * static_cast<std::int64_t>(sizeof(R)));
    partials_ = device_buffer(cudak::kMaxReduceBlocks *
                              static_cast<std::int64_t>(sizeof(cudak::Acc<double>)));
    boxes_ = device_buffer(2 * static_cast<std::int64_t>(sizeof(cudak::DeviceBox)));
    HS_CUDA_CHECK(cudaMemsetAsync(boxes_->data(), 0, 2 * sizeof(cudak::DeviceBox), stream_));
    blocks_grid_ = blocks_for(grid_.points());
    blocks_spec_ = blocks_for(grid_.spectrum());
    blocks_pix_ = blocks_for(grid_.pixels());

    // The spectra, once, from the FP64 h^ (a D2Z of this grid) and its FP64 maximum.
    const double n = static_cast<double>(grid_.points());
    double hs = 1.0 / n, qs = 1.0 / n;
    if constexpr (P::half) {
      const double hmax = max_abs_spectrum(problem, true);
      hs = unit_scale(hmax);
      qs = unit_scale(hmax * hmax + problem.lambda);
      int m = 0;
      while ((std::int64_t{1} << m) < grid_.points()) ++m;
      h1_ = m - m / 2;
      s2_ = static_cast<float>(std::ldexp(1.0, -(m / 2)));
      inv_h_ = static_cast<float>(1.0 / hs);
      inv_hh_ = static_cast<float>(1.0 / (hs * hs));
      inv_q_ = static_cast<float>(1.0 / qs);
    }
    const auto h64 = psf_spectrum64(problem, grid_, nullptr, stream_);
    cudak::spectra_kernel<C, R><<<blocks_spec_, cudak::kThreads, 0, stream_>>>(
        static_cast<const double2*>(h64->data()), grid_.spectrum(), hs, problem.lambda, qs,
        static_cast<C*>(h_->data()), q_ ? static_cast<R*>(q_->data()) : nullptr);
    HS_CHECK_LAUNCH();
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_));  // h64 is freed at return
  }

  [[nodiscard]] const Grid& grid() const { return grid_; }
  /// The transform grid's values after apply_h (H x times 2^-k: multiply by h_scale()).
  [[nodiscard]] const R* grid_values() const { return static_cast<const R*>(grid_buf_->data()); }
  [[nodiscard]] float h_scale() const { return inv_h_; }
  /// half: the box holding max|x| of the last apply_h (its scaling; null otherwise).
  [[nodiscard]] const cudak::DeviceBox* input_max() const { return P::half ? xbox() : nullptr; }

  /// One reduction pass over `n` items into `box` (results stay on the device).
  template <class S, bool kMax, class F>
  void reduce(std::int64_t n, const F& term, cudak::DeviceBox* box) {
    static_assert(sizeof(cudak::Acc<S>) <= sizeof(cudak::Acc<double>));
    cudak::reduce_kernel<S, kMax, F><<<reduce_blocks(n), cudak::kThreads, 0, stream_>>>(
        n, term, static_cast<cudak::Acc<S>*>(partials_->data()), box);
    HS_CHECK_LAUNCH();
  }

  /// out = Q x + (zero boundary: lambda x inside the readout). `e` (mixed on the circular grid
  /// only: the CG step's scale on the device): out = Q fl16(x / e), scaled in the pad pass.
  void normal(const T* x, T* out, const double* e = nullptr) {
    forward(x, e);
    if (grid_.circular) {
      multiply_real(q_);
      if constexpr (kDirect) {
        exec(plans_->inverse, spec(), out, true);
      } else {
        exec(plans_->inverse, spec(), gbuf(), true);
        readout(inv_q_, half_box(xbox()), nullptr, nullptr, out, kOpNormal);
      }
      return;
    }
    multiply<false>();
    exec(plans_->inverse, spec(), gbuf(), true);
    if constexpr (P::half)
      reduce<double, true>(grid_.pixels(),
                           cudak::MaxTerm<R>{gbuf(), grid_.cols, grid_.gc, nullptr, nullptr},
                           ybox());
    cudak::crop_kernel<R><<<blocks_grid_, cudak::kThreads, 0, stream_>>>(
        gbuf(), grid_.rows, grid_.cols, grid_.gr, grid_.gc, half_box(ybox()), h1_, status_,
        kOpNormal);
    HS_CHECK_LAUNCH();
    exec(plans_->forward, gbuf(), spec(), false);
    multiply<true>();
    exec(plans_->inverse, spec(), gbuf(), true);
    readout(inv_hh_, half_box(xbox()), half_box(ybox()), x, out, kOpNormal);
  }

  /// out = H^T g.
  void adjoint(const T* g, T* out) {
    forward(g);
    multiply<true>();
    if constexpr (kDirect) {
      if (grid_.circular) {
        exec(plans_->inverse, spec(), out, true);
        return;
      }
    }
    exec(plans_->inverse, spec(), gbuf(), true);
    readout(inv_h_, half_box(xbox()), nullptr, nullptr, out, kOpRhs);
  }

  /// The grid holds H x * (1 / h_scale()) on the image window afterwards.
  void apply_h(const T* x) {
    forward(x);
    multiply<false>();
    exec(plans_->inverse, spec(), gbuf(), true);
  }

 private:
  // single / double on the image's own grid: transform the vector in place of a padded copy.
  static constexpr bool kDirect = P::storage_is_transform && !P::half;

  cudak::DeviceBox* xbox() const { return static_cast<cudak::DeviceBox*>(boxes_->data()); }
  cudak::DeviceBox* ybox() const { return xbox() + 1; }
  static const cudak::DeviceBox* half_box(const cudak::DeviceBox* b) {
    return P::half ? b : nullptr;
  }
  R* gbuf() { return static_cast<R*>(grid_buf_->data()); }
  C* spec() { return static_cast<C*>(spec_buf_->data()); }
  static R r_from(float v) {
    if constexpr (P::half)
      return __float2half_rn(v);
    else
      return static_cast<R>(v);
  }

  void forward(const T* x, const double* e = nullptr) {
    if (e != nullptr && !(grid_.circular && !kDirect && !P::half))
      throw InvalidInput(
          "deconv operator: a device-side input scale needs mixed on a circular grid");
    if constexpr (kDirect) {
      if (grid_.circular) {
        exec(plans_->forward, x, spec(), false);
        return;
      }
    }
    if constexpr (P::half)
      reduce<double, true>(grid_.pixels(),
                           cudak::MaxTerm<T>{x, grid_.cols, grid_.cols, nullptr, nullptr}, xbox());
    cudak::pad_kernel<T, R><<<blocks_grid_, cudak::kThreads, 0, stream_>>>(
        x, grid_.rows, grid_.cols, gbuf(), grid_.gr, grid_.gc, half_box(xbox()), h1_, e);
    HS_CHECK_LAUNCH();
    exec(plans_->forward, gbuf(), spec(), false);
  }

  void multiply_real(const std::shared_ptr<Buffer>& q) {
    cudak::multiply_real_kernel<C, R><<<blocks_spec_, cudak::kThreads, 0, stream_>>>(
        spec(), static_cast<const R*>(q->data()), grid_.spectrum(), r_from(s2_), P::half);
    HS_CHECK_LAUNCH();
  }

  template <bool kConj>
  void multiply() {
    cudak::multiply_complex_kernel<kConj, C, R><<<blocks_spec_, cudak::kThreads, 0, stream_>>>(
        spec(), static_cast<const C*>(h_->data()), grid_.spectrum(), r_from(s2_), P::half);
    HS_CHECK_LAUNCH();
  }

  void readout(float p2, const cudak::DeviceBox* m1, const cudak::DeviceBox* m2, const T* x, T* out,
               unsigned op) {
    cudak::readout_kernel<T, A, R><<<blocks_pix_, cudak::kThreads, 0, stream_>>>(
        gbuf(), grid_.gc, grid_.rows, grid_.cols, p2, m1, m2, x, lambda_, out, status_, op);
    HS_CHECK_LAUNCH();
  }

  Grid grid_;
  cudaStream_t stream_;
  cudak::DeviceStatus* status_;
  A lambda_{};
  std::unique_ptr<PlanPair> plans_;
  std::shared_ptr<Buffer> grid_buf_, spec_buf_, h_, q_;
  std::shared_ptr<Buffer> partials_, boxes_;  // reductions: partial sums; half's two maxima
  int blocks_grid_ = 1, blocks_spec_ = 1, blocks_pix_ = 1;
  int h1_ = 0;    // half: ceil(log2 N / 2), the forward transform's pre-scaling exponent
  float s2_ = 1;  // half: 2^-floor(log2 N / 2), the inverse transform's pre-scaling
  float inv_h_ = 1, inv_hh_ = 1, inv_q_ = 1;  // half's readout factors (1 otherwise)
};

}  // namespace halfscope::deconv::detail::cudab
