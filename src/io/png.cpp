// PNG encoding and decoding through libpng, in memory.
//
// libpng reports errors by longjmp. A longjmp across C++ frames that own objects skips their
// destructors, so every setjmp lives in a small function (run_encode, read_info, read_rows) whose
// frame holds only plain pointers and scalars; all C++ objects live in the callers, which turn a
// failure into an IoError with the message libpng gave.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/png.hpp"

namespace halfscope::io {

namespace {

/// State shared with the libpng callbacks. Plain data only: it is touched across longjmp.
struct PngContext {
  const std::byte* in = nullptr;  // decoding: the file
  std::size_t in_size = 0;
  std::size_t in_pos = 0;
  std::vector<std::byte>* out = nullptr;  // encoding: the file being built
  char message[256] = "unknown libpng error";
};

void on_error(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof ctx->message, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // warnings are not failures; stay quiet

void on_read(png_structp png, png_bytep data, png_size_t length) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (length > ctx->in_size - ctx->in_pos) png_error(png, "truncated: the file ends early");
  std::memcpy(data, ctx->in + ctx->in_pos, length);
  ctx->in_pos += length;
}

void on_write(png_structp png, png_bytep data, png_size_t length) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  try {
    const auto* p = reinterpret_cast<const std::byte*>(data);
    ctx->out->insert(ctx->out->end(), p, p + length);
  } catch (...) {  // no exception may cross libpng's C frames
    png_error(png, "out of memory while encoding");
  }
}

void on_flush(png_structp) {}

/// Encodes rows of `row_bytes` each; false on a libpng error (message in the context).
bool run_encode(png_structp png, png_infop info, std::uint32_t width, std::uint32_t height,
                int color_type, const std::byte* pixels, std::size_t row_bytes) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, width, height, 8, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::uint32_t r = 0; r < height; ++r)
    png_write_row(png, reinterpret_cast<png_const_bytep>(pixels + r * row_bytes));
  png_write_end(png, info);
  return true;
}

/// What read_info learned: the image geometry after the transforms it set up.
struct PngInfo {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, channels = 0;
  std::size_t row_bytes = 0;
  std::uint64_t raw_bytes = 0;  // size of the filtered image data before transforms
};

bool read_info(png_structp png, png_infop info, PngInfo* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  int interlace = 0;
  png_get_IHDR(png, info, &out->width, &out->height, &out->bit_depth, &out->color_type, &interlace,
               nullptr, nullptr);
  const int raw_channels = png_get_channels(png, info);
  out->raw_bytes = (static_cast<std::uint64_t>(out->width) * out->bit_depth * raw_channels + 7) / 8;
  out->raw_bytes = (out->raw_bytes + 1) * out->height;
  if (out->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (out->color_type == PNG_COLOR_TYPE_GRAY && out->bit_depth < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);  // alpha channels, and the one palette expansion makes from tRNS
  if (out->bit_depth == 16) png_set_swap(png);  // PNG is big-endian; arrays are native
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  out->bit_depth = png_get_bit_depth(png, info);
  out->color_type = png_get_color_type(png, info);
  out->channels = png_get_channels(png, info);
  out->row_bytes = png_get_rowbytes(png, info);
  return true;
}

bool read_rows(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);
  return true;
}

/// Frees libpng's structures however the function that made them is left.
struct PngHandle {
  png_structp png = nullptr;
  png_infop info = nullptr;
  bool reading = true;
  ~PngHandle() {
    if (reading)
      png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    else
      png_destroy_write_struct(&png, info ? &info : nullptr);
  }
};

}  // namespace

std::vector<std::byte> render_png(const Array& image2d, const PngOptions& options) {
  const Levels lv = image_levels(image2d, options);
  const std::int64_t height = image2d.dim(0), width = image2d.dim(1);
  if (width > 0x7fffffff || height > 0x7fffffff)
    throw InvalidInput("PNG: " + image2d.describe() + " exceeds the PNG limit of 2^31-1 per side");
  const bool rgb = options.colormap != Colormap::gray;
  const std::size_t channels = rgb ? 3 : 1;
  const std::size_t row_bytes = static_cast<std::size_t>(width) * channels;
  std::vector<std::byte> pixels(row_bytes * static_cast<std::size_t>(height));
  constexpr Rgb kNanRgb{255, 0, 255};
  for (std::size_t i = 0; i < lv.level.size(); ++i) {
    if (!rgb) {
      pixels[i] = static_cast<std::byte>(lv.nan[i] ? 0 : lv.level[i]);
      continue;
    }
    const Rgb c = lv.nan[i] ? kNanRgb : colormap_color(options.colormap, lv.level[i]);
    pixels[3 * i] = static_cast<std::byte>(c.r);
    pixels[3 * i + 1] = static_cast<std::byte>(c.g);
    pixels[3 * i + 2] = static_cast<std::byte>(c.b);
  }

  std::vector<std::byte> file;
  PngContext ctx;
  ctx.out = &file;
  PngHandle h;
  h.reading = false;
  h.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, on_error, on_warning);
  if (h.png) h.info = png_create_info_struct(h.png);
  if (!h.png || !h.info) throw IoError("PNG: cannot create the libpng writer (out of memory)");
  png_set_user_limits(h.png, 0x7fffffff, 0x7fffffff);  // the default caps width at 1e6
  png_set_write_fn(h.png, &ctx, on_write, on_flush);
  if (!run_encode(h.png, h.info, static_cast<std::uint32_t>(width),
                  static_cast<std::uint32_t>(height),
                  rgb ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, pixels.data(), row_bytes))
    throw IoError(std::string("PNG: encoding failed: ") + ctx.message);
  return file;
}

void write_png(const std::filesystem::path& path, const Array& image2d, const PngOptions& options) {
  check_output_path(path);
  write_file_atomic(path, render_png(image2d, options));
}

Array parse_png(std::span<const std::byte> bytes, std::string_view name) {
  const std::string n(name);
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0)
    throw IoError(n + ": not a PNG file (expected the 8-byte PNG signature at the start)");
  PngContext ctx;
  ctx.in = bytes.data();
  ctx.in_size = bytes.size();
  PngHandle h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, on_error, on_warning);
  if (h.png) h.info = png_create_info_struct(h.png);
  if (!h.png || !h.info) throw IoError(n + ": cannot create the libpng reader (out of memory)");
  png_set_read_fn(h.png, &ctx, on_read);
  PngInfo pi;
  if (!read_info(h.png, h.info, &pi)) throw IoError(n + ": bad PNG: " + ctx.message);
  // Deflate expands at most ~1032:1, so image data larger than that multiple of the file cannot
  // be genuine; refusing it keeps a 100-byte file from claiming a gigapixel allocation.
  if (pi.raw_bytes > 1100 * static_cast<std::uint64_t>(bytes.size()) + 4096)
    throw IoError(n + ": bad PNG: " + std::to_string(pi.width) + "x" + std::to_string(pi.height) +
                  " pixels cannot be stored in a " + std::to_string(bytes.size()) + "-byte file");
  const bool gray = pi.color_type == PNG_COLOR_TYPE_GRAY;
  if (pi.channels != (gray ? 1 : 3))  // the transforms above leave gray or RGB, nothing else
    throw IoError(n + ": bad PNG: unexpected colour type " + std::to_string(pi.color_type));
  const DType raw_type = pi.bit_depth == 16 ? DType::u16 : DType::u8;
  const Shape shape{static_cast<std::int64_t>(pi.height), static_cast<std::int64_t>(pi.width)};
  Array raw(raw_type, gray ? shape : Shape{shape[0], shape[1] * pi.channels});
  if (static_cast<std::int64_t>(pi.row_bytes) * shape[0] != raw.nbytes())
    throw IoError(n + ": bad PNG: unexpected row size " + std::to_string(pi.row_bytes));
  std::vector<png_bytep> rows(pi.height);
  for (png_uint_32 r = 0; r < pi.height; ++r)
    rows[r] = static_cast<png_bytep>(raw.data()) + static_cast<std::size_t>(r) * pi.row_bytes;
  if (!read_rows(h.png, h.info, rows.data())) throw IoError(n + ": bad PNG: " + ctx.message);
  if (gray) return raw;

  // RGB (palette expanded, alpha stripped): Rec. 709 luminance of the stored samples.
  Array y(DType::f32, shape);
  float* dst = y.data_as<float>();
  const auto count = static_cast<std::size_t>(y.size());
  const auto luminance = [&](const auto* src) {
    for (std::size_t i = 0; i < count; ++i)
      dst[i] = static_cast<float>(0.2126 * src[3 * i] + 0.7152 * src[3 * i + 1] +
                                  0.0722 * src[3 * i + 2]);
  };
  if (raw_type == DType::u16)
    luminance(raw.data_as<std::uint16_t>());
  else
    luminance(raw.data_as<std::uint8_t>());
  return y;
}

Array read_png(const std::filesystem::path& path) {
  return parse_png(read_file_bytes(path), path.string());
}

}  // namespace halfscope::io
