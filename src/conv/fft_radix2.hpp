// Internal: a radix-2 complex FFT templated on its arithmetic type, to emulate an FP16 FFT on the
// CPU (T = Half: every operation rounded to FP16) and to test the algorithm itself (T = double).
//
// Iterative decimation in time: bit-reversal permutation, then log2(n) stages of butterflies
//   t = w * b;  a' = a + t;  b' = a - t
// with the complex product (ar*br - ai*bi, ar*bi + ai*br) as four products and two sums, each
// rounded separately in T (no fused multiply-add). Twiddles w_k = exp(-+2 pi i k / n) are computed
// in double and rounded to T once. The transform is unnormalised in both directions.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/core/error.hpp"

namespace halfscope::conv::cpu {

template <class T>
struct Complex {
  T re{}, im{};
};

template <class T>
inline Complex<T> operator*(Complex<T> a, Complex<T> b) noexcept {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <class T>
inline Complex<T> operator+(Complex<T> a, Complex<T> b) noexcept {
  return {a.re + b.re, a.im + b.im};
}
template <class T>
inline Complex<T> operator-(Complex<T> a, Complex<T> b) noexcept {
  return {a.re - b.re, a.im - b.im};
}

/// True for 1, 2, 4, 8, ...
constexpr bool is_pow2(std::int64_t n) noexcept {
  return n > 0 && (n & (n - 1)) == 0;
}

/// log2 of a power of two.
constexpr int log2_exact(std::int64_t n) noexcept {
  int k = 0;
  while ((std::int64_t{1} << k) < n) ++k;
  return k;
}

/// Twiddles and bit-reversal table of one power-of-two length; transform() is const and
/// thread-safe (each caller brings its own data).
template <class T>
class Radix2Fft {
 public:
  explicit Radix2Fft(std::int64_t n) : n_(n) {
    if (!is_pow2(n))
      throw InvalidInput("radix-2 FFT: length " + std::to_string(n) + " is not a power of two");
    const auto half = static_cast<std::size_t>(n / 2);
    fwd_.resize(half);
    inv_.resize(half);
    for (std::size_t k = 0; k < half; ++k) {
      const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
      fwd_[k] = {T(std::cos(a)), T(-std::sin(a))};
      inv_[k] = {T(std::cos(a)), T(std::sin(a))};
    }
    rev_.resize(static_cast<std::size_t>(n));
    const int bits = log2_exact(n);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      rev_[static_cast<std::size_t>(i)] = r;
    }
  }

  [[nodiscard]] std::int64_t size() const noexcept { return n_; }

  /// In-place transform of x[0, n): forward uses exp(-2 pi i k / n), inverse exp(+...).
  void transform(Complex<T>* x, bool inverse) const noexcept {
    for (std::int64_t i = 0; i < n_; ++i) {
      const std::int64_t r = rev_[static_cast<std::size_t>(i)];
      if (r > i) std::swap(x[i], x[r]);
    }
    const std::vector<Complex<T>>& tw = inverse ? inv_ : fwd_;
    for (std::int64_t len = 2; len <= n_; len <<= 1) {
      const std::int64_t half = len / 2, step = n_ / len;
      for (std::int64_t i = 0; i < n_; i += len) {
        for (std::int64_t k = 0; k < half; ++k) {
          const Complex<T> t = tw[static_cast<std::size_t>(k * step)] * x[i + k + half];
          const Complex<T> a = x[i + k];
          x[i + k] = a + t;
          x[i + k + half] = a - t;
        }
      }
    }
  }

 private:
  std::int64_t n_;
  std::vector<Complex<T>> fwd_, inv_;
  std::vector<std::int64_t> rev_;
};

}  // namespace halfscope::conv::cpu
