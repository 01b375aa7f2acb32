// PNG: write-then-read of ramps, the scales' documented levels, cubehelix luminance, and reading
// PNGs encoded here by hand with zlib (16-bit, 1-bit, palette, RGBA, gray+alpha), plus damaged
// ones.
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/png.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

using io::Colormap;
using io::PngOptions;
using io::Scale;

Array row_of(const std::vector<double>& v) {
  return Array::from_values<double>(v, {1, static_cast<std::int64_t>(v.size())});
}

std::vector<int> levels(const Array& image, PngOptions o) {
  const io::Levels lv = io::image_levels(image, o);
  return std::vector<int>(lv.level.begin(), lv.level.end());
}

TEST(Png, GrayLinearRampReadsBackExactly) {
  for (DType t : {DType::u8, DType::i16, DType::f16, DType::bf16, DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array ramp(DType::f64, {3, 256});
    for (int i = 0; i < 3 * 256; ++i) ramp.data_as<double>()[i] = i % 256;
    const Array back = io::parse_png(io::render_png(ramp.astype(t)), "ramp.png");
    ASSERT_EQ(back.dtype(), DType::u8);
    ASSERT_EQ(back.shape(), (Shape{3, 256}));
    for (int i = 0; i < 3 * 256; ++i) ASSERT_EQ(back.data_as<std::uint8_t>()[i], i % 256) << i;
  }
}

TEST(Png, ScalesMapToTheDocumentedLevels) {
  PngOptions o;
  o.scale = Scale::cbrt;
  EXPECT_EQ(levels(row_of({-8, -1, 0, 1, 8}), o), (std::vector<int>{0, 64, 128, 191, 255}));
  o.scale = Scale::log;  // floor = max(1e-9, 1 * 1e-6) = 1e-6: six decades
  EXPECT_EQ(levels(row_of({-5, 0, 1e-9, 1e-6, 1e-3, 1}), o),
            (std::vector<int>{0, 0, 0, 0, 128, 255}));
  o.vmin = 1e-2;  // an explicit floor
  EXPECT_EQ(levels(row_of({1e-3, 1e-2, 1e-1, 1}), o), (std::vector<int>{0, 0, 128, 255}));
  o = {};
  o.vmin = 10;
  o.vmax = 20;
  EXPECT_EQ(levels(row_of({0, 10, 15, 20, 99}), o), (std::vector<int>{0, 0, 128, 255, 255}));
}

TEST(Png, SpecialValuesAndConstantImages) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const io::Levels lv = io::image_levels(row_of({nan, -inf, 0, 1, 2, inf}), {});
  EXPECT_EQ(std::vector<int>(lv.level.begin(), lv.level.end()),
            (std::vector<int>{0, 0, 0, 128, 255, 255}));  // min/max from the finite values only
  EXPECT_EQ(lv.nan, (std::vector<bool>{true, false, false, false, false, false}));
  EXPECT_EQ(levels(row_of({7, 7, 7}), {}), (std::vector<int>{128, 128, 128}));
  PngOptions log;
  log.scale = Scale::log;
  EXPECT_EQ(levels(row_of({-1, 0, -3}), log), (std::vector<int>{128, 128, 128}));
  EXPECT_EQ(levels(row_of({nan, nan}), {}), (std::vector<int>{0, 0}));
  // Perceptual NaN is magenta, a colour the colormap itself never takes.
  PngOptions p;
  p.colormap = Colormap::perceptual;
  const Array rgb = io::parse_png(io::render_png(row_of({nan, 0, 1}), p), "nan.png");
  EXPECT_NEAR(rgb.data_as<float>()[0], 0.2126 * 255 + 0.0722 * 255, 1e-3);
  for (int i = 0; i < 256; ++i)
    EXPECT_FALSE(io::colormap_color(Colormap::perceptual, static_cast<std::uint8_t>(i)) ==
                 (io::Rgb{255, 0, 255}));
}

TEST(Png, BadOptionsAndShapes) {
  PngOptions o;
  o.vmin = 2;
  o.vmax = 1;
  EXPECT_THROW((void)io::render_png(row_of({1, 2}), o), InvalidInput);
  o = {};
  o.scale = Scale::log;
  o.vmin = 0;
  EXPECT_THROW((void)io::render_png(row_of({1, 2}), o), InvalidInput);
  o = {};
  o.vmax = std::numeric_limits<double>::infinity();
  EXPECT_THROW((void)io::render_png(row_of({1, 2}), o), InvalidInput);
  EXPECT_THROW((void)io::render_png(Array::zeros(DType::f32, {4})), InvalidInput);
  EXPECT_THROW((void)io::render_png(Array::zeros(DType::f32, {0, 4})), InvalidInput);
  test::TempDir dir;
  EXPECT_THROW(io::write_png(dir / "no" / "x.png", row_of({1})), IoError);
}

TEST(Png, ParseNamesListTheValidOnes) {
  EXPECT_EQ(io::parse_scale("cbrt"), Scale::cbrt);
  EXPECT_EQ(io::parse_scale("log"), Scale::log);
  EXPECT_EQ(io::parse_colormap("grey"), Colormap::gray);
  EXPECT_EQ(io::parse_colormap(io::colormap_name(Colormap::perceptual)), Colormap::perceptual);
  try {
    (void)io::parse_scale("sqrt");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("linear, log or cbrt"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)io::parse_colormap("viridis"), InvalidInput);
}

TEST(Png, CubehelixLuminanceIncreasesMonotonically) {
  double previous = -1;
  for (int i = 0; i < 256; ++i) {
    const io::Rgb c = io::colormap_color(Colormap::perceptual, static_cast<std::uint8_t>(i));
    const double y = 0.30 * c.r + 0.59 * c.g + 0.11 * c.b;
    EXPECT_GT(y, previous) << "level " << i;
    previous = y;
    const auto exact = io::cubehelix(i / 255.0);  // luminance of the unrounded colour is t
    EXPECT_NEAR(0.30 * exact[0] + 0.59 * exact[1] + 0.11 * exact[2], i / 255.0, 1e-5);
  }
  EXPECT_EQ(io::colormap_color(Colormap::perceptual, 0), (io::Rgb{0, 0, 0}));
  EXPECT_EQ(io::colormap_color(Colormap::perceptual, 255), (io::Rgb{255, 255, 255}));
  const io::Rgb mid = io::colormap_color(Colormap::perceptual, 128);
  EXPECT_TRUE(mid.r != mid.g || mid.g != mid.b) << "the middle of the ramp should be coloured";
}

TEST(Png, PerceptualRampReadsBackAsTheColormapsColours) {
  PngOptions o;
  o.colormap = Colormap::perceptual;
  Array ramp(DType::f32, {2, 256});
  for (int i = 0; i < 512; ++i) ramp.data_as<float>()[i] = static_cast<float>(i % 256) * 0.01f;
  const Array y = io::parse_png(io::render_png(ramp, o), "perceptual.png");
  ASSERT_EQ(y.dtype(), DType::f32);  // RGB reads back as Rec. 709 luminance
  for (int i = 0; i < 512; ++i) {
    const io::Rgb c = io::colormap_color(Colormap::perceptual, static_cast<std::uint8_t>(i % 256));
    EXPECT_NEAR(y.data_as<float>()[i], 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b, 1e-3) << i;
  }
  EXPECT_EQ(y.data_as<float>()[0], 0.0f);
  EXPECT_NEAR(y.data_as<float>()[255], 255.0f, 1e-3);
}

// ---- PNGs encoded by hand: an encoder independent of libpng ------------------------------------

void put32(std::vector<std::byte>& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::byte>((v >> s) & 0xff));
}

void chunk(std::vector<std::byte>& out, const char* type, const std::vector<std::uint8_t>& data) {
  put32(out, static_cast<std::uint32_t>(data.size()));
  std::vector<std::uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  for (auto c : body) out.push_back(std::byte{c});
  put32(out, static_cast<std::uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
}

/// A PNG with rows of raw samples (filter type 0 is prepended to each row here).
std::vector<std::byte> make_png(std::uint32_t w, std::uint32_t h, int depth, int color,
                                const std::vector<std::uint8_t>& rows,
                                const std::vector<std::uint8_t>& plte = {}) {
  std::vector<std::byte> out;
  for (int c : {0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a})
    out.push_back(static_cast<std::byte>(c));
  std::vector<std::uint8_t> ihdr;
  for (std::uint32_t v : {w, h})
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<std::uint8_t>(v >> s));
  ihdr.insert(ihdr.end(),
              {static_cast<std::uint8_t>(depth), static_cast<std::uint8_t>(color), 0, 0, 0});
  chunk(out, "IHDR", ihdr);
  if (!plte.empty()) chunk(out, "PLTE", plte);
  const std::size_t row_bytes = h ? rows.size() / h : 0;
  std::vector<std::uint8_t> filtered;
  for (std::uint32_t r = 0; r < h; ++r) {
    filtered.push_back(0);
    filtered.insert(filtered.end(), rows.begin() + r * row_bytes,
                    rows.begin() + (r + 1) * row_bytes);
  }
  uLongf n = compressBound(static_cast<uLong>(filtered.size()));
  std::vector<std::uint8_t> z(n);
  EXPECT_EQ(compress(z.data(), &n, filtered.data(), static_cast<uLong>(filtered.size())), Z_OK);
  z.resize(n);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  return out;
}

TEST(Png, ReadsHandEncodedFormats) {
  // 16-bit gray, 2 x 2, big-endian samples.
  const Array g16 = io::parse_png(
      make_png(2, 2, 16, 0, {0x00, 0x01, 0xff, 0xff, 0x12, 0x34, 0x80, 0x00}), "g16.png");
  ASSERT_EQ(g16.dtype(), DType::u16);
  EXPECT_EQ(std::vector<int>(g16.data_as<std::uint16_t>(), g16.data_as<std::uint16_t>() + 4),
            (std::vector<int>{1, 65535, 0x1234, 0x8000}));
  // 1-bit gray, 10 x 1: bits 1011001110 expand to 0 / 255.
  const Array g1 = io::parse_png(make_png(10, 1, 1, 0, {0b10110011, 0b10000000}), "g1.png");
  ASSERT_EQ(g1.dtype(), DType::u8);
  const std::vector<int> bits = {1, 0, 1, 1, 0, 0, 1, 1, 1, 0};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(g1.data_as<std::uint8_t>()[i], bits[i] * 255) << i;
  // 8-bit gray + alpha: alpha dropped.
  const Array ga = io::parse_png(make_png(2, 1, 8, 4, {10, 0, 200, 255}), "ga.png");
  ASSERT_EQ(ga.dtype(), DType::u8);
  EXPECT_EQ(ga.data_as<std::uint8_t>()[0], 10);
  EXPECT_EQ(ga.data_as<std::uint8_t>()[1], 200);
  // Palette: index 1 -> pure green, index 0 -> white.
  const Array pal =
      io::parse_png(make_png(2, 1, 8, 3, {1, 0}, {255, 255, 255, 0, 255, 0}), "p.png");
  ASSERT_EQ(pal.dtype(), DType::f32);
  EXPECT_NEAR(pal.data_as<float>()[0], 0.7152 * 255, 1e-3);
  EXPECT_NEAR(pal.data_as<float>()[1], 255.0, 1e-3);
  // 16-bit RGBA: luminance in 0..65535 units, alpha ignored.
  const Array rgba =
      io::parse_png(make_png(1, 1, 16, 6, {0x10, 0x00, 0x20, 0x00, 0x30, 0x00, 0, 0}), "rgba.png");
  ASSERT_EQ(rgba.dtype(), DType::f32);
  EXPECT_NEAR(rgba.data_as<float>()[0], 0.2126 * 0x1000 + 0.7152 * 0x2000 + 0.0722 * 0x3000, 1e-2);
}

void expect_png_error(const std::vector<std::byte>& bytes, const std::string& needle) {
  try {
    (void)io::parse_png(bytes, "bad.png");
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.png: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(Png, DamagedFilesAreIoErrors) {
  const auto good = io::render_png(row_of({1, 2, 3}));
  EXPECT_NO_THROW((void)io::parse_png(good, "good.png"));
  expect_png_error(std::vector<std::byte>(good.begin(), good.begin() + 4), "not a PNG file");
  expect_png_error(std::vector<std::byte>(good.begin(), good.begin() + good.size() / 2), "bad PNG");
  expect_png_error(std::vector<std::byte>(good.begin(), good.end() - 12), "bad PNG");  // no IEND
  auto crc = good;
  crc[29] ^= std::byte{1};  // the IHDR CRC
  expect_png_error(crc, "bad PNG");
  auto bad_depth = make_png(2, 2, 8, 0, {1, 2, 3, 4});
  bad_depth[24] = std::byte{7};
  expect_png_error(bad_depth, "bad PNG");
  // 1,000,000 x 1,000,000 pixels claimed by a file of about a kilobyte: refused before any
  // allocation, quickly.
  const auto start = std::chrono::steady_clock::now();
  expect_png_error(make_png(1000000, 1000000, 8, 0, {}), "cannot be stored in a");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(Png, FilesOnDisk) {
  test::TempDir dir;
  PngOptions o;
  o.colormap = Colormap::perceptual;
  o.scale = Scale::cbrt;
  io::write_png(dir / "x.png", row_of({-1, 0, 1}), o);
  const Array y = io::read_png(dir / "x.png");
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  EXPECT_THROW((void)io::read_png(dir / "absent.png"), IoError);
}

}  // namespace
}  // namespace halfscope
