// .npy: NumPy-written fixtures (tests/data/numpy, made by make_numpy_fixtures.py), byte-identical
// output to NumPy's, round trips of every dtype and order, hand-built big-endian / Fortran files,
// and malformed headers.
#include <cstring>
#include <fstream>
#include <sstream>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

namespace fs = std::filesystem;

fs::path fixtures() {
  return test::source_dir() / "tests" / "data" / "numpy";
}

std::string hex_of(const Array& a) {
  const Array c = a.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data());
  std::string out;
  static const char* digits = "0123456789abcdef";
  for (std::int64_t i = 0; i < c.nbytes(); ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::string shape_text(const Shape& s) {
  if (s.empty()) return "-";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

struct Expected {
  std::string file, member, dtype, shape;
  bool fortran = false;
  std::string hex;
};

std::vector<Expected> expected_rows() {
  std::ifstream in(fixtures() / "expected.csv");
  EXPECT_TRUE(in) << "missing " << (fixtures() / "expected.csv");
  std::vector<Expected> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, ',');) f.push_back(field);
    if (f.size() == 5) f.emplace_back();  // empty data (trailing empty field)
    EXPECT_EQ(f.size(), 6u) << line;
    if (f.size() == 6) rows.push_back({f[0], f[1], f[2], f[3], f[4] == "1", f[5]});
  }
  return rows;
}

std::vector<std::byte> file_bytes(const fs::path& p) {
  return io::read_file_bytes(p);
}

/// A .npy file built by hand: preamble, dict padded with spaces and '\n', then `data`.
std::vector<std::byte> npy_bytes(const std::string& dict, const std::vector<std::uint8_t>& data,
                                 int major = 1) {
  std::string header = dict;
  const std::size_t pre = major == 1 ? 10 : 12;
  while ((pre + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<std::byte> out;
  for (unsigned char c : std::string("\x93NUMPY")) out.push_back(std::byte{c});
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (std::size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out.push_back(static_cast<std::byte>((header.size() >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (auto b : data) out.push_back(std::byte{b});
  return out;
}

TEST(Npy, ReadsEveryNumPyFixture) {
  int checked = 0;
  for (const Expected& e : expected_rows()) {
    if (!e.member.empty()) continue;
    SCOPED_TRACE(e.file);
    const Array a = io::read_npy(fixtures() / e.file);
    EXPECT_EQ(dtype_name(a.dtype()), e.dtype);
    EXPECT_EQ(shape_text(a.shape()), e.shape);
    if (e.fortran) {
      EXPECT_TRUE(a.is_f_contiguous());
      EXPECT_FALSE(a.is_c_contiguous());
    } else {
      EXPECT_TRUE(a.is_c_contiguous());
    }
    EXPECT_EQ(hex_of(a), e.hex);
    ++checked;
  }
  EXPECT_GE(checked, 25);
}

TEST(Npy, WritesTheSameBytesAsNumPy) {
  // Native little-endian files must come back byte for byte; big-endian ones must come back as
  // NumPy's little-endian file of the same values.
  for (const char* code : {"f2", "f4", "f8", "i2", "i4", "i8", "u2", "u4", "u8"}) {
    SCOPED_TRACE(code);
    const auto le = file_bytes(fixtures() / (std::string(code) + "_le.npy"));
    EXPECT_EQ(io::serialize_npy(io::read_npy(fixtures() / (std::string(code) + "_le.npy"))), le);
    EXPECT_EQ(io::serialize_npy(io::read_npy(fixtures() / (std::string(code) + "_be.npy"))), le);
  }
  for (const char* file :
       {"i1.npy", "u1.npy", "f8_fortran.npy", "scalar_f8.npy", "empty_f4.npy", "empty_2d_i2.npy"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(io::serialize_npy(io::read_npy(fixtures() / file)), file_bytes(fixtures() / file));
  }
}

TEST(Npy, ReadsVersion2And3Headers) {
  const Array v2 = io::read_npy(fixtures() / "u2_v2.npy");
  ASSERT_EQ(v2.dtype(), DType::u16);
  EXPECT_EQ(v2.data_as<std::uint16_t>()[4], 4000);
  const Array v3 = io::read_npy(fixtures() / "f4_v3.npy");
  ASSERT_EQ(v3.dtype(), DType::f32);
  EXPECT_EQ(v3.data_as<float>()[0], -1.0f);
  EXPECT_EQ(v3.data_as<float>()[3], 1.0f);
}

TEST(Npy, HandBuiltBigEndianFortranFile) {
  // shape (2, 3) float32 in Fortran order: memory holds columns [1 4] [2 5] [3 6].
  const std::vector<std::uint8_t> be = {0x3f, 0x80, 0, 0, 0x40, 0x80, 0, 0, 0x40, 0,    0, 0,
                                        0x40, 0xa0, 0, 0, 0x40, 0x40, 0, 0, 0x40, 0xc0, 0, 0};
  const Array a = io::parse_npy(
      npy_bytes("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 3), }", be), "be.npy");
  ASSERT_EQ(a.dtype(), DType::f32);
  ASSERT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.strides(), (Shape{1, 2}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.at_as_double(i), i + 1.0) << i;
  // Written back: native order, still Fortran, and the same values.
  const Array b = io::parse_npy(io::serialize_npy(a), "again.npy");
  EXPECT_EQ(b.strides(), (Shape{1, 2}));
  EXPECT_EQ(hex_of(b), hex_of(a));
}

TEST(Npy, HandBuiltBigEndianIntegersAndVersion2) {
  const Array a =
      io::parse_npy(npy_bytes("{\"descr\": \">i2\", \"fortran_order\": False, \"shape\": (3,)}",
                              {0x01, 0x02, 0xff, 0xfe, 0x80, 0x00}, 2),
                    "v2.npy");
  ASSERT_EQ(a.dtype(), DType::i16);
  EXPECT_EQ(a.data_as<std::int16_t>()[0], 0x0102);
  EXPECT_EQ(a.data_as<std::int16_t>()[1], -2);
  EXPECT_EQ(a.data_as<std::int16_t>()[2], -32768);
  // Python 2 wrote "3L"; NumPy still reads such version 1.0/2.0 files and so do we.
  const Array l = io::parse_npy(
      npy_bytes("{'descr': '<u1', 'fortran_order': False, 'shape': (2L,), }", {7, 9}), "py2.npy");
  EXPECT_EQ(l.shape(), (Shape{2}));
}

Array random_array(DType t, const Shape& shape, std::uint64_t seed) {
  Array a(t, shape);
  auto* p = static_cast<std::uint8_t*>(a.data());
  std::mt19937_64 rng(seed);
  for (std::int64_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<std::uint8_t>(rng());
  return a;
}

TEST(Npy, RoundTripsEveryDTypeAndOrderThroughFiles) {
  test::TempDir dir;
  for (DType t : {DType::f16, DType::f32, DType::f64, DType::i8, DType::i16, DType::i32, DType::i64,
                  DType::u8, DType::u16, DType::u32, DType::u64}) {
    for (bool fortran : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (fortran ? " F" : " C"));
      const Shape shape{3, 5, 2};
      Array a = random_array(t, shape, 42);  // random bits: NaN payloads must survive too
      if (fortran) a = Array(a.buffer(), t, shape, f_strides(shape));
      const fs::path path = dir / "x.npy";
      io::write_npy(path, a);
      const Array b = io::read_npy(path);
      EXPECT_EQ(b.dtype(), t);
      EXPECT_EQ(b.shape(), shape);
      EXPECT_EQ(b.strides(), a.strides());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.nbytes())), 0);
    }
  }
}

TEST(Npy, NonContiguousArraysAreWrittenInCOrder) {
  const Shape shape{4, 6};
  Array a(DType::i32, shape);
  for (int i = 0; i < 24; ++i) a.data_as<std::int32_t>()[i] = i;
  const Array cols = a.slice(1, 1, 4);  // 4 x 3 view with row stride 6
  ASSERT_FALSE(cols.is_c_contiguous());
  ASSERT_FALSE(cols.is_f_contiguous());
  const Array b = io::parse_npy(io::serialize_npy(cols), "cols.npy");
  ASSERT_EQ(b.shape(), (Shape{4, 3}));
  ASSERT_TRUE(b.is_c_contiguous());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(b.data_as<std::int32_t>()[r * 3 + c], r * 6 + c + 1);
}

TEST(Npy, HeaderIsPaddedTo64Bytes) {
  for (const Shape& s : {Shape{}, Shape{7}, Shape{123456789, 0}, Shape{1, 2, 3, 4, 5, 6, 7, 8}}) {
    const io::NpyParts parts = io::npy_parts(Array(DType::f32, s));
    EXPECT_EQ(parts.header.size() % 64, 0u) << shape_to_string(s);
    EXPECT_EQ(static_cast<char>(parts.header.back()), '\n');
  }
}

TEST(Npy, BFloat16IsRefusedWithAdvice) {
  test::TempDir dir;
  const fs::path path = dir / "keep.npy";
  io::write_npy(path, Array::zeros(DType::f32, {2}));
  const auto before = file_bytes(path);
  try {
    io::write_npy(path, Array::zeros(DType::bf16, {2}));
    FAIL() << "bf16 was written";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_bytes(path), before);  // the existing file is untouched
}

/// Expects parse_npy to throw E with a message starting with the name and containing `needle`.
template <class E>
void expect_error(const std::vector<std::byte>& bytes, const std::string& needle) {
  try {
    (void)io::parse_npy(bytes, "bad.npy");
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const E& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.npy: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

std::vector<std::byte> with_dict(const std::string& dict, std::size_t data_bytes = 8) {
  return npy_bytes(dict, std::vector<std::uint8_t>(data_bytes, 0));
}

TEST(Npy, MalformedFilesAreIoErrors) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  auto ok = with_dict(good);
  EXPECT_NO_THROW((void)io::parse_npy(ok, "ok.npy"));

  auto magic = ok;
  magic[1] = std::byte{'X'};
  expect_error<IoError>(magic, "not a .npy file");
  expect_error<IoError>(std::vector<std::byte>(ok.begin(), ok.begin() + 9), "truncated");
  auto version = ok;
  version[6] = std::byte{4};
  expect_error<IoError>(version, "version 4.0");
  auto huge_header = ok;
  huge_header[8] = huge_header[9] = std::byte{0xff};
  expect_error<IoError>(huge_header, "truncated: the .npy header claims 65535 bytes");
  auto truncated = ok;
  truncated.resize(truncated.size() - 3);
  expect_error<IoError>(truncated, "truncated: header says 8 bytes of data");
  auto trailing = ok;
  trailing.push_back(std::byte{0});
  expect_error<IoError>(trailing, "1 unexpected bytes");

  expect_error<IoError>(with_dict("{'descr': '<f4', 'shape': (2,), }"), "lacks 'fortran_order'");
  expect_error<IoError>(with_dict(good.substr(0, good.size() - 1) + "'x': 1}"),
                        "unexpected key 'x'");
  expect_error<IoError>(with_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                                  "'shape': (2,)}"),
                        "duplicate key");
  expect_error<IoError>(with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"),
                        "True or False");
  expect_error<IoError>(with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}"),
                        "not a tuple");
  expect_error<IoError>(with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"),
                        "negative dimension");
  expect_error<IoError>(
      with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}"),
      "2^63 bytes");
  expect_error<IoError>(
      with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 4294967296, 4294967296)}", 0),
      "too big");
  expect_error<IoError>(
      with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
      "64 bits");
  expect_error<IoError>(with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x"),
                        "only padding");
  expect_error<IoError>(with_dict("{'descr': '<f4\\n', 'fortran_order': False, 'shape': (2,)}"),
                        "plain ASCII string");
  expect_error<IoError>(with_dict("{'descr': '<x4', 'fortran_order': False, 'shape': (2,)}"),
                        "not a NumPy dtype");
  expect_error<IoError>(with_dict("['descr', '<f4']"), "'{'");
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  expect_error<IoError>(with_dict(many + ")}"), "more than 64 dimensions");
}

TEST(Npy, UnsupportedNumPyDTypesSaySo) {
  for (const char* descr : {"<c8", "|O", "|b1", "<U3", "<f16", "<M8[ns]"}) {
    SCOPED_TRACE(descr);
    expect_error<Unsupported>(
        with_dict(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,)}"),
        std::string("unsupported dtype '") + descr + "'");
  }
  expect_error<Unsupported>(
      with_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}"), "structured");
}

TEST(Npy, MissingFileAndBadOutputFolder) {
  test::TempDir dir;
  EXPECT_THROW((void)io::read_npy(dir / "absent.npy"), IoError);
  EXPECT_THROW(io::write_npy(dir / "no" / "such" / "x.npy", Array::zeros(DType::f32, {1})),
               IoError);
  EXPECT_THROW((void)io::serialize_npy(Array()), InvalidInput);
}

}  // namespace
}  // namespace halfscope
