// The per-channel facts and factors of matched-filtering data (data_factors.hpp).
#include "mfilter/data_factors.hpp"

#include <algorithm>
#include <cmath>

namespace halfscope::mfilter {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

template <class V>
RangeScan scan(const V* x, std::int64_t n, std::int64_t first) {
  RangeScan s;
  // Two passes where the data are bad, one where they are not (the common case): min and max
  // vectorize, and NaN compares false so it leaves them alone; a non-finite value shows as an
  // infinite min or max or as a NaN the finite test below finds.
  V lo = std::numeric_limits<V>::infinity(), hi = -std::numeric_limits<V>::infinity();
  bool nan = false;
  for (std::int64_t k = 0; k < n; ++k) {
    lo = x[k] < lo ? x[k] : lo;
    hi = x[k] > hi ? x[k] : hi;
    nan |= x[k] != x[k];
  }
  if (nan || std::isinf(lo) || std::isinf(hi)) {
    const V* bad = std::find_if(x, x + n, [](V v) { return !std::isfinite(v); });
    s.first_bad = first + (bad - x);
    s.bad_value = static_cast<double>(*bad);
    lo = std::numeric_limits<V>::infinity();
    hi = -lo;
    for (std::int64_t k = 0; k < n; ++k)
      if (std::isfinite(x[k])) {
        lo = std::min(lo, x[k]);
        hi = std::max(hi, x[k]);
      }
  }
  s.min = static_cast<double>(lo);
  s.max = static_cast<double>(hi);
  return s;
}

template <class V>
double sum_block(const V* x, std::int64_t n, double pre) {
  // Four chains hide the latency of the dependent FP64 additions; the order is fixed.
  double s[4] = {0, 0, 0, 0};
  std::int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(x[k + j]) * pre;
  for (int j = 0; k < n; ++k, ++j) s[j] += static_cast<double>(x[k]) * pre;
  return (s[0] + s[1]) + (s[2] + s[3]);
}

template <class V, class Out>
void convert(const V* x, std::int64_t n, const ChannelFactors& f, Out* out) {
  for (std::int64_t k = 0; k < n; ++k) {
    const double shifted = static_cast<double>(x[k]) * f.pre - f.mean;
    out[k] = static_cast<Out>(shifted * f.post);
  }
}

}  // namespace

double power_of_two_outside(double max_abs, double lo, double hi) {
  if (max_abs == 0 || (max_abs >= lo && max_abs <= hi)) return 1.0;
  int e = 0;
  (void)std::frexp(max_abs, &e);
  return std::ldexp(1.0, -e);
}

void RangeScan::merge(const RangeScan& other) noexcept {
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  if (other.first_bad >= 0 && (first_bad < 0 || other.first_bad < first_bad)) {
    first_bad = other.first_bad;
    bad_value = other.bad_value;
  }
}

RangeScan scan_range(const float* x, std::int64_t n, std::int64_t first) {
  return scan(x, n, first);
}
RangeScan scan_range(const double* x, std::int64_t n, std::int64_t first) {
  return scan(x, n, first);
}

double block_sum(const float* x, std::int64_t n, double pre) {
  return sum_block(x, n, pre);
}
double block_sum(const double* x, std::int64_t n, double pre) {
  return sum_block(x, n, pre);
}

double pre_factor(const RangeScan& whole) {
  if (!(whole.min <= whole.max)) return 1.0;  // no finite sample
  return power_of_two_outside(std::max(std::fabs(whole.min), std::fabs(whole.max)), 0x1p-960,
                              0x1p+960);
}

std::vector<double> offsets_of(const std::vector<ChannelFactors>& factors) {
  std::vector<double> out(factors.size());
  std::transform(factors.begin(), factors.end(), out.begin(),
                 [](const ChannelFactors& f) { return f.offset(); });
  return out;
}

ChannelFactors channel_factors(const RangeScan& whole, double pre, double mean) {
  ChannelFactors f;
  f.pre = pre;
  f.mean = mean;
  if (whole.min <= whole.max) {
    const double hi =
        std::max(std::fabs(whole.max * pre - mean), std::fabs(whole.min * pre - mean));
    f.post = power_of_two_outside(hi, kDataBandLow, kDataBandHigh);
  }
  return f;
}

std::vector<RangeScan> scan_rows(const Array& x, std::int64_t first) {
  const std::int64_t C = x.dim(0), n = x.dim(1);
  std::vector<RangeScan> scans(static_cast<std::size_t>(C));
  const auto run = [&](const auto* v) {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < C; ++c)
      scans[static_cast<std::size_t>(c)] = scan(v + c * n, n, first);
  };
  if (x.dtype() == DType::f32)
    run(x.data_as<float>());
  else
    run(x.data_as<double>());
  return scans;
}

void convert_rows(const Array& x, const std::vector<ChannelFactors>& factors, Array& out) {
  const std::int64_t C = x.dim(0), n = x.dim(1);
  const auto run = [&](const auto* v, auto* o) {
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < C; ++c)
      convert(v + c * n, n, factors[static_cast<std::size_t>(c)], o + c * n);
  };
  const auto into = [&](const auto* v) {
    if (out.dtype() == DType::f64)
      run(v, out.data_as<double>());
    else
      run(v, out.data_as<float>());
  };
  if (x.dtype() == DType::f32)
    into(x.data_as<float>());
  else
    into(x.data_as<double>());
}

std::string bad_sample_message(const std::string& source, std::int64_t channel, std::int64_t sample,
                               double value) {
  if (source.empty())
    return "matched_filter: data: " + std::string(std::isnan(value) ? "NaN" : "infinite value") +
           " (" + std::to_string(value) + ") at channel " + str(channel) + ", sample " +
           str(sample) + "; expected finite values (fill gaps with zeros)";
  return source + ": channel " + str(channel) + ", sample " + str(sample) + " is " +
         (std::isnan(value) ? "NaN" : "infinite") + ": expected finite data";
}

}  // namespace halfscope::mfilter
