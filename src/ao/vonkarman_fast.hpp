// A fast FP64 von Karman structure function for the covariance generator. The reference
// (turbulence.hpp) computes in long double with a trapezoidal rule of up to ~60 exp / cosh
// evaluations and checks its arguments: ~20 us per call measured on the (loaded) build machine,
// while the mid system needs ~1.3e9 calls. Here D(r; L0) = k1 L0^(5/3) G(x), x = 2 pi r / L0,
// r0 = 1 m, with
//   x < 0.5        D = K r^(5/3) [P(y) / p_0 - y^(1/6) Q(y) / p_0], y = x^2 / 4, K = 6.88388 (the
//                  series of turbulence.cpp with its leading term factored out; in double the two
//                  parts cancel by at most ~3x, y^(1/6) / (1 - y^(1/6)) at y = 1/16)
//   0.5 <= x < 32  G from degree-10 polynomials on 8 equal pieces per octave, fitted once at
//                  start-up by Chebyshev interpolation of the reference's own G (G is analytic for
//                  x > 0; a piece is 1/16 of its distance to the branch point x = 0 wide, so the
//                  Bernstein ellipse has radius 17 + sqrt(288) ~ 34 and degree 10 truncates at
//                  34^-11 ~ 1e-17). The piece comes from the exponent and mantissa bits of x.
//   x >= 32        limit - x^(5/6) K_{5/6}(x) by 5 terms of the asymptotic expansion (the
//                  subtracted part is < 1e-13 of G)
// Measured: ~18 ns per call on the loaded build machine; max |D_fast - D_ref| / D_ref = 1.2e-15
// over x in [1e-5, 100] (the small-x branch: about 5 roundings of K r^(5/3)), 4.3e-16 for
// x >= 0.5 (tests/ao/test_covariance_model.cpp asserts <= 2e-15).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

namespace halfscope::ao::detail {

/// The fast evaluator of G(x) = Gamma(5/6) 2^(-1/6) - x^(5/6) K_{5/6}(x) and of D.
class VonKarmanFast {
 public:
  /// The shared instance (coefficients built once, thread-safe static initialisation).
  static const VonKarmanFast& instance();

  /// G(x) for x >= 0 (no argument checks: internal callers pass valid separations).
  [[nodiscard]] double bracket(double x) const noexcept;

  /// D_1(r; L0) for r0 = 1 m: r >= 0, L0 > 0 finite or +inf (Kolmogorov).
  [[nodiscard]] double structure(double r, double L0) const noexcept;

  /// k1 L0^(5/3) (the factor in front of G), or 0 for L0 = +inf.
  [[nodiscard]] static double scale(double L0) noexcept;

  /// The Kolmogorov constant 2 (24/5 Gamma(6/5))^(5/6) = 6.88388...
  [[nodiscard]] double kolmogorov() const noexcept { return kolmogorov_; }

  /// D from a precomputed scale(L0) (the per-layer hot path): x = r * (2 pi / L0).
  [[nodiscard]] double structure_scaled(double r, double two_pi_over_L0,
                                        double scale) const noexcept {
    if (scale == 0.0) return kolmogorov_ * kolmogorov_power(r);
    const double x = r * two_pi_over_L0;
    if (x < kSeriesMax) return small_separation(r, x);
    if (x < kPiecewiseMax) return scale * piecewise(x);
    return scale * bracket(x);
  }

 private:
  VonKarmanFast();
  static double kolmogorov_power(double r) noexcept;
  // D below the Chebyshev range as the Kolmogorov term times the series' correction, so that
  // the rounding of x (~2 ulp) only enters the correction.
  [[nodiscard]] double small_separation(double r, double x) const noexcept;

  static constexpr double kSeriesMax = 0.5;  // below: the series; above: Chebyshev pieces

  // Pieces: kPerOctave equal pieces per octave of x over [kSeriesMax, kSeriesMax 2^kOctaves).
  static constexpr int kOctaves = 6;    // up to x = 32
  static constexpr int kPerOctave = 8;  // a piece is 1/16 of its distance to x = 0 wide
  static constexpr int kDegree = 10;
  static constexpr int kSeriesTerms = 13;
  static constexpr double kPiecewiseMax = kSeriesMax * (1 << kOctaves);  // above: asymptotic
  // Polynomial in s in [-1, 1] (monomial coefficients, Horner) per piece.
  std::array<std::array<double, kDegree + 1>, kOctaves * kPerOctave> poly_{};

  /// G on [kSeriesMax, kPiecewiseMax), inline for the hot path. x = m 2^e with m in [0.5, 1):
  /// the octave is e (kSeriesMax = 0.5 2^0), the piece within it floor(16 (m - 0.5)), s in
  /// [-1, 1) its local coordinate; the bit manipulations and every step are exact.
  [[nodiscard]] double piecewise(double x) const noexcept {
    static_assert(kSeriesMax == 0.5,
                  "the octave index below assumes pieces start at 0.5 = 0.5 2^0");
    const auto bits = std::bit_cast<std::uint64_t>(x);
    const int e = static_cast<int>((bits >> 52) & 0x7ff) - 1022;
    const double m =
        std::bit_cast<double>((bits & 0x000fffffffffffffULL) | (std::uint64_t{1022} << 52));
    const double u = (m - 0.5) * (2 * kPerOctave);
    const int j = static_cast<int>(u);
    const double s = 2.0 * (u - j) - 1.0;
    const auto& c = poly_[static_cast<std::size_t>(e * kPerOctave + j)];
    double acc = c[kDegree];
    for (int k = kDegree - 1; k >= 0; --k) acc = acc * s + c[static_cast<std::size_t>(k)];
    return acc;
  }
  std::array<double, kSeriesTerms> series_p_{}, series_q_{};
  std::array<double, kSeriesTerms> relative_p_{}, relative_q_{};  // divided by p_0
  double series_c_ = 0, limit_ = 0, kolmogorov_ = 0;
};

/// Per-layer evaluator for slope_model.hpp: d(r, layer) with each layer's 2 pi / L0 and scale.
class LayerStructure {
 public:
  explicit LayerStructure(const std::vector<double>& outer_scales);
  double operator()(double r, std::int64_t layer) const noexcept {
    const auto l = static_cast<std::size_t>(layer);
    return fast_->structure_scaled(r, two_pi_over_L0_[l], scale_[l]);
  }

 private:
  const VonKarmanFast* fast_;
  std::vector<double> two_pi_over_L0_, scale_;
};

}  // namespace halfscope::ao::detail
