#include "halfscope/core/convert.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "core/strided.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope {

ConversionReport& ConversionReport::operator+=(const ConversionReport& o) noexcept {
  if (o.first_overflow_index >= 0 && first_overflow_index < 0)
    first_overflow_index = count + o.first_overflow_index;
  count += o.count;
  overflow += o.overflow;
  underflow += o.underflow;
  subnormal += o.subnormal;
  nan += o.nan;
  return *this;
}

std::string ConversionReport::summary() const {
  std::string s = std::to_string(count) + " values: " + std::to_string(overflow) + " overflowed";
  if (first_overflow_index >= 0)
    s += " (first at index " + std::to_string(first_overflow_index) + ")";
  return s + ", " + std::to_string(underflow) + " underflowed to zero, " +
         std::to_string(subnormal) + " subnormal, " + std::to_string(nan) + " NaN";
}

void require_finite(const ConversionReport& report, std::string_view what) {
  if (!report.clean())
    throw NumericalError(std::string(what) + ": conversion to a narrower format is not exact: " +
                         report.summary() + "; rescale the input or use a wider precision");
}

void classify_conversion(double x, std::uint16_t bits, bool half_layout, std::int64_t index,
                         ConversionReport& r) noexcept {
  if (std::isnan(x)) {
    ++r.nan;
    return;
  }
  const std::uint16_t mag = bits & 0x7fffu;
  const std::uint16_t inf = half_layout ? 0x7c00u : 0x7f80u;
  const std::uint16_t min_normal = half_layout ? 0x0400u : 0x0080u;
  if (mag == inf) {
    if (std::isfinite(x)) {
      if (r.overflow == 0) r.first_overflow_index = index;
      ++r.overflow;
    }
  } else if (mag == 0) {
    if (x != 0) ++r.underflow;
  } else if (mag < min_normal) {
    ++r.subnormal;
  }
}

namespace {
template <class Src, class Dst>
ConversionReport narrow(std::span<const Src> in, std::span<Dst> out, bool half_layout) {
  if (in.size() != out.size())
    throw InvalidInput("conversion: input has " + std::to_string(in.size()) + " values, output " +
                       std::to_string(out.size()));
  ConversionReport r;
  r.count = static_cast<std::int64_t>(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = Dst(in[i]);
    classify_conversion(static_cast<double>(in[i]), out[i].bits, half_layout,
                        static_cast<std::int64_t>(i), r);
  }
  return r;
}
}  // namespace

ConversionReport convert_to_half(std::span<const float> in, std::span<Half> out) {
  return narrow(in, out, true);
}
ConversionReport convert_to_bf16(std::span<const float> in, std::span<BFloat16> out) {
  return narrow(in, out, false);
}
ConversionReport convert_to_half(std::span<const double> in, std::span<Half> out) {
  return narrow(in, out, true);
}
ConversionReport convert_to_bf16(std::span<const double> in, std::span<BFloat16> out) {
  return narrow(in, out, false);
}
void convert_to_float(std::span<const Half> in, std::span<float> out) {
  for (std::size_t i = 0; i < in.size() && i < out.size(); ++i) out[i] = in[i].to_float();
}
void convert_to_float(std::span<const BFloat16> in, std::span<float> out) {
  for (std::size_t i = 0; i < in.size() && i < out.size(); ++i) out[i] = in[i].to_float();
}

namespace {

template <class T>
constexpr bool is_narrow_float = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// One element of Array::astype. Floating targets round to nearest even (with a single rounding,
// also from double); integer targets require finite, in-range values and round to nearest even.
template <class Dst, class Src>
Dst convert_one(Src v, std::int64_t index, ConversionReport& r, const Array& src) {
  if constexpr (is_narrow_float<Dst>) {
    const Dst d(static_cast<double>(v));
    classify_conversion(static_cast<double>(v), d.bits, std::is_same_v<Dst, Half>, index, r);
    return d;
  } else if constexpr (std::is_floating_point_v<Dst>) {
    const double x = static_cast<double>(v);
    const Dst d = static_cast<Dst>(x);
    if (std::isinf(d) && std::isfinite(x)) {
      if (r.overflow == 0) r.first_overflow_index = index;
      ++r.overflow;
    }
    return d;
  } else if constexpr (std::is_integral_v<Src>) {
    if (!std::in_range<Dst>(v))
      throw InvalidInput("astype: value " + std::to_string(v) + " at index " +
                         std::to_string(index) + " of " + src.describe() + " does not fit " +
                         std::string(dtype_name(dtype_of<Dst>)));
    return static_cast<Dst>(v);
  } else {
    const double x = std::nearbyint(static_cast<double>(v));
    // Powers of two are exact doubles: the range is [lo, upper) for every integer width.
    constexpr int bits = static_cast<int>(sizeof(Dst) * 8);
    const double lo = std::is_signed_v<Dst> ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double upper = std::ldexp(1.0, std::is_signed_v<Dst> ? bits - 1 : bits);
    if (!(x >= lo && x < upper))
      throw InvalidInput("astype: value " + std::to_string(static_cast<double>(v)) + " at index " +
                         std::to_string(index) + " of " + src.describe() + " does not fit " +
                         std::string(dtype_name(dtype_of<Dst>)));
    return static_cast<Dst>(x);
  }
}

}  // namespace

Array Array::astype(DType dtype, ConversionReport* report) const {
  if (on_device())
    throw Unsupported("astype runs on host arrays; " + describe() + " is on the device");
  Array out(dtype, shape_);
  ConversionReport r;
  r.count = size();
  visit_dtype(dtype_, [&](auto src_zero) {
    using Src = decltype(src_zero);
    visit_dtype(dtype, [&](auto dst_zero) {
      using Dst = decltype(dst_zero);
      const Src* src = static_cast<const Src*>(data());
      Dst* dst = static_cast<Dst*>(out.data());
      detail::for_each_offset(shape_, strides_, [&](std::int64_t i, std::int64_t off) {
        if constexpr (std::is_same_v<Src, Dst>) {
          dst[i] = src[off];
        } else if constexpr (is_narrow_float<Src>) {
          dst[i] = convert_one<Dst>(src[off].to_float(), i, r, *this);
        } else {
          dst[i] = convert_one<Dst>(src[off], i, r, *this);
        }
      });
    });
  });
  if (report) *report += r;
  return out;
}

}  // namespace halfscope
