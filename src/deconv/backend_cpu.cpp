// The CPU deconvolution backends in double, single and mixed (FFTW), and the FP64 evaluator.
//
// double and single run the whole operator in their own type. mixed keeps every vector in FP16
// (values rounded with round_to_half) and runs each operation on the float values read from it:
// the FFTs, the spectral product and, for the zero boundary, the intermediate H f stay in FP32,
// and only the operation's result is rounded to FP16, once (backend.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "conv/fft_cpu_internal.hpp"
#include "deconv/backend_cpu.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

std::vector<std::complex<double>> psf_spectrum(const Array& psf, std::int64_t grid_rows,
                                               std::int64_t grid_cols) {
  return real_spectrum(psf_on_grid(psf, grid_rows, grid_cols));
}

template <class F>
FftwOperator<F>::FftwOperator(const Problem& problem)
    : rows_(problem.rows()),
      cols_(problem.cols()),
      grid_rows_(grid_extent(rows_, problem.boundary, false)),
      grid_cols_(grid_extent(cols_, problem.boundary, false)),
      boundary_(problem.boundary),
      lambda_(static_cast<F>(problem.lambda)),
      work_(static_cast<std::size_t>(rows_ * cols_)),
      r2c_(conv::cpu::plan_r2c<F>(grid_rows_, grid_cols_,
                                  conv::cpu::fft_threads(grid_rows_ * grid_cols_))),
      c2r_(conv::cpu::plan_c2r<F>(grid_rows_, grid_cols_,
                                  conv::cpu::fft_threads(grid_rows_ * grid_cols_))),
      real_(grid_rows_ * grid_cols_),
      spec_(grid_rows_ * (grid_cols_ / 2 + 1)) {
  const auto spectrum = psf_spectrum(problem.psf, grid_rows_, grid_cols_);
  const double n = static_cast<double>(grid_rows_ * grid_cols_);
  h_.resize(spectrum.size());
  for (std::size_t k = 0; k < spectrum.size(); ++k) h_[k] = C(spectrum[k] / n);
  if (boundary_ == Boundary::Circular) {
    q_.resize(spectrum.size());
    for (std::size_t k = 0; k < spectrum.size(); ++k)
      q_[k] = C(static_cast<F>((std::norm(spectrum[k]) + problem.lambda) / n), F(0));
  }
}

// The passes around the transforms run on the OpenMP threads too, so that they do not stay serial
// beside transforms split over them (fft_threads; docs/deconv.md, "The CPU operator on every
// core").
template <class F>
void FftwOperator<F>::filter(const F* in, F* out, const std::vector<C>& mult, bool conj) {
  F* re = real_.data();
  auto* sp = spec_.data();
  const bool parallel = static_cast<double>(grid_rows_ * grid_cols_) >= conv::cpu::kParallelWork;
  const bool padded = grid_cols_ != cols_ || grid_rows_ != rows_;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t r = 0; r < grid_rows_; ++r) {
    F* row = re + r * grid_cols_;
    if (r < rows_) std::copy_n(in + r * cols_, cols_, row);
    if (padded) std::fill(row + (r < rows_ ? cols_ : 0), row + grid_cols_, F(0));
  }
  conv::cpu::execute_r2c(r2c_, re, sp);
  const std::int64_t ns = grid_rows_ * (grid_cols_ / 2 + 1);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t k = 0; k < ns; ++k) {
    const C a(sp[k][0], sp[k][1]);
    const C m =
        conj ? std::conj(mult[static_cast<std::size_t>(k)]) : mult[static_cast<std::size_t>(k)];
    const C z = a * m;
    sp[k][0] = z.real();
    sp[k][1] = z.imag();
  }
  conv::cpu::execute_c2r(c2r_, sp, re);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t r = 0; r < rows_; ++r) std::copy_n(re + r * grid_cols_, cols_, out + r * cols_);
}

template <class F>
void FftwOperator<F>::normal(const F* x, F* out) {
  if (boundary_ == Boundary::Circular) {
    filter(x, out, q_, false);
    return;
  }
  apply(x, work_.data());
  adjoint(work_.data(), out);
  const std::int64_t n = rows_ * cols_;
#pragma omp parallel for schedule(static) if (static_cast <double>(n) >= conv::cpu::kParallelWork)
  for (std::int64_t i = 0; i < n; ++i) out[i] += lambda_ * x[i];
}

template class FftwOperator<float>;
template class FftwOperator<double>;

namespace {

/// double, single or mixed on the CPU: FftwOperator in the arithmetic type (R::T, which is also
/// the type the vectors are held in), results rounded to storage by store_all.
template <class R>
class FftwBackend final : public CpuVectors<R> {
 public:
  using T = typename R::T;
  explicit FftwBackend(const Problem& p)
      : CpuVectors<R>(p.rows(), p.cols()),
        op_(p),
        lambda_(R::scalar(p.lambda)),
        dirty_(p.dirty),
        tmp_(static_cast<std::size_t>(this->n_)) {}
  void rhs(Vec out) override {
    op_.adjoint(dirty().data(), tmp_.data());
    this->store_all(tmp_.data(), this->data(out), "H^T g");
  }
  void normal(Vec x, Vec out) override {
    if (x == out) throw InvalidInput("deconv CPU backend: normal(x, out) needs x != out");
    op_.normal(this->data(x), tmp_.data());
    this->store_all(tmp_.data(), this->data(out), "normal operator");
  }
  double criterion(Vec x) override {
    this->throw_pending();
    const std::vector<T>& g = dirty();
    const T* px = this->data(x);
    op_.apply(px, tmp_.data());
    for (std::int64_t i = 0; i < this->n_; ++i)
      tmp_[static_cast<std::size_t>(i)] =
          g[static_cast<std::size_t>(i)] - tmp_[static_cast<std::size_t>(i)];
    const T rr = static_cast<T>(this->dot_raw(tmp_.data(), tmp_.data()));
    const T xx = static_cast<T>(this->dot_raw(px, px));
    return static_cast<double>(rr + lambda_ * xx);
  }

 private:
  /// g in storage, converted on first use: split's mixed backend never reads it, so a dirty
  /// image beyond FP16's range (which split handles) is refused only where it is stored.
  const std::vector<T>& dirty() {
    if (g_.empty()) {
      g_.resize(static_cast<std::size_t>(this->n_));
      this->store_all(dirty_.template data_as<double>(), g_.data(), "dirty image");
      this->throw_pending();
    }
    return g_;
  }

  FftwOperator<T> op_;
  T lambda_;
  Array dirty_;
  std::vector<T> g_, tmp_;
};

class CpuEvaluator final : public Evaluator {
 public:
  CpuEvaluator(const Problem& p, const Array& exact)
      : op_(p),
        lambda_(p.lambda),
        g_(p.dirty),
        n_(p.rows() * p.cols()),
        hx_(static_cast<std::size_t>(n_)) {
    if (!exact.empty()) {
      exact_ = exact.to(Memory::host).astype(DType::f64).contiguous();
      const double* e = exact_.data_as<double>();
      for (std::int64_t i = 0; i < n_; ++i) norm_ += e[i] * e[i];
      norm_ = std::sqrt(norm_);
    }
  }
  Evaluation evaluate(const Array& x) override {
    const Array xd = x.to(Memory::host).astype(DType::f64).contiguous();
    if (xd.size() != n_)
      throw InvalidInput("deconv evaluator: expected " + std::to_string(n_) + " values, got " +
                         x.describe());
    const double* px = xd.data_as<double>();
    const double* g = g_.data_as<double>();
    op_.apply(px, hx_.data());
    double rr = 0, xx = 0;
    for (std::int64_t i = 0; i < n_; ++i) {
      const double r = g[i] - hx_[static_cast<std::size_t>(i)];
      rr += r * r;
      xx += px[i] * px[i];
    }
    Evaluation e{rr + lambda_ * xx, std::nan("")};
    if (!exact_.empty()) {
      const double* f = exact_.data_as<double>();
      double dd = 0;
      for (std::int64_t i = 0; i < n_; ++i) dd += (px[i] - f[i]) * (px[i] - f[i]);
      e.distance = norm_ > 0 ? std::sqrt(dd) / norm_ : std::sqrt(dd);
    }
    return e;
  }

 private:
  FftwOperator<double> op_;
  double lambda_;
  Array g_, exact_;
  std::int64_t n_;
  std::vector<double> hx_;
  double norm_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Problem& problem, Precision precision) {
  switch (precision) {
    case Precision::Double:
      return std::make_unique<FftwBackend<DoubleRules>>(problem);
    case Precision::Single:
      return std::make_unique<FftwBackend<SingleRules>>(problem);
    case Precision::Mixed:
      return std::make_unique<FftwBackend<MixedRules>>(problem);
    case Precision::Half:
      return make_cpu_half_backend(problem);
    default:
      throw InvalidInput("deconv CPU backend: precision " + std::string(precision_name(precision)) +
                         " is not a backend precision (double, single, half, mixed)");
  }
}

std::unique_ptr<Evaluator> make_cpu_evaluator(const Problem& problem, const Array& exact) {
  return std::make_unique<CpuEvaluator>(problem, exact);
}

}  // namespace halfscope::deconv::detail
