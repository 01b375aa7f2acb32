// The vector operations of the CPU deconvolution backends (backend_cpu.hpp), per precision.
//
// Reductions run row by row (OpenMP over rows), each row's partial sum in the accumulation type,
// then the row sums in order in the same type: deterministic for any thread count, and the error
// grows with rows + cols instead of rows * cols.
//  - double: FP64 sums of FP64 products; single and mixed: FP32 products and sums;
//  - half: the products rounded to FP16 and summed in FP32 (backend.hpp). So the products cannot
//    overflow FP16 (a pixel of 300 squared already would), both operands are first scaled by
//    powers of two to a largest magnitude of at most 1 (exact unless a value falls into FP16's
//    subnormals) and the sum is scaled back in FP64.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "conv/cpu_common.hpp"
#include "deconv/backend_cpu.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail {

using conv::cpu::kParallelWork;
using conv::cpu::round_to_half;

int ceil_log2(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m 2^e, m in [0.5, 1)
  return m == 0.5 ? e - 1 : e;
}

template <class R>
Vec CpuVectors<R>::create() {
  vecs_.emplace_back(static_cast<std::size_t>(n_), T(0));
  return static_cast<Vec>(vecs_.size() - 1);
}

template <class R>
typename R::T* CpuVectors<R>::data(Vec v) {
  if (v < 0 || static_cast<std::size_t>(v) >= vecs_.size())
    throw InvalidInput("deconv CPU backend: no vector " + std::to_string(v));
  return vecs_[static_cast<std::size_t>(v)].data();
}

template <class R>
void CpuVectors<R>::note_overflow(const char* what, std::int64_t count, double largest) {
  if (count == 0 || !pending_.empty()) return;
  pending_ = std::string(precision_name(R::precision)) + ": " + what;
  if constexpr (R::fp16) {
    pending_ += " overflowed FP16 (" + std::to_string(count) + " values";
    if (largest > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", largest);
      pending_ += ", largest " + std::string(buf);
    }
    pending_ += ")";
  } else {
    pending_ += " produced " + std::to_string(count) + " non-finite values";
  }
}

template <class R>
void CpuVectors<R>::throw_pending() {
  if (pending_.empty()) return;
  std::string message;
  message.swap(pending_);
  throw NumericalError(message);
}

template <class R>
template <class V>
void CpuVectors<R>::store_all(const V* values, T* out, const char* what) {
  // Two branch-free passes (they vectorize; one loop with the overflow branch ran 4x slower):
  // round every value, then count the results that are not finite.
  const bool parallel = static_cast<double>(n_) >= kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t i = 0; i < n_; ++i) {
    if constexpr (R::fp16 && std::is_same_v<V, double>)
      out[i] = static_cast<float>(Half(values[i]));  // one rounding from double
    else
      out[i] = R::store(static_cast<T>(values[i]));
  }
  std::int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (parallel)
  for (std::int64_t i = 0; i < n_; ++i)
    bad += !(std::fabs(out[i]) <= std::numeric_limits<T>::max());  // inf or NaN
  if (bad == 0) return;
  double largest = 0;  // the rare path: the size the overflowed results should have had
  for (std::int64_t i = 0; i < n_; ++i)
    if (!std::isfinite(out[i]) && std::isfinite(static_cast<double>(values[i])))
      largest = std::max(largest, std::fabs(static_cast<double>(values[i])));
  note_overflow(what, bad, largest);
}

template <class R>
double CpuVectors<R>::dot_raw(const T* a, const T* b) {
  throw_pending();
  std::vector<double> row_sums(static_cast<std::size_t>(rows_));
  if constexpr (std::is_same_v<R, HalfRules>) {
    double ma = 0, mb = 0;
    for (std::int64_t i = 0; i < n_; ++i) {
      ma = std::max(ma, static_cast<double>(std::fabs(a[i])));
      mb = std::max(mb, static_cast<double>(std::fabs(b[i])));
    }
    if (ma == 0 || mb == 0) return 0.0;
    const int ea = ceil_log2(ma), eb = ceil_log2(mb);
    const float sa = std::ldexp(1.0f, -ea), sb = std::ldexp(1.0f, -eb);
#pragma omp parallel for schedule(static) if (static_cast <double>(n_) >= kParallelWork)
    for (std::int64_t r = 0; r < rows_; ++r) {
      float s = 0;
      for (std::int64_t c = r * cols_; c < (r + 1) * cols_; ++c)
        s += round_to_half(round_to_half(a[c] * sa) * round_to_half(b[c] * sb));
      row_sums[static_cast<std::size_t>(r)] = s;
    }
    float total = 0;
    for (double s : row_sums) total += static_cast<float>(s);
    return std::ldexp(static_cast<double>(total), ea + eb);
  } else {
    using Acc = T;  // double for double; float for single and mixed
#pragma omp parallel for schedule(static) if (static_cast <double>(n_) >= kParallelWork)
    for (std::int64_t r = 0; r < rows_; ++r) {
      Acc s = 0;
      for (std::int64_t c = r * cols_; c < (r + 1) * cols_; ++c) s += a[c] * b[c];
      row_sums[static_cast<std::size_t>(r)] = static_cast<double>(s);
    }
    Acc total = 0;
    for (double s : row_sums) total += static_cast<Acc>(s);
    return static_cast<double>(total);
  }
}

template <class R>
double CpuVectors<R>::dot(Vec a, Vec b) {
  return dot_raw(data(a), data(b));
}

template <class R>
void CpuVectors<R>::axpby(double a, Vec x, double b, Vec y) {
  const T ra = R::scalar(a), rb = R::scalar(b);
  const T* px = data(x);
  T* py = data(y);
  // Unrounded results first (the arithmetic type's own roundings included), so store_all can
  // report how large an overflowed result should have been.
  using A = decltype(R::lin(ra, px[0], rb, py[0]));
  std::vector<A>& v = scratch<A>();
#pragma omp parallel for schedule(static) if (static_cast <double>(n_) >= kParallelWork)
  for (std::int64_t i = 0; i < n_; ++i)
    v[static_cast<std::size_t>(i)] = R::lin(ra, px[i], rb, py[i]);
  store_all(v.data(), py, "axpby");
}

template <class R>
void CpuVectors<R>::copy(Vec from, Vec to) {
  const T* src = data(from);
  std::copy_n(src, n_, data(to));
}

template <class R>
double CpuVectors<R>::max_abs(Vec x) {
  throw_pending();
  const T* p = data(x);
  double m = 0;
#pragma omp parallel for schedule(static) \
    reduction(max                         \
              : m) if (static_cast <double>(n_) >= kParallelWork)
  for (std::int64_t i = 0; i < n_; ++i) m = std::max(m, static_cast<double>(std::fabs(p[i])));
  return m;
}

template <class R>
void CpuVectors<R>::assign(const Array& src, double scale, double beta, Vec to) {
  if (src.ndim() != 2 || src.shape()[0] != rows_ || src.shape()[1] != cols_ ||
      !src.is_c_contiguous() || src.on_device())
    throw InvalidInput("deconv CPU backend: assign expects a host C-contiguous " +
                       std::to_string(rows_) + "x" + std::to_string(cols_) + " array, got " +
                       src.describe());
  T* out = data(to);
  // FP64 for double, FP32 otherwise (backend.hpp), one rounding to storage.
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A sc = static_cast<A>(scale), bt = static_cast<A>(beta);
  std::vector<A>& v = scratch<A>();
  auto combine = [&](auto* s) {
    for (std::int64_t i = 0; i < n_; ++i)
      v[static_cast<std::size_t>(i)] =
          sc * static_cast<A>(s[i]) + (bt == 0 ? A(0) : bt * static_cast<A>(out[i]));
  };
  switch (src.dtype()) {
    case DType::f64:
      combine(src.data_as<double>());
      break;
    case DType::f32:
      combine(src.data_as<float>());
      break;
    case DType::f16:
      combine(src.data_as<Half>());
      break;
    default:
      throw InvalidInput("deconv CPU backend: assign expects f64, f32 or f16, got " +
                         src.describe());
  }
  store_all(v.data(), out, "assign");
}

template <class R>
Array CpuVectors<R>::view(Vec x) {
  const T* p = data(x);
  Array out(storage_dtype(R::precision), {rows_, cols_});
  if constexpr (R::fp16) {
    Half* dst = out.data_as<Half>();
    for (std::int64_t i = 0; i < n_; ++i) dst[i] = Half(p[i]);  // exact: p holds FP16 values
  } else {
    std::copy_n(p, n_, out.data_as<T>());
  }
  return out;
}

template class CpuVectors<DoubleRules>;
template class CpuVectors<SingleRules>;
template class CpuVectors<MixedRules>;
template class CpuVectors<HalfRules>;
template void CpuVectors<DoubleRules>::store_all(const double*, double*, const char*);
template void CpuVectors<SingleRules>::store_all(const float*, float*, const char*);
template void CpuVectors<SingleRules>::store_all(const double*, float*, const char*);
template void CpuVectors<MixedRules>::store_all(const float*, float*, const char*);
template void CpuVectors<MixedRules>::store_all(const double*, float*, const char*);
template void CpuVectors<HalfRules>::store_all(const float*, float*, const char*);
template void CpuVectors<HalfRules>::store_all(const double*, float*, const char*);

}  // namespace halfscope::deconv::detail
