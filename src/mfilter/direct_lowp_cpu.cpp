// CPU emulation of the low-precision GPU arithmetic, exactly as emulation.hpp specifies it:
// mixed (per-16-sample power-of-two scaling, FP16 operands, FP32 partial sums per slice),
// split (the same scaling, hi + lo FP16 operands, three products), bf16 (BF16 operands, FP32
// sums) and half (global normalization, every operation in FP16).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/direct_cpu_common.hpp"
#include "mfilter/emulation.hpp"

namespace halfscope::mfilter::cpu {

namespace {

// x * 2^shift rounded once to float, as ldexp does, but inline: the power of two is exact in
// double for every shift the contract produces (|shift| < 300), so the double product is exact
// and its conversion is the one rounding (only a float underflow rounds at all).
float scale(float x, int shift) {
  return static_cast<float>(static_cast<double>(x) *
                            std::bit_cast<double>(static_cast<std::uint64_t>(1023 + shift) << 52));
}

float fp16(float x) {
  return static_cast<float>(Half(x));
}
float bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits_rne(x));
}

// Templates scaled per slice and rounded: hi (and lo for split) as floats holding FP16 values,
// plus the slice shifts a(b), for every template channel.
struct ScaledTemplates {
  std::vector<float> hi, lo;
  std::vector<int> shift;  // [(t * C + c) * slices + b]
  std::int64_t slices = 0;
};

ScaledTemplates scale_templates(const Dims& d, const float* tp, bool split) {
  ScaledTemplates s;
  s.slices = slice_count(d.length);
  const std::int64_t n = d.templates * d.channels;
  s.hi.resize(static_cast<std::size_t>(n * d.length));
  if (split) s.lo.resize(s.hi.size());
  s.shift.resize(static_cast<std::size_t>(n * s.slices));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t b = 0; b < s.slices; ++b) {
      const std::int64_t k0 = j * d.length + b * kSliceLength;
      const std::int64_t k1 = j * d.length + std::min(d.length, (b + 1) * kSliceLength);
      float m = 0;
      for (std::int64_t k = k0; k < k1; ++k) m = std::max(m, std::fabs(tp[k]));
      const int sh = scale_shift(m);
      s.shift[static_cast<std::size_t>(j * s.slices + b)] = sh;
      for (std::int64_t k = k0; k < k1; ++k) {
        const float y = scale(tp[k], sh);
        const float h = fp16(y);
        s.hi[static_cast<std::size_t>(k)] = h;
        if (split) s.lo[static_cast<std::size_t>(k)] = fp16(y - h);
      }
    }
  return s;
}

// The data slice shifts d(s, b) of samples [first, first + count) of every channel: runs of 16
// and, when K % 16 != 0, of K % 16 (a run is cut at the range's end; correlate() uses only runs
// inside it, whose shifts equal the whole channel's).
struct DataShifts {
  std::vector<std::int16_t> full, tail;  // [c * count + j] for sample first + j
};

void data_shift_tables(const Dims& d, const float* xp, std::int64_t first, std::int64_t count,
                       DataShifts& s) {
  const std::int64_t tail = d.length % kSliceLength;
  s.full.resize(static_cast<std::size_t>(d.channels * count));
  if (tail) s.tail.resize(s.full.size());
  for (std::int64_t c = 0; c < d.channels; ++c) {
    const float* x = xp + c * d.samples + first;
    data_shifts(x, count, kSliceLength, s.full.data() + c * count);
    if (tail) data_shifts(x, count, tail, s.tail.data() + c * count);
  }
}

// Rounding to FP16 commutes with a power-of-two scale while the scaled value stays a normal
// FP16 number: fp16(x 2^d) = 2^d r11(x), with r11 the rounding to 11 significant bits (RNE).
// r11 of every sample (and, for split, of its remainder x - r11(x), exact in float) is taken
// once; a window then scales it with one exact float multiply instead of an FP16 conversion per
// template and window. Where the scaled value would be an FP16 subnormal (or the sample a float
// subnormal, or the shift beyond float's exponent range) the direct rounding is used instead, so
// the result is the contract's bit for bit (test_mfilter_emulation checks it).
float round11(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  return std::bit_cast<float>((b + 0xfffu + ((b >> 13) & 1u)) & ~0x1fffu);
}
bool round11_exact_path(float x) {
  return std::fabs(x) >= 0x1p-126f && std::fabs(x) <= 0x1p+120f;
}

struct RoundedData {
  std::vector<float> hi, lo;  // r11(x), r11(x - r11(x)); NaN marks "use the direct rounding"
};

// r11 of samples [first, first + count) of every channel, [c * count + j] for sample first + j.
void round_data(const Dims& d, const float* xp, std::int64_t first, std::int64_t count, bool split,
                RoundedData& r) {
  r.hi.resize(static_cast<std::size_t>(d.channels * count));
  if (split) r.lo.resize(r.hi.size());
  for (std::int64_t c = 0; c < d.channels; ++c)
    for (std::int64_t j = 0; j < count; ++j) {
      const float x = xp[c * d.samples + first + j];
      const auto q = static_cast<std::size_t>(c * count + j);
      const bool ok = round11_exact_path(x);
      const float h = ok ? round11(x) : NAN;
      r.hi[q] = h;
      if (split) {
        const float rem = x - h;
        r.lo[q] = ok && (rem == 0 || round11_exact_path(rem)) ? round11(rem) : NAN;
      }
    }
}

template <bool Split>
void run_scaled(const HostProblem& p) {
  const Dims& d = p.dims;
  const float* tp = p.templates->data_as<float>();
  const float* xp = p.data->data_as<float>();
  const ScaledTemplates st = scale_templates(d, tp, Split);
  // The data's tables for the samples of one span of correlate() at a time.
  DataShifts ds;
  RoundedData rd;
  std::int64_t first = 0, count = 0;
  const auto on_span = [&](std::int64_t f, std::int64_t n) {
    first = f;
    count = n;
    data_shift_tables(d, xp, f, n, ds);
    round_data(d, xp, f, n, Split, rd);
  };
  correlate(p, tp, xp, on_span, [&](std::int64_t t, std::int64_t c, std::int64_t s) {
    const std::int64_t j = t * d.channels + c;
    const float* th = st.hi.data() + j * d.length;
    const float* tl = Split ? st.lo.data() + j * d.length : nullptr;
    const std::int64_t base = c * count + s - first;  // in the span's tables
    const float* x = xp + c * d.samples + s;
    const float* rh = rd.hi.data() + base;
    const float* rl = Split ? rd.lo.data() + base : nullptr;
    float acc = 0;
    for (std::int64_t b = 0; b < st.slices; ++b) {
      const std::int64_t k0 = b * kSliceLength, k1 = std::min(d.length, k0 + kSliceLength);
      const bool is_tail = k1 - k0 < kSliceLength;
      const int sx = (is_tail ? ds.tail : ds.full)[static_cast<std::size_t>(base + k0)];
      const bool fast_shift = sx >= -100 && sx <= 100;
      const float p2 = fast_shift ? scale(1.0f, sx) : 0.0f;
      float partial = 0;
      for (std::int64_t k = k0; k < k1; ++k) {
        // !(|v| >= 2^-14) also catches the NaN marks.
        float xh = rh[k] * p2;
        const bool direct = !fast_shift || !(std::fabs(xh) >= 0x1p-14f);
        if (direct) xh = fp16(scale(x[k], sx));
        partial += th[k] * xh;  // exact product of two FP16 values, rounded sum in FP32
        if constexpr (Split) {
          float xl = direct ? NAN : rl[k] * p2;
          if (!(std::fabs(xl) >= 0x1p-14f) && xl != 0.0f) xl = fp16(scale(x[k], sx) - xh);
          partial += th[k] * xl;
          partial += tl[k] * xh;
        }
      }
      acc += scale(partial, -(st.shift[static_cast<std::size_t>(j * st.slices + b)] + sx));
    }
    return static_cast<double>(acc);
  });
}

void run_bf16(const HostProblem& p) {
  const Dims& d = p.dims;
  const float* tp = p.templates->data_as<float>();
  const float* xp = p.data->data_as<float>();
  std::vector<float> tb(static_cast<std::size_t>(d.templates * d.channels * d.length));
  for (std::size_t k = 0; k < tb.size(); ++k) tb[k] = bf16(tp[k]);
  std::vector<float> xb;  // the samples of one span, [c * count + j] for sample first + j
  std::int64_t first = 0, count = 0;
  const auto on_span = [&](std::int64_t f, std::int64_t n) {
    first = f;
    count = n;
    xb.resize(static_cast<std::size_t>(d.channels * n));
    for (std::int64_t c = 0; c < d.channels; ++c)
      for (std::int64_t j = 0; j < n; ++j)
        xb[static_cast<std::size_t>(c * n + j)] = bf16(xp[c * d.samples + f + j]);
  };
  correlate(p, tp, xp, on_span, [&](std::int64_t t, std::int64_t c, std::int64_t s) {
    const float* a = tb.data() + (t * d.channels + c) * d.length;
    const float* x = xb.data() + c * count + s - first;
    float acc = 0;
    for (std::int64_t k = 0; k < d.length; ++k) acc += a[k] * x[k];  // exact products
    return static_cast<double>(acc);
  });
}

float max_abs(const float* v, std::int64_t n) {
  float m = 0;
  for (std::int64_t k = 0; k < n; ++k) m = std::max(m, std::fabs(v[k]));
  return m;
}

void run_half(const HostProblem& p) {
  const Dims& d = p.dims;
  const float* tp = p.templates->data_as<float>();
  const float* xp = p.data->data_as<float>();
  const std::int64_t nt = d.templates * d.channels * d.length, nx = d.channels * d.samples;
  // Global normalization by the maxima (1 where an array is all zeros: nothing to scale).
  float mt = max_abs(tp, nt), mx = max_abs(xp, nx);
  if (mt == 0) mt = 1;
  if (mx == 0) mx = 1;
  std::vector<Half> th(static_cast<std::size_t>(nt)), xh;
  for (std::int64_t k = 0; k < nt; ++k) th[static_cast<std::size_t>(k)] = Half(tp[k] / mt);
  std::int64_t first = 0, count = 0;
  const auto on_span = [&](std::int64_t f, std::int64_t n) {  // the span's samples, as bf16's
    first = f;
    count = n;
    xh.resize(static_cast<std::size_t>(d.channels * n));
    for (std::int64_t c = 0; c < d.channels; ++c)
      for (std::int64_t j = 0; j < n; ++j)
        xh[static_cast<std::size_t>(c * n + j)] = Half(xp[c * d.samples + f + j] / mx);
  };
  std::atomic<bool> overflow{false};
  const double unscale = static_cast<double>(mt) * static_cast<double>(mx);
  correlate(p, tp, xp, on_span, [&](std::int64_t t, std::int64_t c, std::int64_t s) {
    const Half* a = th.data() + (t * d.channels + c) * d.length;
    const Half* x = xh.data() + c * count + s - first;
    Half acc(0.0f);
    for (std::int64_t k = 0; k < d.length; ++k) acc += a[k] * x[k];  // each op rounds to FP16
    const float v = static_cast<float>(acc);
    if (!std::isfinite(v)) {
      overflow.store(true, std::memory_order_relaxed);
      return 0.0;
    }
    return static_cast<double>(v) * unscale;
  });
  // Exceptions cannot leave an OpenMP region: the loop records the failure, this reports it.
  if (overflow.load())
    throw NumericalError(
        "matched filtering in precision half: the FP16 accumulation overflowed "
        "(K = " +
        std::to_string(d.length) +
        " normalized products); use mixed or split, which accumulate in FP32");
}

}  // namespace

void direct_lowp_cpu(const HostProblem& p, Precision precision) {
  switch (precision) {
    case Precision::Mixed:
      return run_scaled<false>(p);
    case Precision::Split:
      return run_scaled<true>(p);
    case Precision::BF16:
      return run_bf16(p);
    case Precision::Half:
      return run_half(p);
    default:
      break;
  }
  throw Unsupported("matched filtering: no CPU emulation for precision " +
                    std::string(precision_name(precision)));
}

}  // namespace halfscope::mfilter::cpu
