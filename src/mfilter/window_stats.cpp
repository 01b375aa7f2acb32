// CPU window energies (see window_stats.hpp for the error bound and the flat rule).
#include "mfilter/window_stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::mfilter {

namespace {

// Neumaier's compensated sum: the running error `c` catches what each addition rounds away, also
// when the new term is larger than the sum (where Kahan's version loses it).
struct Neumaier {
  double s = 0, c = 0;
  void add(double v) {
    const double t = s + v;
    c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  [[nodiscard]] double value() const { return s + c; }
};

// Windows [first, first + count) (first a multiple of kRecomputeEvery); inv_norm[j] is window
// first + j. The running sums restart at `first` as they do there over every window, and the flat
// trackers start from their exact values, so every value equals the whole range's.
template <class T>
void inv_norms(const T* x, std::int64_t L, std::int64_t K, MfNormalize normalize, double offset,
               std::int64_t first, std::int64_t count, double* inv_norm) {
  const std::int64_t windows = L - K + 1;
  const bool full = normalize == MfNormalize::Full;
  const double kd = static_cast<double>(K);
  if (count <= 0) return;
  if (first < 0 || first % kRecomputeEvery != 0 || first + count > windows)
    throw Error("window_inv_norms: windows [" + std::to_string(first) + ", " +
                std::to_string(first + count) + ") of " + std::to_string(windows) +
                ": expected a range starting on a multiple of " + std::to_string(kRecomputeEvery));
  // Exact flatness trackers: the non-zero count in the window (short) and the length of the run
  // of equal samples ending at the window's last sample (full), capped at K: only run >= K
  // matters, and a capped run decides every later window alike.
  std::int64_t nonzero = 0, run = 1;
  for (std::int64_t k = first; k < first + K; ++k) nonzero += x[k] != 0;
  for (std::int64_t k = first + K - 1; k > 0 && run < K && x[k - 1] == x[k]; --k) ++run;
  const std::int64_t last = first + count;
  for (std::int64_t s0 = first; s0 < last; s0 += kRecomputeEvery) {
    const double shift = full ? static_cast<double>(x[s0]) : 0.0;
    Neumaier s1, s2, raw;
    for (std::int64_t k = 0; k < K; ++k) {
      const double v = static_cast<double>(x[s0 + k]), y = v - shift;
      s1.add(y);
      s2.add(y * y);
      raw.add((v + offset) * (v + offset));
    }
    const std::int64_t s_end = std::min(last, s0 + kRecomputeEvery);
    for (std::int64_t s = s0; s < s_end; ++s) {
      if (s > s0) {  // slide by one: add sample s + K - 1, drop sample s - 1
        const double vin = static_cast<double>(x[s + K - 1]), vout = static_cast<double>(x[s - 1]);
        const double yin = vin - shift, yout = vout - shift;
        s1.add(yin);
        s1.add(-yout);
        s2.add(yin * yin);
        s2.add(-(yout * yout));
        raw.add((vin + offset) * (vin + offset));
        raw.add(-((vout + offset) * (vout + offset)));
      }
      // The exact flatness trackers slide on every window after the first, restart or not (they
      // are never recomputed, so skipping the slide at a restart would shift them for good).
      if (s > first) {
        nonzero += (x[s + K - 1] != 0) - (x[s - 1] != 0);
        run = x[s + K - 1] == x[s + K - 2] ? std::min(run + 1, K) : 1;
      }
      double energy = 0;
      bool flat = false;
      if (full) {
        const double m1 = s1.value();
        energy = std::max(0.0, s2.value() - m1 * m1 / kd);
        flat = run >= K || energy <= kFlatRelative * std::max(0.0, raw.value());
      } else {
        energy = std::max(0.0, s2.value());
        flat = nonzero == 0 || energy == 0;
      }
      inv_norm[s - first] = flat ? 0.0 : 1.0 / std::sqrt(energy);
    }
  }
}

template <class T>
double template_norm(const T* t, std::int64_t K) {
  double e = 0;
  for (std::int64_t k = 0; k < K; ++k) e += static_cast<double>(t[k]) * static_cast<double>(t[k]);
  return e > 0 ? 1.0 / std::sqrt(e) : 0.0;
}

}  // namespace

void window_inv_norms(const float* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double* inv_norm, double offset) {
  inv_norms(x, L, K, normalize, offset, 0, L - K + 1, inv_norm);
}
void window_inv_norms(const double* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double* inv_norm, double offset) {
  inv_norms(x, L, K, normalize, offset, 0, L - K + 1, inv_norm);
}
void window_inv_norms(const float* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double offset, std::int64_t first, std::int64_t count, double* inv_norm) {
  inv_norms(x, L, K, normalize, offset, first, count, inv_norm);
}
void window_inv_norms(const double* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double offset, std::int64_t first, std::int64_t count, double* inv_norm) {
  inv_norms(x, L, K, normalize, offset, first, count, inv_norm);
}
double template_inv_norm(const float* t, std::int64_t K) {
  return template_norm(t, K);
}
double template_inv_norm(const double* t, std::int64_t K) {
  return template_norm(t, K);
}

}  // namespace halfscope::mfilter
