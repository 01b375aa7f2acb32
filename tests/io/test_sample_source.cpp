// Continuous data read by windows (halfscope/io/sample_source.hpp): every window of NumPy's own
// files (both byte orders, Fortran order, format versions 2 and 3, every real dtype) equals the
// same samples of read_npy, converted as matched filtering converts them; a larger Fortran-order
// file read in odd windows; arrays in memory; and every refusal names the file.
#include <cstring>
#include <fstream>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sample_source.hpp"
#include "io_test_support.hpp"

namespace halfscope {
namespace {

namespace fs = std::filesystem;
using test::message_of;
using test::numpy_fixture;
using test::same_bytes;

// Samples [a, b) of every channel of `whole` ((C, L) or (L)) as SampleSource::read gives them.
Array expected_window(const Array& whole, std::int64_t a, std::int64_t b) {
  const Array rows =
      whole.ndim() == 1 ? whole.contiguous().reshape({1, whole.dim(0)}) : whole.contiguous();
  const Array w = rows.slice(1, a, b).contiguous();
  const bool kept = w.dtype() == DType::f32 || w.dtype() == DType::f64;
  return kept ? w : w.astype(DType::f64);
}

void expect_every_window(const io::SampleSource& source, const Array& whole) {
  test::expect_every_range(source, source.shape()[1], [&](std::int64_t a, std::int64_t b) {
    return expected_window(whole, a, b);
  });
}

TEST(NpySamples, EveryWindowOfNumpysFilesEqualsReadNpy) {
  for (const char* name :
       {"f2_le.npy", "f2_be.npy", "f4_le.npy", "f4_be.npy", "f8_le.npy", "f8_be.npy", "i1.npy",
        "i2_be.npy", "i4_le.npy", "i8_be.npy", "u1.npy", "u2_be.npy", "u4_le.npy", "u8_be.npy",
        "f8_fortran.npy", "u2_v2.npy", "f4_v3.npy"}) {
    SCOPED_TRACE(name);
    const Array whole = io::read_npy(numpy_fixture(name));
    const auto source = io::npy_samples(numpy_fixture(name));
    const Shape expect =
        whole.ndim() == 1 ? Shape{1, whole.dim(0)} : Shape{whole.dim(0), whole.dim(1)};
    EXPECT_EQ(source->shape(), expect);
    EXPECT_EQ(source->name(), numpy_fixture(name).string());
    expect_every_window(*source, whole);
  }
}

TEST(NpySamples, FortranOrderWindowsOfManyChannels) {
  const test::TempDir dir;
  // A (5, 1000) float32 array in Fortran order: sample k of the five channels lies together.
  const std::int64_t C = 5, L = 1000;
  const std::vector<float> v = test::random_floats(C * L, -3, 3, 7);
  auto buffer = Buffer::allocate(C * L * 4, Memory::host);
  std::memcpy(buffer->data(), v.data(), v.size() * sizeof(float));
  const Array fortran(buffer, DType::f32, {C, L}, f_strides({C, L}));
  io::write_npy(dir / "f.npy", fortran);
  const auto source = io::npy_samples(dir / "f.npy");
  for (const auto& [a, b] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 1000}, {0, 1}, {999, 1000}, {17, 530}, {500, 500}})
    EXPECT_TRUE(same_bytes(expected_window(fortran, a, b), source->read(a, b)))
        << "[" << a << ", " << b << ")";
}

TEST(ArraySamples, WindowsOfArraysInMemory) {
  const std::vector<float> v = test::random_floats(3 * 40, -1, 1, 11);
  const Array a = Array::from_values(std::span<const float>(v), {3, 40});
  const auto rows = io::array_samples(a);
  EXPECT_EQ(rows->shape(), (Shape{3, 40}));
  EXPECT_EQ(rows->dtype(), DType::f32);
  EXPECT_TRUE(rows->name().empty());
  expect_every_window(*rows, a);
  // A strided view (samples 5-35 of each channel) and a 1-D int16 array, read as float64.
  const Array strided = a.slice(0, 0, 3).slice(1, 5, 35);
  expect_every_window(*io::array_samples(strided), strided);
  const Array ints = Array::from_values(std::span<const float>(v), {120}).astype(DType::i16);
  const auto one = io::array_samples(ints);
  EXPECT_EQ(one->shape(), (Shape{1, 120}));
  EXPECT_EQ(one->dtype(), DType::f64);
  expect_every_window(*one, ints);
}

TEST(NpySamples, RefusalsNameTheFile) {
  const test::TempDir dir;
  const auto contains = [](const std::string& m, const std::string& part) {
    return m.find(part) != std::string::npos;
  };
  const fs::path missing = dir / "missing.npy";
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_samples(missing); }),
                       missing.string() + ": no such file"));
  // Shapes that are not continuous data: a scalar, 3-D, no sample.
  for (const char* name :
       {"scalar_f8.npy", "i4_be_fortran.npy", "empty_f4.npy", "empty_2d_i2.npy"}) {
    const std::string m =
        message_of<InvalidInput>([&] { (void)io::npy_samples(numpy_fixture(name)); });
    EXPECT_TRUE(contains(m, numpy_fixture(name).string() + ": data array has shape"))
        << name << ": " << m;
  }
  // A file cut short, a header cut short, and not a .npy at all.
  const auto bytes = io::serialize_npy(Array::zeros(DType::f32, {2, 100}));
  const auto write = [&](const std::string& name, std::size_t n) {
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
    return (dir / name).string();
  };
  const std::string cut = write("cut.npy", bytes.size() - 4);
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_samples(cut); }),
                       cut + ": truncated: header says 800 bytes of data"));
  const std::string head = write("head.npy", 30);
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_samples(head); }), head + ": "));
  std::ofstream(dir / "text.npy") << "channel,sample\n0,1\n";
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_samples(dir / "text.npy"); }),
                       (dir / "text.npy").string() + ": "));
  // Windows outside the data.
  const std::string whole = write("whole.npy", bytes.size());
  const auto source = io::npy_samples(whole);
  EXPECT_TRUE(contains(message_of<InvalidInput>([&] { (void)source->read(50, 101); }),
                       whole + ": samples [50, 101): expected a window inside [0, 100)"));
  EXPECT_THROW((void)source->read(-1, 3), InvalidInput);
  EXPECT_THROW((void)source->read(4, 3), InvalidInput);
}

}  // namespace
}  // namespace halfscope
