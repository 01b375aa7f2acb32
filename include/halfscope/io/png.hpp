// Pictures of 2-D arrays as PNG (libpng), and PNG images read back as arrays.
//
// Writing maps each value x through a scale s(x) (linear, log10 or signed cube root), then through
// [s(vmin), s(vmax)] onto 0..255, then through a colormap: 8-bit grayscale, or 8-bit RGB along a
// cubehelix (Green 2011) whose luminance rises monotonically, so the picture stays readable in
// grayscale print and for colour-blind readers.
//
//   - vmin / vmax are in data units and default to the finite min / max of the data.
//   - log: s(x) = log10(max(x, floor)); the floor is vmin when given (it must then be > 0),
//     else the larger of the smallest positive value and vmax * 1e-6 (six decades), so values
//     <= 0 and tiny positive values clip to the darkest colour. Data with no positive value
//     gives a constant (mid-grey) picture.
//   - cbrt: s(x) = sign(x) |x|^(1/3), the display of study 000's reconstructions.
//   - Values below vmin clip to 0, above vmax (and +inf) to 255, -inf to 0.
//   - NaN pixels are black (0) in gray and magenta (255, 0, 255) in perceptual, a colour the
//     cubehelix never takes.
//   - A constant picture (s(vmin) == s(vmax)) is mid-grey (level 128), not NaN or black.
//
// Reading returns the image as a 2-D {height, width} array: 1/2/4/8-bit gray as uint8, 16-bit
// gray as uint16 (alpha dropped), palette and RGB(A) as float32 luminance
// Y = 0.2126 R + 0.7152 G + 0.0722 B (Rec. 709 weights on the stored, gamma-encoded samples, in
// the samples' own units 0..255 or 0..65535; alpha ignored).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// How values are transformed before they are mapped to colours.
enum class Scale : std::uint8_t { linear, log, cbrt };

/// Colours of the picture: 8-bit gray, or 8-bit RGB along a perceptual (cubehelix) ramp.
enum class Colormap : std::uint8_t { gray, perceptual };

/// Parses "linear", "log" or "cbrt"; throws InvalidInput listing the valid names.
Scale parse_scale(std::string_view name);
/// Parses "gray" (or "grey") or "perceptual"; throws InvalidInput listing the valid names.
Colormap parse_colormap(std::string_view name);
std::string_view scale_name(Scale s) noexcept;
std::string_view colormap_name(Colormap c) noexcept;

/// Options of write_png / render_png.
struct PngOptions {
  Scale scale = Scale::linear;
  Colormap colormap = Colormap::gray;
  std::optional<double> vmin;  // data units; default: finite minimum
  std::optional<double> vmax;  // data units; default: finite maximum
};

/// An 8-bit colour.
struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(Rgb, Rgb) = default;
};

/// The colour of level 0..255 in a colormap (gray: r = g = b = level).
Rgb colormap_color(Colormap c, std::uint8_t level) noexcept;

/// Green's (2011) cubehelix at fraction t in [0, 1] (start 0.5, rotations -1.5, hue 1, gamma 1,
/// matplotlib's "cubehelix"), unclipped and unrounded; its luminance 0.30 R + 0.59 G + 0.11 B is t.
std::array<double, 3> cubehelix(double t) noexcept;

/// The levels 0..255 of a 2-D image of any dtype (row-major, height x width), with the NaN
/// pixels flagged: the scaling step of write_png, exposed for tests and other renderers.
struct Levels {
  std::vector<std::uint8_t> level;
  std::vector<bool> nan;
};
Levels image_levels(const Array& image2d, const PngOptions& options);

/// The PNG file for a 2-D array in memory. Throws InvalidInput for other ranks, empty images,
/// vmin > vmax or a log scale with vmin <= 0.
std::vector<std::byte> render_png(const Array& image2d, const PngOptions& options = {});

/// Writes render_png(image2d, options) to `path`, atomically.
void write_png(const std::filesystem::path& path, const Array& image2d,
               const PngOptions& options = {});

/// Decodes a PNG held in memory (see the header comment for the result's dtype). Throws IoError
/// starting with `name` for anything libpng rejects, truncation, or dimensions the file's size
/// cannot honestly hold.
Array parse_png(std::span<const std::byte> bytes, std::string_view name);

/// Reads a PNG file (see parse_png).
Array read_png(const std::filesystem::path& path);

}  // namespace halfscope::io
