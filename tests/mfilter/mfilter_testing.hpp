// Shared by every matched-filtering test (CPU and GPU): an FP64 reference written from the formula
// of include/halfscope/mfilter.hpp alone (direct sums in long double, no running sums, no code
// shared with the library), reproducible random cases, cases with planted events, conversions to
// Arrays, and the error bound each precision is tested against.
//
// Error bound (cc_error_bound). For one channel, CC = sum_k T_k S_k / sqrt(E_T E_S). Let u_s be
// the unit roundoff of the operands as the method stores them and u_a that of the accumulation.
// Rounding each operand perturbs every product by at most 2 u_s |T_k S_k| (first order), and a
// recursive sum of n terms errs by at most gamma_n(u_a) sum |terms| <= n u_a / (1 - n u_a) sum |.|.
// By Cauchy-Schwarz sum_k |T_k S_k| <= sqrt(E_T E_S), so both terms are bounded relative to the
// denominator, i.e. directly in CC units:
//     |CC - CC_exact| <= 2 u_s + gamma_n(u_a) + 4 u_32 + underflow
// where 4 u_32 covers the FP32 inverse norms and the FP32 output (energies are FP64), n is the
// number of terms each output sums (K; 3K for split's three products; K + 1 for half, whose
// products are rounded too), and `underflow` bounds FP16 subnormal rounding: each rounded operand
// or product may err by 2^-25 in scaled units where the scaled maxima are >= 1, so
//     underflow <= 3 K 2^-25 q,   q = max|T| max|S| / min sqrt(E_T E_S)
// (q is computed by `underflow_ratio` from the case; for the locally scaled precisions the global
// maxima over-estimate the block maxima, so the bound stays valid). Split's operands are
// hi + lo with |x - hi - lo| <= u_h^2 |x| and the dropped lo*lo term <= u_h^2 |T S|, so its
// u_s is 2 u_h^2 (plus the FP32 rounding of the input when it arrives in double: 2 u_32).
// Network sums add sum_c |w_c| times the per-channel bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::mftest {

/// One matched-filtering problem in FP64: templates (T, C, K), data (C, L), moveouts and weights
/// (T, C), all C-contiguous.
struct Case {
  std::int64_t T = 0, C = 0, K = 0, L = 0;
  std::vector<double> templates, data, weights;
  std::vector<std::int64_t> moveouts;
};

/// n_corr from the formula itself.
inline std::int64_t n_corr_of(std::int64_t L, std::int64_t K, std::int64_t step) {
  return (L - K) / step + 1;
}

/// CC of one template channel against one window starting at `s`, straight from the definition
/// in long double (demeaned first in full normalization). 0 outside the data and for flat
/// windows or templates (kFlatRelative rule of src/mfilter/backends.hpp, restated here:
/// energy <= 1e-12 * sum of squares before demeaning, or zero). Clamped to [-1, 1].
inline double reference_channel_cc(const double* t, const double* x, std::int64_t K, std::int64_t L,
                                   std::int64_t s, MfNormalize normalize) {
  if (s < 0 || s + K > L) return 0.0;
  long double mt = 0, mx = 0;
  if (normalize == MfNormalize::Full) {
    for (std::int64_t k = 0; k < K; ++k) {
      mt += t[k];
      mx += x[s + k];
    }
    mt /= static_cast<long double>(K);
    mx /= static_cast<long double>(K);
  }
  long double num = 0, et = 0, ex = 0, rawt = 0, rawx = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    const long double a = t[k] - mt, b = x[s + k] - mx;
    num += a * b;
    et += a * a;
    ex += b * b;
    rawt += static_cast<long double>(t[k]) * t[k];
    rawx += static_cast<long double>(x[s + k]) * x[s + k];
  }
  const long double flat = 1e-12L;
  if (et == 0 || ex == 0 || et <= flat * rawt || ex <= flat * rawx) return 0.0;
  const double cc = static_cast<double>(num / std::sqrt(et * ex));
  return std::clamp(cc, -1.0, 1.0);
}

/// The FP64 reference: (T, n_corr) network stack or (T, C, n_corr) per-channel CC (unweighted).
inline std::vector<double> reference_cc(const Case& c, MfNormalize normalize, std::int64_t step,
                                        bool network_sum) {
  const std::int64_t n = n_corr_of(c.L, c.K, step);
  std::vector<double> out(static_cast<std::size_t>(network_sum ? c.T * n : c.T * c.C * n), 0.0);
  for (std::int64_t t = 0; t < c.T; ++t)
    for (std::int64_t ch = 0; ch < c.C; ++ch) {
      const double* tp = c.templates.data() + (t * c.C + ch) * c.K;
      const double* xp = c.data.data() + ch * c.L;
      const std::int64_t mo = c.moveouts[static_cast<std::size_t>(t * c.C + ch)];
      const double w = c.weights[static_cast<std::size_t>(t * c.C + ch)];
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = reference_channel_cc(tp, xp, c.K, c.L, i * step + mo, normalize);
        if (network_sum)
          out[static_cast<std::size_t>(t * n + i)] += w * v;
        else
          out[static_cast<std::size_t>((t * c.C + ch) * n + i)] = v;
      }
    }
  return out;
}

/// Random case: templates and data uniform in [-amplitude, amplitude] (never exact zeros),
/// moveouts 0 and weights 1 unless set by the caller afterwards.
inline Case random_case(std::int64_t T, std::int64_t C, std::int64_t K, std::int64_t L,
                        std::uint64_t seed, double amplitude = 1.0) {
  Case c;
  c.T = T, c.C = C, c.K = K, c.L = L;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-amplitude, amplitude);
  c.templates.resize(static_cast<std::size_t>(T * C * K));
  c.data.resize(static_cast<std::size_t>(C * L));
  for (auto& v : c.templates) v = u(rng);
  for (auto& v : c.data) v = u(rng);
  c.moveouts.assign(static_cast<std::size_t>(T * C), 0);
  c.weights.assign(static_cast<std::size_t>(T * C), 1.0);
  return c;
}

/// Random moveouts in [lo, hi] and weights in [0.25, 1.5] (reproducible).
inline void randomize_network(Case& c, std::int64_t lo, std::int64_t hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> m(lo, hi);
  std::uniform_real_distribution<double> w(0.25, 1.5);
  for (auto& v : c.moveouts) v = m(rng);
  for (auto& v : c.weights) v = w(rng);
}

/// An event planted in a case: template `t` at data sample `sample` (before moveouts), scaled
/// by `scale` on every channel.
struct PlantedEvent {
  std::int64_t t = 0, sample = 0;
  double scale = 1.0;
};

/// Gaussian noise of standard deviation `noise` plus each event's template copies added at
/// sample + moveout[t, c] on channel c (the caller sets the moveouts before). With noise << scale
/// the per-channel CC at the event is close to 1, so the stack is close to sum_c w[t, c].
inline void plant_events(Case& c, const std::vector<PlantedEvent>& events, double noise,
                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, noise);
  for (auto& v : c.data) v = g(rng);
  for (const auto& e : events)
    for (std::int64_t ch = 0; ch < c.C; ++ch) {
      const std::int64_t s = e.sample + c.moveouts[static_cast<std::size_t>(e.t * c.C + ch)];
      for (std::int64_t k = 0; k < c.K; ++k)
        if (s + k >= 0 && s + k < c.L)
          c.data[static_cast<std::size_t>(ch * c.L + s + k)] +=
              e.scale * c.templates[static_cast<std::size_t>((e.t * c.C + ch) * c.K + k)];
    }
}

/// A host Array of `dtype` holding `values` (rounded to nearest even) with `shape`.
inline Array to_array(const std::vector<double>& values, Shape shape, DType dtype = DType::f32) {
  Array a = Array::from_values<double>(std::span<const double>(values), std::move(shape));
  return dtype == DType::f64 ? a : a.astype(dtype);
}

/// The network of a case as Arrays: moveouts int64 (T, C), weights float32 (T, C).
inline MfNetwork network_of(const Case& c) {
  MfNetwork n;
  n.moveouts =
      Array::from_values<std::int64_t>(std::span<const std::int64_t>(c.moveouts), {c.T, c.C});
  n.weights = to_array(c.weights, {c.T, c.C});
  return n;
}

/// The case with its data and templates rounded to float32 and back: the reference for methods
/// that take float32 input is computed on what they actually see.
inline Case rounded_to_float(Case c) {
  for (auto& v : c.templates) v = static_cast<double>(static_cast<float>(v));
  for (auto& v : c.data) v = static_cast<double>(static_cast<float>(v));
  return c;
}

/// q = max|T| max|S| / min over windows of sqrt(E_T E_S) (see the header comment); uses every
/// window of every channel and every template channel.
inline double underflow_ratio(const Case& c) {
  double mt = 0, mx = 0, et_min = std::numeric_limits<double>::infinity();
  double ex_min = et_min;
  for (double v : c.templates) mt = std::max(mt, std::fabs(v));
  for (double v : c.data) mx = std::max(mx, std::fabs(v));
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    double e = 0;
    for (std::int64_t k = 0; k < c.K; ++k)
      e += c.templates[static_cast<std::size_t>(j * c.K + k)] *
           c.templates[static_cast<std::size_t>(j * c.K + k)];
    if (e > 0) et_min = std::min(et_min, e);  // a zero template gives CC = 0 exactly
  }
  for (std::int64_t ch = 0; ch < c.C; ++ch)
    for (std::int64_t s = 0; s + c.K <= c.L; ++s) {
      double e = 0;
      for (std::int64_t k = 0; k < c.K; ++k) {
        const double v = c.data[static_cast<std::size_t>(ch * c.L + s + k)];
        e += v * v;
      }
      if (e > 0) ex_min = std::min(ex_min, e);  // an all-zero window gives CC = 0 exactly
    }
  if (!std::isfinite(et_min) || !std::isfinite(ex_min)) return 1.0;  // nothing is computed
  return mt * mx / std::sqrt(et_min * ex_min);
}

/// The bound of the header comment for one channel's CC, for a method running `p` with
/// templates of K samples; q from underflow_ratio (only the FP16-based precisions use it).
inline double cc_error_bound(Precision p, std::int64_t K, double q = 1.0) {
  const double u32 = 0x1p-24, uh = 0x1p-11, ub = 0x1p-8, u64 = 0x1p-53;
  const auto gamma = [](double n, double u) { return n * u / (1.0 - n * u); };
  const double kd = static_cast<double>(K);
  const double underflow = 3.0 * kd * 0x1p-25 * q;
  switch (p) {
    case Precision::Double:
      return gamma(kd, u64) + 4 * u32;  // output rounding dominates
    case Precision::Single:
    case Precision::TF32:
      return 2 * u32 + gamma(kd, u32) + 4 * u32;
    case Precision::Mixed:
      return 2 * uh + gamma(kd, u32) + 4 * u32 + underflow;
    case Precision::BF16:
      return 2 * ub + gamma(kd, u32) + 4 * u32;
    case Precision::Split:
      return 2 * uh * uh + 2 * u32 + gamma(3 * kd, u32) + 4 * u32 + underflow;
    case Precision::Half:
      return 2 * uh + gamma(kd + 1, uh) + 4 * u32 + underflow;
  }
  return 1.0;
}

/// Full normalization multiplies the raw window (not the demeaned one) by the demeaned template,
/// so Cauchy-Schwarz bounds the rounding errors by sqrt(E_T sum S^2) instead of sqrt(E_T E_S):
/// the per-channel bound grows by this factor, max over windows sqrt(sum S^2 / E_S) (1 for
/// short normalization; close to 1 for zero-mean data).
inline double full_normalization_factor(const Case& c, MfNormalize normalize) {
  if (normalize == MfNormalize::Short) return 1.0;
  double worst = 1.0;
  for (std::int64_t ch = 0; ch < c.C; ++ch)
    for (std::int64_t s = 0; s + c.K <= c.L; ++s) {
      double raw = 0, mean = 0;
      for (std::int64_t k = 0; k < c.K; ++k)
        mean += c.data[static_cast<std::size_t>(ch * c.L + s + k)];
      mean /= static_cast<double>(c.K);
      double e = 0;
      for (std::int64_t k = 0; k < c.K; ++k) {
        const double v = c.data[static_cast<std::size_t>(ch * c.L + s + k)];
        raw += v * v;
        e += (v - mean) * (v - mean);
      }
      // Flat windows (the reference's rule, up to the rounding of this mean) give CC = 0 on
      // both sides: no rounding error to bound there.
      if (e > 1e-12 * raw) worst = std::max(worst, std::sqrt(raw / e));
    }
  return worst;
}

/// The bound for a network stack: sum_c |w[t, c]| times the channel bound, maximized over t.
inline double stack_error_bound(const Case& c, double channel_bound) {
  double worst = 0;
  for (std::int64_t t = 0; t < c.T; ++t) {
    double s = 0;
    for (std::int64_t ch = 0; ch < c.C; ++ch)
      s += std::fabs(c.weights[static_cast<std::size_t>(t * c.C + ch)]);
    worst = std::max(worst, s);
  }
  return worst * channel_bound;
}

/// The case with every template channel demeaned (what full normalization rounds and
/// multiplies; its underflow_ratio is the one the FP16 methods see in full mode).
inline Case with_demeaned_templates(Case c) {
  for (std::int64_t j = 0; j < c.T * c.C; ++j) {
    double m = 0;
    for (std::int64_t k = 0; k < c.K; ++k) m += c.templates[static_cast<std::size_t>(j * c.K + k)];
    m /= static_cast<double>(c.K);
    for (std::int64_t k = 0; k < c.K; ++k) c.templates[static_cast<std::size_t>(j * c.K + k)] -= m;
  }
  return c;
}

/// The case as dispatch hands it to the backends, up to scaling (which changes no CC and no
/// ratio the bounds use): in full normalization every template channel and every data channel
/// (over the whole channel) demeaned in FP64; the case itself in short normalization. Tests that
/// go through matched_filter take underflow_ratio and full_normalization_factor of this case:
/// the operands are rounded relative to |S - mean|, so a large offset costs no accuracy.
inline Case as_dispatched(Case c, MfNormalize normalize) {
  if (normalize == MfNormalize::Short) return c;
  c = with_demeaned_templates(std::move(c));
  for (std::int64_t ch = 0; ch < c.C; ++ch) {
    double m = 0;
    for (std::int64_t k = 0; k < c.L; ++k) m += c.data[static_cast<std::size_t>(ch * c.L + k)];
    m /= static_cast<double>(c.L);
    for (std::int64_t k = 0; k < c.L; ++k) c.data[static_cast<std::size_t>(ch * c.L + k)] -= m;
  }
  return c;
}

/// The per-channel bound of a CPU precision on a case run through matched_filter (dispatch
/// demeans the data in full normalization: as_dispatched).
inline double dispatched_cc_error_bound(Precision p, const Case& c, MfNormalize normalize) {
  const Case d = as_dispatched(c, normalize);
  return cc_error_bound(p, c.K, underflow_ratio(d)) * full_normalization_factor(d, normalize);
}

/// Per-channel bound of a GPU or CPU method on a case (the same derivations as
/// tests/mfilter/gpu_baselines.cpp's header): direct, naive, cublas1 and the tensor precisions:
/// cc_error_bound of the precision; cublas2: the mixed bound (FP16 operands, FP32 sums);
/// cublas3: plus the FP16 rounding of the dot product (u_h, and 2^-25 q below FP16's normal
/// range); cublas4: the half bound plus the same output terms; fft: Higham's radix-2 bound
/// (15 log2 N + 2) u_32 sqrt(N) max|S| sqrt(K) max ||T|| / min sqrt(E_T E_S) + 4 u_32, with N the
/// transform length (`fft_length`). Times full_normalization_factor. For calls through
/// matched_filter (dispatch demeans the data in full normalization): the q and the factor are
/// those of as_dispatched(c).
inline double method_error_bound(MfMethod m, Precision p, const Case& case_in,
                                 MfNormalize normalize, std::int64_t fft_length = 0) {
  const double uh = 0x1p-11, u32 = 0x1p-24;
  const Case c = as_dispatched(case_in, normalize);
  const double q = underflow_ratio(c);
  double b = 0;
  switch (m) {
    case MfMethod::Cublas2:
      b = cc_error_bound(Precision::Mixed, c.K, q);
      break;
    case MfMethod::Cublas3:
      b = cc_error_bound(Precision::Mixed, c.K, q) + uh + 0x1p-25 * q;
      break;
    case MfMethod::Cublas4:
      b = cc_error_bound(Precision::Half, c.K, q) + uh + 0x1p-25 * q;
      break;
    case MfMethod::FFT: {
      const double n = static_cast<double>(fft_length);
      double max_s = 0, max_abs_t = 0, max_norm_t = 0;
      for (double v : c.data) max_s = std::max(max_s, std::fabs(v));
      for (double v : c.templates) max_abs_t = std::max(max_abs_t, std::fabs(v));
      for (std::int64_t j = 0; j < c.T * c.C; ++j) {
        double e = 0;
        for (std::int64_t k = 0; k < c.K; ++k)
          e += c.templates[static_cast<std::size_t>(j * c.K + k)] *
               c.templates[static_cast<std::size_t>(j * c.K + k)];
        max_norm_t = std::max(max_norm_t, std::sqrt(e));
      }
      const double min_norms = max_abs_t * max_s / underflow_ratio(c);  // min sqrt(E_T E_S)
      b = (15 * std::log2(n) + 2) * u32 * std::sqrt(n) * max_s *
              std::sqrt(static_cast<double>(c.K)) * max_norm_t / min_norms +
          4 * u32;
      break;
    }
    default:
      b = cc_error_bound(p, c.K, q);
      break;
  }
  return b * full_normalization_factor(c, normalize);
}

/// max_i |got_i - want_i| of a host float32 result against the reference; +inf when the sizes
/// differ or a value is not finite (so a comparison against it fails loudly).
inline double max_abs_error(const Array& got, const std::vector<double>& want) {
  const Array h = got.on_device() ? got.to(Memory::host) : got;
  if (h.size() != static_cast<std::int64_t>(want.size()))
    return std::numeric_limits<double>::infinity();
  const Array f = h.dtype() == DType::f32 ? h.contiguous() : h.astype(DType::f32);
  const float* p = f.data_as<float>();
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(p[i]) - want[i]);
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace halfscope::mftest
