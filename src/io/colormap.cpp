// Scales and colormaps of the PNG writer: value -> scaled value -> level 0..255 -> colour.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/png.hpp"

namespace halfscope::io {

Scale parse_scale(std::string_view name) {
  if (name == "linear") return Scale::linear;
  if (name == "log") return Scale::log;
  if (name == "cbrt") return Scale::cbrt;
  throw InvalidInput("unknown scale '" + std::string(name) + "': expected linear, log or cbrt");
}

Colormap parse_colormap(std::string_view name) {
  if (name == "gray" || name == "grey") return Colormap::gray;
  if (name == "perceptual") return Colormap::perceptual;
  throw InvalidInput("unknown colormap '" + std::string(name) + "': expected gray or perceptual");
}

std::string_view scale_name(Scale s) noexcept {
  switch (s) {
    case Scale::linear:
      return "linear";
    case Scale::log:
      return "log";
    case Scale::cbrt:
      return "cbrt";
  }
  return "?";
}

std::string_view colormap_name(Colormap c) noexcept {
  return c == Colormap::gray ? "gray" : "perceptual";
}

std::array<double, 3> cubehelix(double t) noexcept {
  // D. A. Green, "A colour scheme for the display of astronomical intensity images", Bull. Astr.
  // Soc. India 39 (2011) 289: a helix around the gray diagonal of the RGB cube whose deviation
  // from gray has zero luminance (the coefficients below are orthogonal to the weights
  // 0.30/0.59/0.11), so the luminance is exactly t^gamma.
  constexpr double start = 0.5, rotations = -1.5, hue = 1.0, gamma = 1.0;
  const double lg = std::pow(t, gamma);
  const double amp = hue * lg * (1.0 - lg) / 2.0;
  const double phi = 2.0 * std::numbers::pi * (start / 3.0 + rotations * t);
  const double c = std::cos(phi), s = std::sin(phi);
  return {lg + amp * (-0.14861 * c + 1.78277 * s), lg + amp * (-0.29227 * c - 0.90649 * s),
          lg + amp * (1.97294 * c)};
}

Rgb colormap_color(Colormap c, std::uint8_t level) noexcept {
  if (c == Colormap::gray) return {level, level, level};
  static const std::array<Rgb, 256> table = [] {
    std::array<Rgb, 256> t{};
    const auto q = [](double v) {
      return static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0));
    };
    for (int i = 0; i < 256; ++i) {
      const auto rgb = cubehelix(i / 255.0);
      t[static_cast<std::size_t>(i)] = {q(rgb[0]), q(rgb[1]), q(rgb[2])};
    }
    return t;
  }();
  return table[level];
}

Levels image_levels(const Array& image2d, const PngOptions& o) {
  if (image2d.empty()) throw InvalidInput("PNG: the array holds no data (default-constructed)");
  if (image2d.ndim() != 2)
    throw InvalidInput("PNG: expected a 2-D image, found " + image2d.describe());
  if (image2d.size() == 0) throw InvalidInput("PNG: the image is empty: " + image2d.describe());
  for (const auto& [v, what] : {std::pair{o.vmin, "vmin"}, std::pair{o.vmax, "vmax"}})
    if (v && !std::isfinite(*v))
      throw InvalidInput(std::string("PNG: ") + what + " must be finite, found " +
                         std::to_string(*v));
  if (o.vmin && o.vmax && *o.vmin > *o.vmax)
    throw InvalidInput("PNG: vmin " + std::to_string(*o.vmin) + " > vmax " +
                       std::to_string(*o.vmax));

  const Array h =
      (image2d.memory() == Memory::device ? image2d.to(Memory::host) : image2d).contiguous();
  const auto n = static_cast<std::size_t>(h.size());
  std::vector<double> x(n);
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(h.data());
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(p[i]);
  });

  double lo = std::numeric_limits<double>::infinity(), hi = -lo, min_positive = lo;
  for (double v : x) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    if (v > 0) min_positive = std::min(min_positive, v);
  }
  if (lo > hi) lo = hi = 0;  // no finite value: every pixel is NaN or infinite
  lo = o.vmin.value_or(lo);
  hi = o.vmax.value_or(hi);

  double floor = 0;
  if (o.scale == Scale::log) {
    if (o.vmin && *o.vmin <= 0) throw InvalidInput("PNG: log scale needs vmin > 0");
    if (o.vmax && *o.vmax <= 0) throw InvalidInput("PNG: log scale needs vmax > 0");
    if (hi <= 0) hi = 1;  // no positive data: everything clips to the floor (constant picture)
    floor = o.vmin ? *o.vmin : std::max(std::isfinite(min_positive) ? min_positive : hi, hi * 1e-6);
    floor = std::min(floor, hi);
    lo = floor;
  }
  const auto scale = [&](double v) {
    switch (o.scale) {
      case Scale::linear:
        return v;
      case Scale::log:
        return std::log10(std::max(v, floor));
      case Scale::cbrt:
        return std::cbrt(v);
    }
    return v;
  };
  // Halves keep hi - lo finite even for data spanning the whole float64 range.
  const double s_lo = 0.5 * scale(lo), s_hi = 0.5 * scale(hi), range = s_hi - s_lo;
  Levels out{std::vector<std::uint8_t>(n), std::vector<bool>(n, false)};
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      out.nan[i] = true;
      continue;
    }
    const double s = 0.5 * scale(x[i]);
    double t;
    if (range > 0)
      t = std::clamp((s - s_lo) / range, 0.0, 1.0);
    else
      t = s < s_lo ? 0.0 : s > s_hi ? 1.0 : 0.5;  // constant picture: mid-grey
    out.level[i] = static_cast<std::uint8_t>(std::lround(t * 255.0));
  }
  return out;
}

}  // namespace halfscope::io
