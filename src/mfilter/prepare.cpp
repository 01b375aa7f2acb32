// Validation and conversion of a matched-filtering call (dispatch.hpp's Prepared). Every message
// names the argument, what was expected and what was found.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/chunking.hpp"
#include "mfilter/data_factors.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter/level_check.hpp"
#if HALFSCOPE_WITH_CUDA
#include "mfilter/prepare_cuda.hpp"
#endif

namespace halfscope::mfilter {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

Array host_contiguous(const Array& a) {
  return a.on_device() ? a.to(Memory::host) : a.contiguous();
}

// The host array as C-contiguous `want` (f32 or f64), every value finite and representable;
// `where(i)` names the element at linear index i for the message. No copy when it already is.
template <class Where>
Array to_real(const Array& in, DType want, const char* what, const Where& where) {
  Array src = host_contiguous(in);
  const auto fail = [&](std::int64_t i, double v, const char* why) {
    throw InvalidInput("matched_filter: " + std::string(what) + ": " + why + " (" +
                       std::to_string(v) + ") at " + where(i) + "; expected finite values" +
                       (std::string(what) == "data" ? " (fill gaps with zeros)" : ""));
  };
  const std::int64_t n = src.size();
  if (src.dtype() == want) {
    if (want == DType::f32) {
      const float* p = src.data_as<float>();
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(p[i])) fail(i, p[i], std::isnan(p[i]) ? "NaN" : "infinite value");
    } else {
      const double* p = src.data_as<double>();
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(p[i])) fail(i, p[i], std::isnan(p[i]) ? "NaN" : "infinite value");
    }
    return src;
  }
  const Array d = src.dtype() == DType::f64 ? src : src.astype(DType::f64);
  const double* p = d.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) fail(i, p[i], std::isnan(p[i]) ? "NaN" : "infinite value");
  if (want == DType::f64) return d;
  Array f(DType::f32, d.shape());
  float* q = f.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::fabs(p[i]) > static_cast<double>(FLT_MAX)) fail(i, p[i], "value beyond float32");
    q[i] = static_cast<float>(p[i]);
  }
  return f;
}

// The power of two 2^-e with max_abs * 2^-e in [0.5, 1) (1 for max_abs == 0): multiplying by it
// is exact in FP64 for every sample that stays a normal number, i.e. every sample above
// 2^-1022 max_abs, so it changes no CC.
double unit_power_of_two(double max_abs) {
  if (!(max_abs > 0)) return 1.0;
  int e = 0;
  (void)std::frexp(max_abs, &e);
  return std::ldexp(1.0, -e);
}

double max_abs_of(const double* x, std::int64_t n) {
  double m = 0;
  for (std::int64_t k = 0; k < n; ++k) m = std::max(m, std::fabs(x[k]));
  return m;
}

// One template channel in FP64, in place: brought to max |t| in [0.5, 1) (exact), demeaned in
// full normalization, zeroed when flat (dispatch.hpp), and scaled to unit energy.
void unit_template(double* x, std::int64_t K, MfNormalize normalize) {
  const double pre = unit_power_of_two(max_abs_of(x, K));  // no FP64 overflow in the sums
  double raw = 0, mean = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    x[k] *= pre;
    raw += x[k] * x[k];
    mean += x[k];
  }
  mean /= static_cast<double>(K);
  double energy = raw;
  if (normalize == MfNormalize::Full) {
    energy = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      x[k] -= mean;
      energy += x[k] * x[k];
    }
    if (energy <= kFlatRelative * raw) energy = 0;
  }
  if (energy == 0) {
    std::fill(x, x + K, 0.0);
    return;
  }
  const double unit = 1.0 / std::sqrt(energy);
  for (std::int64_t k = 0; k < K; ++k) x[k] *= unit;
}

template <class In, class Out>
void unit_templates(const In* in, Out* out, std::int64_t rows, std::int64_t K,
                    MfNormalize normalize, std::int64_t& first_bad) {
  // Channels are independent and each is computed in the same order as alone, so the result
  // does not depend on the thread count; the first non-finite sample is found by a reduction.
  std::int64_t bad = rows * K;
  const int threads = omp_get_max_threads();
  std::vector<double> scratch(static_cast<std::size_t>(threads * K));
#pragma omp parallel for schedule(static) reduction(min : bad) num_threads(threads)
  for (std::int64_t j = 0; j < rows; ++j) {
    double* x = scratch.data() + static_cast<std::int64_t>(omp_get_thread_num()) * K;
    bool finite = true;
    for (std::int64_t k = 0; k < K; ++k) {
      x[k] = static_cast<double>(in[j * K + k]);
      if (!std::isfinite(x[k]) && finite) {
        bad = std::min(bad, j * K + k);
        finite = false;
      }
    }
    if (!finite) continue;
    unit_template(x, K, normalize);
    for (std::int64_t k = 0; k < K; ++k) out[j * K + k] = static_cast<Out>(x[k]);
  }
  first_bad = bad;
}

// Templates in FP64, each channel made unit-energy by unit_template, then rounded to the
// storage the method computes from. Unit energy keeps every product t * S of the FP32 and BF16
// paths far from FP32's overflow and underflow whatever the caller's units (templates and data
// near 1e-21 would give FP32 subnormal products, near 1e10 and 1e30 infinite ones); CC does not
// depend on a template's scale. Parallel over channels (a network of 1000 templates x 30
// channels took 0.1 s serially, as long as a quarter of the GPU's work on four devices).
Array prepare_templates(const Array& templates, const Dims& d, DType want, std::int64_t first) {
  const std::int64_t C = d.channels, K = d.length, rows = templates.size() / K;
  Array src = host_contiguous(templates);
  if (src.dtype() != DType::f32 && src.dtype() != DType::f64) src = src.astype(DType::f64);
  Array out(want, Shape{rows * K});
  std::int64_t bad = 0;
  const auto run = [&](const auto* in) {
    if (want == DType::f64)
      unit_templates(in, out.data_as<double>(), rows, K, d.normalize, bad);
    else
      unit_templates(in, out.data_as<float>(), rows, K, d.normalize, bad);
  };
  if (src.dtype() == DType::f32)
    run(src.data_as<float>());
  else
    run(src.data_as<double>());
  if (bad < rows * K) {
    const double v =
        src.dtype() == DType::f32 ? src.data_as<float>()[bad] : src.data_as<double>()[bad];
    throw InvalidInput(
        "matched_filter: templates: " + std::string(std::isnan(v) ? "NaN" : "infinite value") +
        " (" + std::to_string(v) + ") at template " + str(first + bad / (C * K)) + ", channel " +
        str(bad / K % C) + ", sample " + str(bad % K) + "; expected finite values");
  }
  return out;
}

// Per channel of `x` (C rows of L): whether every value is finite and max |S| is zero or inside
// the band. The largest magnitude is the largest sign-cleared bit pattern: IEEE magnitudes order
// as their bits and infinities and NaNs lie above every finite one, so one integer maximum
// (vectorized) answers both, at memory speed (twice the speed of an FP64 maximum beside an
// isfinite test: 27 against 60 ms for a day of 30 channels on two cores).
template <class V, class Bits>
void channels_in_band(const V* x, std::int64_t C, std::int64_t L, std::vector<char>& ok) {
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  constexpr Bits kInf = std::bit_cast<Bits>(std::numeric_limits<V>::infinity());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t c = 0; c < C; ++c) {
    Bits m = 0;
    for (std::int64_t k = 0; k < L; ++k)
      m = std::max(m, std::bit_cast<Bits>(x[c * L + k]) & ~kSign);
    const auto largest = static_cast<double>(std::bit_cast<V>(m));
    ok[static_cast<std::size_t>(c)] =
        m < kInf && power_of_two_outside(largest, kDataBandLow, kDataBandHigh) == 1.0;
  }
}

// Whether prepare_data would leave short-normalized data as they are: every value finite and
// each channel's max |S| zero or inside [kDataBandLow, kDataBandHigh] (no power-of-two scaling).
// One parallel read of the data without a copy; non-finite data answer false (prepare_data's full
// pass then names the channel and sample).
bool unchanged_data(const Array& src, std::int64_t C, std::int64_t L) {
  std::vector<char> ok(static_cast<std::size_t>(C), 0);
  if (src.dtype() == DType::f32)
    channels_in_band<float, std::uint32_t>(src.data_as<float>(), C, L, ok);
  else
    channels_in_band<double, std::uint64_t>(src.data_as<double>(), C, L, ok);
  return std::all_of(ok.begin(), ok.end(), [](char x) { return x != 0; });
}

// Data per channel, through data_factors.hpp: in full normalization minus the channel's FP64
// mean (full CC does not change under a constant shift, and the operands then round relative to
// |S - mean| instead of |S|: with an offset 1e3 times the noise, FP16 operands would otherwise
// carry errors ~1e3 u relative to the window's fluctuation); then, when max |S| lies outside
// [2^-32, 2^32], times the power of two that brings it into [0.5, 1), exact, so FP32 and BF16
// products can neither underflow nor overflow (kDataBandLow). `factors` receives each channel's
// factors (their offsets are the flat rule's, window_stats.hpp) and `changed` whether any value
// differs from the caller's. The only full-size copy is the result in the storage precision.
Array prepare_data(const Array& data, const Dims& d, DType want,
                   std::vector<ChannelFactors>& factors, bool& changed) {
  const std::int64_t C = d.channels, L = d.samples;
  Array src = host_contiguous(data);
  if (src.dtype() != DType::f32 && src.dtype() != DType::f64) src = src.astype(DType::f64);
  factors.assign(static_cast<std::size_t>(C), ChannelFactors{});
  if (d.normalize == MfNormalize::Short && src.dtype() == want && unchanged_data(src, C, L)) {
    changed = false;  // the caller's array itself: no conversion pass, no copy
    return src.reshape({C, L});
  }
  Array out(want, {C, L});
  // Channels are independent: scanned and converted in parallel, which keeps the host's pass
  // over the data from dominating a call spread over several GPUs. The lowest bad channel's
  // error is thrown before any conversion, as the sequential loop would.
  std::vector<RangeScan> scans(static_cast<std::size_t>(C));
  const auto run = [&](const auto* x) {
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t c = 0; c < C; ++c) {
      const auto* row = x + c * L;
      RangeScan& s = scans[static_cast<std::size_t>(c)];
      s = scan_range(row, L, 0);
      if (s.first_bad >= 0) continue;
      const double pre = pre_factor(s);
      double sum = 0;
      if (d.normalize == MfNormalize::Full)
        for (std::int64_t k = 0; k < L; k += kSumBlock)
          sum += block_sum(row + k, std::min(kSumBlock, L - k), pre);
      factors[static_cast<std::size_t>(c)] = channel_factors(s, pre, sum / static_cast<double>(L));
    }
  };
  if (src.dtype() == DType::f32)
    run(src.data_as<float>());
  else
    run(src.data_as<double>());
  for (std::int64_t c = 0; c < C; ++c)
    if (const RangeScan& s = scans[static_cast<std::size_t>(c)]; s.first_bad >= 0)
      throw InvalidInput(bad_sample_message("", c, s.first_bad, s.bad_value));
  // max |s| <= 2^32 now: the float32 conversion cannot overflow.
  convert_rows(src.reshape({C, L}), factors, out);
  changed = src.dtype() != want || std::any_of(factors.begin(), factors.end(),
                                               [](const ChannelFactors& f) { return f.changes(); });
  return out;
}

#if HALFSCOPE_WITH_CUDA
// prepare_data for C-contiguous f32/f64 device data, without the round trip through the host:
// the statistics (non-finite count, min, max, FP64 sum) come from one device pass, the factors
// from the same rules as prepare_data, and any shift or scaling is applied on the device with the
// host's FP64 arithmetic. Returns the data itself when nothing changes. Non-finite data go
// through prepare_data, whose message names the channel and sample.
Array prepare_device_data(const Array& data, const Dims& d, DType want,
                          std::vector<ChannelFactors>& factors) {
  const std::int64_t C = d.channels, L = d.samples;
  const auto n = static_cast<std::size_t>(C);
  std::vector<DeviceChannelStats> st = device_channel_stats(data, C, L, {});
  for (const DeviceChannelStats& s : st)
    if (s.non_finite > 0) {
      bool changed = false;
      return prepare_data(data, d, want, factors, changed);  // throws with the exact position
    }
  std::vector<RangeScan> whole(n);
  std::vector<double> pre(n), mean(n, 0.0), post(n);
  bool rescaled = false;
  for (std::size_t c = 0; c < n; ++c) {
    whole[c].min = st[c].min;
    whole[c].max = st[c].max;
    pre[c] = pre_factor(whole[c]);
    rescaled = rescaled || pre[c] != 1.0;
  }
  // The sums must be of x * pre (so that they cannot overflow): a second pass, only for f64 data
  // beyond 2^+-960 in full normalization.
  if (rescaled && d.normalize == MfNormalize::Full) st = device_channel_stats(data, C, L, pre);
  bool changed = data.dtype() != want;
  factors.assign(n, ChannelFactors{});
  for (std::size_t c = 0; c < n; ++c) {
    if (d.normalize == MfNormalize::Full) mean[c] = st[c].sum / static_cast<double>(L);
    factors[c] = channel_factors(whole[c], pre[c], mean[c]);
    post[c] = factors[c].post;
    changed = changed || factors[c].changes();
  }
  if (!changed) return data.reshape({C, L});
  return device_shift_scale(data, C, L, want, pre, mean, post);
}
#endif

// The network's shapes and the moveouts' type: (T, C), or (T) for one channel.
void check_network(const Dims& d, const ArrayInfo& moveouts, const ArrayInfo& weights) {
  const Shape want{d.templates, d.channels};
  const auto check_shape = [&](const ArrayInfo& a, const char* what) {
    const bool one_channel_1d = d.channels == 1 && a.shape == Shape{d.templates};
    if (!a.empty && a.shape != want && !one_channel_1d)
      throw InvalidInput("matched_filter: " + std::string(what) + ": expected shape " +
                         shape_to_string(want) + " (templates, channels), found " + a.description);
  };
  check_shape(moveouts, "moveouts");
  if (!moveouts.empty && dtype_is_float(moveouts.dtype))
    throw InvalidInput("matched_filter: moveouts: expected integers (samples), found " +
                       moveouts.description);
  check_shape(weights, "weights");
}

}  // namespace

ArrayInfo ArrayInfo::of(const Array& a) {
  return {a.shape(), a.dtype(), a.on_device(), a.empty(), a.describe()};
}

Prepared prepare_call(const ArrayInfo& templates, const ArrayInfo& data, const MfOptions& o,
                      const ArrayInfo& moveouts, const ArrayInfo& weights) {
  if (templates.empty) throw InvalidInput("matched_filter: templates: empty array");
  if (data.empty) throw InvalidInput("matched_filter: data: empty array");
  const auto t_ndim = static_cast<std::int64_t>(templates.shape.size());
  if (t_ndim != 2 && t_ndim != 3)
    throw InvalidInput(
        "matched_filter: templates: expected shape (templates, channels, samples) or "
        "(templates, samples), found " +
        templates.description);
  const auto data_ndim = static_cast<std::int64_t>(data.shape.size());
  if (data_ndim != 1 && data_ndim != 2)
    throw InvalidInput(
        "matched_filter: data: expected shape (channels, samples) or (samples), "
        "found " +
        data.description);
  Prepared p;
  Dims& d = p.dims;
  d.templates = templates.shape.front();
  d.channels = t_ndim == 3 ? templates.shape[1] : 1;
  d.length = templates.shape.back();
  d.samples = data.shape.back();
  const std::int64_t data_channels = data_ndim == 2 ? data.shape.front() : 1;
  if (shape_size(templates.shape) == 0)
    throw InvalidInput("matched_filter: templates: empty array " + templates.description);
  if (shape_size(data.shape) == 0)
    throw InvalidInput("matched_filter: data: empty array " + data.description);
  if (data_channels != d.channels)
    throw InvalidInput("matched_filter: templates have " + str(d.channels) +
                       " channel(s) but the data have " + str(data_channels) + " (templates " +
                       templates.description + ", data " + data.description + ")");
  d.step = o.step;
  d.n_corr = mf_correlation_count(d.samples, d.length, o.step);
  d.normalize = o.normalize;
  d.network_sum = o.network_sum;
  (void)output_elements(d.templates, d.channels, d.n_corr, d.network_sum);
  p.out_shape =
      d.network_sum ? Shape{d.templates, d.n_corr} : Shape{d.templates, d.channels, d.n_corr};

  // Device and method: device inputs pull Auto to the GPU; Direct always runs on the CPU.
  DeviceKind device = o.device;
  if (device == DeviceKind::Auto && (data.on_device || templates.on_device))
    device = DeviceKind::Cuda;
  device = resolve_device(device);
  MfOptions resolved = o;
  resolved.device = device;
  if (!o.precision && o.method == MfMethod::Auto)
    resolved.precision = device == DeviceKind::Cuda ? Precision::Split : Precision::Single;
  p.method = mf_resolve_method(resolved, d.length);
  p.precision = resolved.precision.value_or(mf_default_precision(p.method));
  const DeviceKind runs_on = p.method == MfMethod::Direct ? DeviceKind::Cpu : device;
  const auto ok = mf_supported_precisions(p.method, runs_on);
  const std::string method(mf_method_name(p.method));
  if (ok.empty())
    throw Unsupported("matched_filter: method " + method +
                      " runs only on the GPU (device resolved to the CPU)");
  if (std::find(ok.begin(), ok.end(), p.precision) == ok.end())
    throw Unsupported("matched_filter: method " + method + " does not support precision " +
                      std::string(precision_name(p.precision)) + "; it supports " +
                      precision_list(ok));
  p.on_gpu = runs_on == DeviceKind::Cuda;
  p.data_on_device = data.on_device;
  check_network(d, moveouts, weights);
  return p;
}

NetworkRows prepare_network_rows(const Prepared& p, const Array& moveouts, const Array& weights,
                                 std::int64_t first, std::int64_t n) {
  const Dims& d = p.dims;
  const std::int64_t count = n * d.channels;
  const auto check_size = [&](const Array& a, const char* what) {
    if (!a.empty() && a.size() != count)
      throw Error("matched_filter: " + std::string(what) + " of templates [" + str(first) + ", " +
                  str(first + n) + "): " + str(a.size()) + " values, expected " + str(count));
  };
  check_size(moveouts, "moveouts");
  check_size(weights, "weights");
  NetworkRows rows;
  // A window starts within [moveout, (n_corr - 1) * step + moveout]; beyond +-(L + 1) every window
  // is outside the data, so the clamp changes no result (dispatch.hpp).
  const double bound = static_cast<double>(d.samples + 1);
  rows.moveouts.assign(static_cast<std::size_t>(count), 0);
  if (!moveouts.empty()) {
    const Array m = host_contiguous(moveouts);
    for (std::int64_t j = 0; j < count; ++j)
      rows.moveouts[static_cast<std::size_t>(j)] =
          static_cast<std::int64_t>(std::clamp(m.at_as_double(j), -bound, bound));
  }
  rows.weights.assign(static_cast<std::size_t>(count), 1.0f);
  if (!weights.empty()) {
    const Array w = to_real(weights, DType::f32, "weights", [&](std::int64_t i) {
      return "template " + str(first + i / d.channels) + ", channel " + str(i % d.channels);
    });
    std::copy_n(w.data_as<float>(), count, rows.weights.begin());
  }
  return rows;
}

Array prepare_template_rows(const Prepared& p, const Array& rows, std::int64_t first) {
  return prepare_templates(rows, p.dims, storage_type(p), first);
}

Prepared prepare(const Array& templates, const Array& data, const MfOptions& o,
                 const MfNetwork& network) {
  Prepared p = prepare_call(ArrayInfo::of(templates), ArrayInfo::of(data), o,
                            ArrayInfo::of(network.moveouts), ArrayInfo::of(network.weights));
  NetworkRows net = prepare_network_rows(p, network.moveouts, network.weights, 0, p.dims.templates);
  p.moveouts = std::move(net.moveouts);
  p.weights = std::move(net.weights);
  p.templates = prepare_template_rows(p, templates, 0);
  const Dims& d = p.dims;
  const DType want = storage_type(p);
#if HALFSCOPE_WITH_CUDA
  // C-contiguous f32/f64 device data for a GPU method are checked and prepared on the device
  // (a copy to the host would cost far more than the matched filter itself).
  if (p.on_gpu && p.data_on_device && data.is_c_contiguous() &&
      (data.dtype() == DType::f32 || data.dtype() == DType::f64) && d.channels <= 65535) {
    std::vector<ChannelFactors> factors;
    p.data = prepare_device_data(data, d, want, factors);
    p.channel_offsets = offsets_of(factors);
    // The level check reads a host copy: only in full normalization at 16-bit precisions.
    if (level_check_applies(p))
      check_level_rounding(p, p.data.on_device() ? p.data.to(Memory::host) : p.data);
    if (!p.data.on_device()) p.data = p.data.to(Memory::device);  // host fallback's result
    return p;
  }
#endif
  // Host data, and device data of other types or layouts: checked and prepared on the host.
  bool changed = false;
  std::vector<ChannelFactors> factors;
  Array x = prepare_data(data, d, want, factors, changed);
  p.channel_offsets = offsets_of(factors);
  check_level_rounding(p, x);
  // Computed in place when the device data are already `want` and need no shift or scale;
  // otherwise uploaded (run_cuda synchronizes the device before reading it, dispatch.hpp).
  if (p.on_gpu && p.data_on_device)
    x = !changed && data.dtype() == want && data.is_c_contiguous()
            ? data.reshape({d.channels, d.samples})
            : x.to(Memory::device);
  p.data = std::move(x);
  return p;
}

}  // namespace halfscope::mfilter
