// FITS reader and writer against files written by astropy (tests/data/fits, made by
// tests/data/make_seismic_fits_fixtures.py, with astropy's own reading in expected.json).
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/fits.hpp"
#include "test_support.hpp"

namespace halfscope::io {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

#if HALFSCOPE_HAS_FITS

fs::path fixture(const std::string& name) {
  return test::source_dir() / "tests/data/fits" / name;
}

const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture("expected.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

// Every element of `a` equals the JSON number at the same C-order position, compared exactly in
// the array's own type.
void expect_values(const Array& a, const nlohmann::json& values, const std::string& what) {
  ASSERT_EQ(a.size(), static_cast<std::int64_t>(values.size())) << what;
  visit_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      ADD_FAILURE() << what << ": unexpected half dtype";
    } else {
      const Array c = a.contiguous();
      const T* p = c.data_as<T>();
      for (std::size_t k = 0; k < values.size(); ++k) {
        if constexpr (std::is_floating_point_v<T>)
          ASSERT_EQ(static_cast<double>(p[k]), values[k].get<double>()) << what << " at " << k;
        else
          ASSERT_EQ(p[k], values[k].get<T>()) << what << " at " << k;
      }
    }
  });
}

bool same_bits(const Array& a, const Array& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Array ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data(), cb.data(), static_cast<std::size_t>(ca.nbytes())) == 0;
}

Shape json_shape(const nlohmann::json& j) {
  Shape s;
  for (const auto& v : j) s.push_back(v.get<std::int64_t>());
  return s;
}

void expect_keywords(const FitsImage& img, const nlohmann::json& keywords,
                     const std::string& what) {
  for (const auto& [key, value] : keywords.items()) {
    const FitsCard* c = find_card(img.cards, key);
    ASSERT_NE(c, nullptr) << what << ": keyword " << key << " lost";
    if (value.is_string())
      EXPECT_EQ(c->text(), value.get<std::string>()) << what << ": " << key;
    else
      EXPECT_EQ(std::stod(c->value), value.get<double>()) << what << ": " << key;
  }
}

std::vector<std::string> history(const FitsImage& img) {
  std::vector<std::string> h;
  for (const FitsCard& c : img.cards)
    if (c.commentary && c.keyword == "HISTORY") h.push_back(c.comment);
  return h;
}

std::string fixture_text(const std::string& name) {
  const auto b = read_file_bytes(fixture(name));
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// The file's header with the value of `keyword` replaced (the card is rewritten whole).
std::string with_card(std::string text, const std::string& keyword, const std::string& card) {
  for (std::size_t pos = 0; pos < text.size(); pos += 80) {
    if (text.compare(pos, keyword.size(), keyword) == 0 && text[pos + keyword.size()] == ' ') {
      std::string c = card;
      c.resize(80, ' ');
      text.replace(pos, 80, c);
      return text;
    }
  }
  ADD_FAILURE() << "no card " << keyword;
  return text;
}

TEST(Fits, PhysicalValuesMatchAstropy) {
  for (const auto& [name, e] : expected().items()) {
    SCOPED_TRACE(name);
    const FitsImage img = read_fits(fixture(name));
    EXPECT_EQ(img.data.shape(), json_shape(e["shape"]));
    EXPECT_EQ(std::string(dtype_name(img.data.dtype())), e["physical_dtype"].get<std::string>());
    EXPECT_EQ(img.bitpix, e["bitpix"].get<int>());
    EXPECT_FALSE(img.bscale || img.bzero) << "physical data needs no further scaling";
    expect_values(img.data, e["physical"], name);
    expect_keywords(img, e["keywords"], name);
    EXPECT_EQ(history(img), e["history"].get<std::vector<std::string>>());
    EXPECT_EQ(find_card(img.cards, "BITPIX"), nullptr) << "structural cards are not kept";
    EXPECT_EQ(find_card(img.cards, "NAXIS1"), nullptr);
  }
}

TEST(Fits, RawValuesMatchAstropyUnscaled) {
  for (const auto& [name, e] : expected().items()) {
    SCOPED_TRACE(name);
    const FitsImage img = read_fits(fixture(name), FitsValues::raw);
    EXPECT_EQ(std::string(dtype_name(img.data.dtype())), e["raw_dtype"].get<std::string>());
    expect_values(img.data, e["raw"], name);
    if (e["bzero"].is_null()) {
      EXPECT_FALSE(img.bzero);
    } else {
      ASSERT_TRUE(img.bzero);
      EXPECT_EQ(*img.bzero, e["bzero"].get<double>());
    }
    if (!e["bscale"].is_null()) {
      ASSERT_TRUE(img.bscale);
      EXPECT_EQ(*img.bscale, e["bscale"].get<double>());
    }
  }
}

TEST(Fits, RoundTripKeepsValuesBitsAndKeywords) {
  const TempDir dir;
  for (const auto& [name, e] : expected().items()) {
    SCOPED_TRACE(name);
    const FitsImage in = read_fits(fixture(name));
    const fs::path out = dir / ("copy-" + name);
    write_fits(out, in, "halfscope test convert from " + name);
    const FitsImage back = read_fits(out);
    EXPECT_TRUE(same_bits(in.data, back.data)) << dtype_name(back.data.dtype());
    expect_keywords(back, e["keywords"], name);
    auto h = e["history"].get<std::vector<std::string>>();
    h.push_back("halfscope test convert from " + name);
    EXPECT_EQ(history(back), h);

    // Raw values written with their scaling come back as the same stored numbers and the same
    // physical values.
    const FitsImage raw = read_fits(fixture(name), FitsValues::raw);
    write_fits(out, raw, "");
    EXPECT_TRUE(same_bits(read_fits(out, FitsValues::raw).data, raw.data));
    EXPECT_TRUE(same_bits(read_fits(out).data, in.data));
  }
}

TEST(Fits, WriterChoosesBitpixFromDtype) {
  const std::pair<DType, int> cases[] = {
      {DType::u8, 8},   {DType::i8, 8},   {DType::i16, 16}, {DType::u16, 16},  {DType::i32, 32},
      {DType::u32, 32}, {DType::i64, 64}, {DType::u64, 64}, {DType::f32, -32}, {DType::f64, -64}};
  const auto noise = test::random_floats(24, 1.f, 120.f, 7);
  for (const auto& [dtype, bitpix] : cases) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    FitsImage img;
    img.data = Array::from_values<float>(noise, {2, 3, 4}).astype(dtype);
    const auto bytes = serialize_fits(img, "");
    EXPECT_EQ(bytes.size() % 2880, 0u);
    const FitsImage back = parse_fits(bytes, "mem.fits");
    EXPECT_EQ(back.bitpix, bitpix);
    EXPECT_TRUE(same_bits(back.data, img.data));
  }
}

TEST(Fits, ExtremesAndNanPayloadsSurvive) {
  FitsImage img;
  const std::uint64_t u[] = {0, 1, std::uint64_t{1} << 63,
                             std::numeric_limits<std::uint64_t>::max()};
  img.data = Array::from_values<std::uint64_t>(u, {4});
  EXPECT_TRUE(same_bits(parse_fits(serialize_fits(img, ""), "u.fits").data, img.data));
  const float f[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f,
                     std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::denorm_min(), std::bit_cast<float>(0x7fc12345u)};
  img.data = Array::from_values<float>(f, {5});
  EXPECT_TRUE(same_bits(parse_fits(serialize_fits(img, ""), "f.fits").data, img.data));
}

TEST(Fits, RejectsHalfAndEmptyArrays) {
  FitsImage img;
  img.data = Array(DType::f16, {2, 2});
  EXPECT_THROW((void)serialize_fits(img, ""), Unsupported);
  img.data = Array(DType::bf16, {2});
  EXPECT_THROW((void)serialize_fits(img, ""), Unsupported);
  img.data = Array();
  EXPECT_THROW((void)serialize_fits(img, ""), InvalidInput);
  img.bscale = 2.0;
  img.data = Array(DType::u16, {2});
  EXPECT_THROW((void)serialize_fits(img, ""), InvalidInput) << "stored values cannot be uint16";
}

TEST(Fits, ImageInFirstExtensionIsFound) {
  const FitsImage img = read_fits(fixture("extension.fits"));
  EXPECT_EQ(img.data.shape(), (Shape{2, 3}));
  const FitsCard* extname = find_card(img.cards, "EXTNAME");
  ASSERT_NE(extname, nullptr);
  EXPECT_EQ(extname->text(), "SCI");
  EXPECT_EQ(find_card(img.cards, "XTENSION"), nullptr);
}

TEST(Fits, CorruptHeadersGiveIoErrorNamingTheFile) {
  const std::string good = fixture_text("bitpix16.fits");
  const auto expect_io_error = [](const std::string& bytes, const std::string& what) {
    try {
      (void)parse_fits(as_bytes(bytes), "bad.fits");
      ADD_FAILURE() << what << ": no error";
    } catch (const IoError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.fits: ", 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  expect_io_error(with_card(good, "BITPIX", "BITPIX  =                   17"), "garbled BITPIX");
  expect_io_error(with_card(good, "BITPIX", "BITPIX  = 'sixteen'"), "string BITPIX");
  expect_io_error(with_card(good, "END", "XND"), "missing END");
  expect_io_error(with_card(good, "NAXIS1", "NAXIS1  =        1099511627776"), "huge NAXIS1");
  expect_io_error(with_card(good, "NAXIS1", "NAXIS1  =                   -4"), "negative NAXIS1");
  expect_io_error(good.substr(0, 2880 + 8), "truncated data");
  expect_io_error(good.substr(0, 1000), "truncated header");
  expect_io_error("", "empty");
  expect_io_error(std::string(5760, 'x'), "not FITS");
  expect_io_error(with_card(good, "NAXIS", "NAXIS   =                    0"), "no image");
}

// A FITS file made of the given headers (cards padded to 80 characters, END added, blocks padded)
// each followed by its data bytes.
std::string fits_file(const std::vector<std::pair<std::vector<std::string>, std::string>>& hdus) {
  std::string out;
  for (const auto& [cards, data] : hdus) {
    for (std::string c : cards) {
      c.resize(80, ' ');
      out += c;
    }
    out += std::string("END").append(77, ' ');
    out.resize((out.size() + 2879) / 2880 * 2880, ' ');
    out += data;
    out.resize((out.size() + 2879) / 2880 * 2880, '\0');
  }
  return out;
}

const std::vector<std::string> kEmptyPrimary = {
    "SIMPLE  =                    T", "BITPIX  =                    8",
    "NAXIS   =                    0", "EXTEND  =                    T"};

std::vector<std::string> table_header(const std::string& naxis2) {
  return {"XTENSION= 'BINTABLE'",
          "BITPIX  =                    8",
          "NAXIS   =                    2",
          "NAXIS1  =                    4",
          "NAXIS2  = " + naxis2,
          "PCOUNT  =                    0",
          "GCOUNT  =                    1",
          "TFIELDS =                    1",
          "TFORM1  = '1J      '"};
}

const std::vector<std::string> kImageExtension = {
    "XTENSION= 'IMAGE   '",           "BITPIX  =                   16",
    "NAXIS   =                    1", "NAXIS1  =                    3",
    "PCOUNT  =                    0", "GCOUNT  =                    1",
    "OBJECT  = 'after a table'"};
const std::string kImageData("\x00\x01\xff\xfe\x7f\xff", 6);  // big-endian 1, -2, 32767

TEST(Fits, ImageAfterATableIsFoundAndBrokenTablesAreRefused) {
  const std::string good = fits_file({{kEmptyPrimary, ""},
                                      {table_header("                   2"), std::string(8, '\1')},
                                      {kImageExtension, kImageData}});
  const FitsImage img = parse_fits(as_bytes(good), "table.fits");
  ASSERT_EQ(img.data.dtype(), DType::i16);
  EXPECT_EQ(img.data.shape(), (Shape{3}));
  EXPECT_EQ(img.data.data_as<std::int16_t>()[0], 1);
  EXPECT_EQ(img.data.data_as<std::int16_t>()[1], -2);
  EXPECT_EQ(img.data.data_as<std::int16_t>()[2], 32767);
  EXPECT_EQ(find_card(img.cards, "OBJECT")->text(), "after a table");

  // cfitsio reads uninitialised memory parsing a table header with a broken NAXIS2 (found by
  // fuzzing): halfscope must refuse it before cfitsio sees it.
  const std::string broken = fits_file({{kEmptyPrimary, ""},
                                        {table_header("'SIMPLE'"), std::string(8, '\1')},
                                        {kImageExtension, kImageData}});
  try {
    (void)parse_fits(as_bytes(broken), "broken.fits");
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.fits: HDU 2: expected NAXIS2"), std::string::npos)
        << e.what();
  }

  auto compressed = table_header("                   2");
  compressed.push_back("ZIMAGE  =                    T");
  EXPECT_THROW((void)parse_fits(
                   as_bytes(fits_file({{kEmptyPrimary, ""}, {compressed, std::string(8, '\1')}})),
                   "fpack.fits"),
               Unsupported);
}

TEST(Fits, ZeroBscaleIsRefused) {
  const std::string bad =
      with_card(fixture_text("bitpix16.fits"), "BUNIT", "BSCALE  =                    0");
  EXPECT_THROW((void)parse_fits(as_bytes(bad), "zero.fits"), IoError);
}

TEST(Fits, FailedWriteLeavesExistingFileUntouched) {
  const TempDir dir;
  const fs::path out = dir / "keep.fits";
  FitsImage img = read_fits(fixture("bitpix16.fits"));
  write_fits(out, img, "first");
  const auto before = read_file_bytes(out);
  img.data = Array(DType::f16, {3});
  EXPECT_THROW(write_fits(out, img, "second"), Unsupported);
  EXPECT_EQ(read_file_bytes(out), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Fits, CardTextUnquotes) {
  EXPECT_EQ((FitsCard{"OBJECT", "'O''Neil  '", "", false}.text()), "O'Neil");
  EXPECT_EQ((FitsCard{"CDELT1", "-1.5E-04", "", false}.text()), "-1.5E-04");
}

#else

TEST(Fits, UnsupportedWithoutCfitsio) {
  EXPECT_THROW((void)parse_fits({}, "x.fits"), Unsupported);
}

#endif

}  // namespace
}  // namespace halfscope::io
