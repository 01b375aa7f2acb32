// .npz: archives written by np.savez / np.savez_compressed (fixtures), archives built here by hand
// with zlib (stored and deflated members, and hostile ones), and halfscope's own writer.
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
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
  std::ostringstream out;
  for (std::int64_t i = 0; i < c.nbytes(); ++i)
    out << "0123456789abcdef"[p[i] >> 4] << "0123456789abcdef"[p[i] & 15];
  return out.str();
}

TEST(Npz, ReadsNumPySavezAndSavezCompressed) {
  for (const std::string file : {"savez.npz", "savez_compressed.npz"}) {
    SCOPED_TRACE(file);
    std::ifstream in(fixtures() / "expected.csv");
    ASSERT_TRUE(in);
    std::vector<std::vector<std::string>> rows;
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      for (std::string field; std::getline(ss, field, ',');) f.push_back(field);
      if (f.size() == 6 && f[0] == file) rows.push_back(f);
    }
    ASSERT_EQ(rows.size(), 3u);
    const io::NamedArrays arrays = io::read_npz(fixtures() / file);
    ASSERT_EQ(arrays.size(), rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(arrays[i].first, rows[i][1]);
      EXPECT_EQ(dtype_name(arrays[i].second.dtype()), rows[i][2]);
      EXPECT_EQ(hex_of(arrays[i].second), rows[i][5]);
    }
    EXPECT_EQ(arrays[0].second.shape(), (Shape{2, 3}));
    EXPECT_EQ(arrays[2].second.shape(), Shape{});
  }
}

// ---- hand-built archives ----------------------------------------------------------------------

struct Member {
  std::string name;
  std::vector<std::byte> payload;  // the uncompressed member (.npy bytes)
  int method = 0;                  // 0 stored, 8 deflated, anything else as-is
  std::uint16_t flags = 0;
  std::optional<std::uint32_t> crc;     // overrides the true CRC
  std::optional<std::uint32_t> csize;   // overrides the compressed size in the directory
  std::optional<std::uint32_t> usize;   // overrides the size in the directory
  std::optional<std::uint32_t> offset;  // overrides the local header offset in the directory
};

Member member(std::string name, std::vector<std::byte> payload, int method) {
  Member m;
  m.name = std::move(name);
  m.payload = std::move(payload);
  m.method = method;
  return m;
}

std::vector<std::byte> deflate_raw(const std::vector<std::byte>& in) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void put(std::vector<std::byte>& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
void put(std::vector<std::byte>& b, const std::string& s) {
  for (char c : s) b.push_back(static_cast<std::byte>(c));
}

std::vector<std::byte> make_zip(const std::vector<Member>& members) {
  std::vector<std::byte> file, dir;
  for (const Member& m : members) {
    const auto data = m.method == 8 ? deflate_raw(m.payload) : m.payload;
    const auto crc = m.crc.value_or(static_cast<std::uint32_t>(crc32(
        0, reinterpret_cast<const Bytef*>(m.payload.data()), static_cast<uInt>(m.payload.size()))));
    const std::uint64_t offset = file.size();
    put(file, 0x04034b50, 4), put(file, 20, 2), put(file, m.flags, 2), put(file, m.method, 2);
    put(file, 0, 4), put(file, crc, 4), put(file, data.size(), 4), put(file, m.payload.size(), 4);
    put(file, m.name.size(), 2), put(file, 0, 2), put(file, m.name);
    file.insert(file.end(), data.begin(), data.end());
    put(dir, 0x02014b50, 4), put(dir, 20, 2), put(dir, 20, 2), put(dir, m.flags, 2);
    put(dir, m.method, 2), put(dir, 0, 4), put(dir, crc, 4),
        put(dir, m.csize.value_or(data.size()), 4);
    put(dir, m.usize.value_or(m.payload.size()), 4), put(dir, m.name.size(), 2), put(dir, 0, 2);
    put(dir, 0, 2), put(dir, 0, 2), put(dir, 0, 2), put(dir, 0, 4);
    put(dir, m.offset.value_or(offset), 4), put(dir, m.name);
  }
  const std::uint64_t dir_offset = file.size();
  file.insert(file.end(), dir.begin(), dir.end());
  put(file, 0x06054b50, 4), put(file, 0, 4), put(file, members.size(), 2);
  put(file, members.size(), 2), put(file, dir.size(), 4), put(file, dir_offset, 4), put(file, 0, 2);
  return file;
}

Array ramp(DType t, const Shape& shape) {
  Array d(DType::f64, shape);
  for (std::int64_t i = 0; i < d.size(); ++i) d.data_as<double>()[i] = static_cast<double>(i) - 3.0;
  return d.astype(t);
}

TEST(Npz, HandBuiltStoredAndDeflatedMembers) {
  const Array a = ramp(DType::f32, {4, 5});
  const Array b = ramp(DType::i64, {3});
  const auto zip = make_zip(
      {member("a.npy", io::serialize_npy(a), 8), member("b.npy", io::serialize_npy(b), 0)});
  const io::NamedArrays got = io::parse_npz(zip, "hand.npz");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, "a");
  EXPECT_EQ(got[1].first, "b");
  EXPECT_EQ(hex_of(got[0].second), hex_of(a));
  EXPECT_EQ(hex_of(got[1].second), hex_of(b));
  EXPECT_TRUE(io::parse_npz(make_zip({}), "empty.npz").empty());
}

TEST(Npz, RoundTripsThroughItsOwnWriter) {
  const Shape fs_shape{3, 2};
  const Array f =
      Array(ramp(DType::i16, fs_shape).buffer(), DType::i16, fs_shape, f_strides(fs_shape));
  const io::NamedArrays in = {{"image", ramp(DType::f64, {2, 3})},
                              {"fortran", f},
                              {"scalar", ramp(DType::f32, {})},
                              {"empty", ramp(DType::u8, {0})},
                              {"h\xc3\xa9", ramp(DType::f16, {5})}};
  test::TempDir dir;
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "plain");
    const fs::path path = dir / "x.npz";
    io::write_npz(path, in, {zip64});
    EXPECT_EQ(io::read_file_bytes(path), io::serialize_npz(in, {zip64}));
    const io::NamedArrays out = io::read_npz(path);
    ASSERT_EQ(out.size(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(out[i].first, in[i].first);
      EXPECT_EQ(out[i].second.dtype(), in[i].second.dtype());
      EXPECT_EQ(out[i].second.shape(), in[i].second.shape());
      EXPECT_EQ(out[i].second.strides(), in[i].second.strides());
      EXPECT_EQ(hex_of(out[i].second), hex_of(in[i].second));
    }
  }
}

TEST(Npz, WriterRejectsBadNames) {
  const Array a = ramp(DType::f32, {2});
  EXPECT_THROW((void)io::serialize_npz({{"", a}}), InvalidInput);
  EXPECT_THROW((void)io::serialize_npz({{"a", a}, {"a", a}}), InvalidInput);
  EXPECT_THROW((void)io::serialize_npz({{"b", ramp(DType::bf16, {2})}}), Unsupported);
}

void expect_npz_error(const std::vector<std::byte>& zip, const std::string& needle) {
  try {
    (void)io::parse_npz(zip, "bad.npz");
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("bad.npz: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(Npz, HostileArchivesAreIoErrors) {
  const auto npy = io::serialize_npy(ramp(DType::f64, {8}));
  const Member good = member("a.npy", npy, 8);
  const auto zip = make_zip({good});

  expect_npz_error(std::vector<std::byte>(zip.begin(), zip.begin() + 10), "not a ZIP");
  expect_npz_error(std::vector<std::byte>(zip.begin(), zip.end() - 5), "end-of-central-directory");
  auto cut = zip;  // the directory still points at data that is gone
  cut.erase(cut.begin() + 40, cut.begin() + 80);
  expect_npz_error(cut, "bad.npz");
  auto corrupt = zip;
  corrupt[45] ^= std::byte{0x55};
  expect_npz_error(corrupt, "member a.npy");

  Member m = good;
  m.crc = 1234;
  expect_npz_error(make_zip({m}), "CRC-32 mismatch");
  m = good;
  m.method = 12;
  expect_npz_error(make_zip({m}), "compression method 12");
  m = good;
  m.flags = 1;
  expect_npz_error(make_zip({m}), "encrypted");
  m = good;
  m.name = "a.txt";
  expect_npz_error(make_zip({m}), "not a .npy member");
  expect_npz_error(make_zip({good, good}), "appears twice");
  m = good;
  m.csize = 0x7fffffff;
  expect_npz_error(make_zip({m}), "run into the central directory");
  m = good;
  m.usize = 0x7fffffff;
  expect_npz_error(make_zip({m}), "directory says 2147483647");
  m = good;
  m.offset = 3;
  expect_npz_error(make_zip({m}), "no local header");
  // Entry a claims data running over b's local header.
  Member a = member("a.npy", npy, 0), b = member("b.npy", npy, 0);
  a.csize = a.usize = static_cast<std::uint32_t>(npy.size() + 40);
  expect_npz_error(make_zip({a, b}), "members overlap");
  // A member whose .npy is corrupt reports the member.
  const Member broken = member("c.npy", std::vector<std::byte>(npy.begin(), npy.end() - 8), 0);
  expect_npz_error(make_zip({broken}), "bad.npz: member c.npy: truncated");
}

TEST(Npz, DecompressionBombStopsAtTheHeaderSize) {
  // A member whose .npy header says 8 bytes of data, followed by 64 MiB of zeros that deflate to
  // about 64 KiB, with a directory that claims the whole inflated size: inflation must stop right
  // after the honest size instead of producing 64 MiB.
  auto payload = io::serialize_npy(ramp(DType::f64, {1}));
  payload.resize(payload.size() + (64u << 20));
  const Member bomb = member("bomb.npy", payload, 8);
  const auto zip = make_zip({bomb});
  EXPECT_LT(zip.size(), 200'000u);
  const auto start = std::chrono::steady_clock::now();
  expect_npz_error(zip, "unexpected bytes after the data");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace halfscope
