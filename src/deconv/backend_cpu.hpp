// Internal: the CPU side of the deconvolution backends (backend.hpp).
//
//  - FftwOperator<F>: H, H^T and Q = H^T H + lambda I on float or double arrays through cached
//    FFTW plans (conv/fft_plan_cache.hpp), the PSF spectrum computed once (in FP64, then rounded
//    to F). Used by the double, single and mixed backends, the FP64 evaluator, the exact solution
//    and tikhonov_criterion.
//  - CpuVectors<Rules>: the vector half of a CPU backend (create, dot, axpby, copy, max_abs,
//    assign, view, the pending FP16 overflow) for one precision's rounding rules; the FFTW
//    backends (backend_cpu.cpp) and the emulated FP16 backend (backend_cpu_half.cpp) add the
//    operator.
// Vectors are held as double (double) or float (single, mixed, half). For mixed and half every
// stored float is an FP16 value (rounded with conv::cpu::round_to_half, bit for bit Half's
// rounding), so the storage is FP16 in value; view() hands out a real float16 array.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "conv/cpu_common.hpp"
#include "conv/fft_plan_cache.hpp"
#include "deconv/backend.hpp"

namespace halfscope::deconv::detail {

/// ceil(log2 v) for finite v > 0 (the power-of-two scalings of the FP16 paths).
int ceil_log2(double v);

/// The FP64 r2c spectrum of a real float64 grid (rows x (cols/2 + 1)), through FFTW (geometry.cpp).
std::vector<std::complex<double>> real_spectrum(const Array& grid);

/// The FP64 r2c spectrum h^ of the PSF on a grid_rows x grid_cols grid (rows x (cols/2 + 1)).
std::vector<std::complex<double>> psf_spectrum(const Array& psf, std::int64_t grid_rows,
                                               std::int64_t grid_cols);

/// H, H^T and Q of one problem on FFTW's smooth grid, in F = float or double. Not thread-safe
/// (its work buffers are members); each backend owns one.
template <class F>
class FftwOperator {
 public:
  using C = std::complex<F>;
  explicit FftwOperator(const Problem& problem);

  /// out = H x (rows x cols, C-contiguous; out != x).
  void apply(const F* x, F* out) { filter(x, out, h_, false); }
  /// out = H^T y.
  void adjoint(const F* y, F* out) { filter(y, out, h_, true); }
  /// out = H^T H x + lambda x (circular: one spectral multiply by |h^|^2 + lambda).
  void normal(const F* x, F* out);
  /// out = the grid's circular filter of the zero-extended `in` by `mult` (already divided by
  /// the grid size), cropped; `conj` multiplies by conj(mult).
  void filter(const F* in, F* out, const std::vector<C>& mult, bool conj);
  /// h^ / (grid size) on the grid (r2c layout).
  [[nodiscard]] const std::vector<C>& spectrum() const { return h_; }
  [[nodiscard]] std::int64_t rows() const { return rows_; }
  [[nodiscard]] std::int64_t cols() const { return cols_; }
  [[nodiscard]] std::int64_t grid_size() const { return grid_rows_ * grid_cols_; }

 private:
  std::int64_t rows_, cols_, grid_rows_, grid_cols_;
  Boundary boundary_;
  F lambda_;
  std::vector<C> h_;  // h^ / N
  std::vector<C> q_;  // (|h^|^2 + lambda) / N, circular only (real values)
  std::vector<F> work_;
  conv::cpu::SharedPlan<F> r2c_, c2r_;
  conv::cpu::FftwBuffer<F> real_;
  conv::cpu::FftwBuffer<typename conv::cpu::Fftw<F>::complex> spec_;
};

extern template class FftwOperator<float>;
extern template class FftwOperator<double>;

/// Rounding rules per backend precision (backend.hpp's arithmetic contract).
struct DoubleRules {
  using T = double;
  static constexpr Precision precision = Precision::Double;
  static constexpr bool fp16 = false;
  static T scalar(double v) { return v; }
  static T store(double v) { return v; }
  static double lin(T a, T x, T b, T y) { return a * x + b * y; }
};
struct SingleRules {
  using T = float;
  static constexpr Precision precision = Precision::Single;
  static constexpr bool fp16 = false;
  static T scalar(double v) { return static_cast<float>(v); }
  static T store(float v) { return v; }
  static float lin(T a, T x, T b, T y) { return a * x + b * y; }
};
/// FP16 storage, FP32 arithmetic: one rounding to FP16 at the end of each operation.
struct MixedRules {
  using T = float;
  static constexpr Precision precision = Precision::Mixed;
  static constexpr bool fp16 = true;
  static T scalar(double v) { return static_cast<float>(v); }
  static T store(float v) { return conv::cpu::round_to_half(v); }  // inline: it must vectorize
  static float lin(T a, T x, T b, T y) { return a * x + b * y; }
};
/// FP16 everything: each product and sum rounded (the final rounding is store()).
struct HalfRules {
  using T = float;
  static constexpr Precision precision = Precision::Half;
  static constexpr bool fp16 = true;
  static T scalar(double v) { return static_cast<float>(Half(v)); }  // one rounding from double
  static T store(float v) { return conv::cpu::round_to_half(v); }
  /// r(a x) + r(b y), still to be rounded; where a product overflows FP16 on its own, the
  /// unrounded a x + b y instead (its rounding overflows too, and the report can say how large).
  static float lin(T a, T x, T b, T y) {
    const float v = store(a * x) + store(b * y);
    return v - v == 0.0f ? v : a * x + b * y;
  }
};

/// The vector operations of a CPU backend with rounding rules R (see the file comment). The
/// derived class adds rhs, normal and criterion.
template <class R>
class CpuVectors : public Backend {
 public:
  using T = typename R::T;
  CpuVectors(std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols), n_(rows * cols) {}

  [[nodiscard]] Precision precision() const override { return R::precision; }
  [[nodiscard]] DeviceKind device() const override { return DeviceKind::Cpu; }
  Vec create() override;
  double dot(Vec a, Vec b) override;
  void axpby(double a, Vec x, double b, Vec y) override;
  void copy(Vec from, Vec to) override;
  double max_abs(Vec x) override;
  void assign(const Array& src, double scale, double beta, Vec to) override;
  Array view(Vec x) override;
  void synchronize() override { throw_pending(); }
  [[nodiscard]] double round_scalar(double v) const override { return R::scalar(v); }

 protected:
  T* data(Vec v);
  /// Rounds `values` (n_ of them, unrounded results) to storage into `out`, noting an overflow
  /// of operation `what`.
  template <class V>
  void store_all(const V* values, T* out, const char* what);
  /// Records the first overflow of an operation; thrown by the next scalar call or synchronize.
  void note_overflow(const char* what, std::int64_t count, double largest);
  void throw_pending();
  /// a . b over raw arrays with R's reduction rule.
  double dot_raw(const T* a, const T* b);

  std::int64_t rows_, cols_, n_;

 private:
  /// An n-element work buffer of type A (float or double), reused across calls.
  template <class A>
  std::vector<A>& scratch() {
    auto& v = std::get<std::vector<A>>(scratch_);
    v.resize(static_cast<std::size_t>(n_));
    return v;
  }
  std::tuple<std::vector<float>, std::vector<double>> scratch_;
  std::vector<std::vector<T>> vecs_;
  std::string pending_;
};

extern template class CpuVectors<DoubleRules>;
extern template class CpuVectors<SingleRules>;
extern template class CpuVectors<MixedRules>;
extern template class CpuVectors<HalfRules>;

/// The emulated FP16 backend (backend_cpu_half.cpp); power-of-two grids only (InvalidInput).
std::unique_ptr<Backend> make_cpu_half_backend(const Problem& problem);

}  // namespace halfscope::deconv::detail
