// Templates read by ranges of templates (halfscope/io/template_source.hpp): every range of
// NumPy's own files (both byte orders, Fortran order, (T, K) and (T, C, K), every real dtype)
// equals the same templates of read_npy, converted as matched filtering converts them; a larger
// Fortran-order bank read in odd ranges; arrays in memory; and every refusal names the file (a
// non-finite value by its template's index in the whole bank).
#include <cmath>
#include <cstring>
#include <fstream>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "halfscope/io/template_source.hpp"
#include "io_test_support.hpp"

namespace halfscope {
namespace {

namespace fs = std::filesystem;
using test::message_of;
using test::numpy_fixture;
using test::same_bytes;

// Templates [a, b) of `whole` ((T, C, K) or (T, K)) as TemplateSource::read gives them.
Array expected_rows(const Array& whole, std::int64_t a, std::int64_t b) {
  const Array rows = whole.slice(0, a, b).contiguous();
  const Shape s =
      whole.ndim() == 2 ? Shape{b - a, 1, whole.dim(1)} : Shape{b - a, whole.dim(1), whole.dim(2)};
  const bool kept = rows.dtype() == DType::f32 || rows.dtype() == DType::f64;
  return (kept ? rows : rows.astype(DType::f64)).reshape(s);
}

void expect_every_range(const io::TemplateSource& source, const Array& whole) {
  test::expect_every_range(source, source.shape()[0], [&](std::int64_t a, std::int64_t b) {
    return expected_rows(whole, a, b);
  });
}

TEST(NpyTemplates, EveryRangeOfNumpysFilesEqualsReadNpy) {
  for (const char* name : {"i1.npy", "i2_be.npy", "i4_le.npy", "i8_be.npy", "u1.npy", "u2_be.npy",
                           "u4_le.npy", "f8_fortran.npy", "i4_be_fortran.npy"}) {
    SCOPED_TRACE(name);
    const Array whole = io::read_npy(numpy_fixture(name));
    const auto source = io::npy_templates(numpy_fixture(name));
    const Shape expect = whole.ndim() == 2 ? Shape{whole.dim(0), 1, whole.dim(1)} : whole.shape();
    EXPECT_EQ(source->shape(), expect);
    EXPECT_EQ(source->name(), numpy_fixture(name).string());
    expect_every_range(*source, whole);
    // The whole bank equals what one process reads (read_template_array).
    EXPECT_TRUE(same_bytes(io::read_template_array(numpy_fixture(name)).templates,
                           source->read(0, source->shape()[0])));
  }
}

TEST(NpyTemplates, FloatFilesInEitherByteOrder) {
  // NumPy's float fixtures: (2, 3), row 0 finite (-1.5, 1/3, 65504), row 1 (-0, inf, nan).
  for (const char* name :
       {"f2_le.npy", "f2_be.npy", "f4_le.npy", "f4_be.npy", "f8_le.npy", "f8_be.npy"}) {
    SCOPED_TRACE(name);
    const Array whole = io::read_npy(numpy_fixture(name));
    const auto source = io::npy_templates(numpy_fixture(name));
    EXPECT_TRUE(same_bytes(expected_rows(whole, 0, 1), source->read(0, 1)));
    EXPECT_TRUE(same_bytes(expected_rows(whole, 0, 0), source->read(1, 1)));
    try {
      (void)source->read(0, 2);
      ADD_FAILURE() << "no error";
    } catch (const InvalidInput& e) {
      EXPECT_EQ(std::string(e.what()),
                numpy_fixture(name).string() +
                    ": template 1, channel 0, sample 1 is inf: expected a finite value");
    }
  }
}

TEST(NpyTemplates, FortranOrderRangesOfABank) {
  const test::TempDir dir;
  // A (7, 3, 5) float32 bank in Fortran order, where template t of one (channel, sample) lies
  // beside template t + 1; and a bank of one template, whose samples lie channel by channel.
  for (const Shape& shape : {Shape{7, 3, 5}, Shape{1, 3, 5}}) {
    const std::vector<float> v = test::random_floats(shape_size(shape), -3, 3, 5);
    auto buffer = Buffer::allocate(shape_size(shape) * 4, Memory::host);
    std::memcpy(buffer->data(), v.data(), v.size() * sizeof(float));
    const Array fortran(buffer, DType::f32, shape, f_strides(shape));
    io::write_npy(dir / "bank.npy", fortran);
    const auto source = io::npy_templates(dir / "bank.npy");
    EXPECT_EQ(source->dtype(), DType::f32);
    expect_every_range(*source, fortran);
  }
}

TEST(ArrayTemplates, RangesOfArraysInMemory) {
  const std::vector<float> v = test::random_floats(6 * 2 * 9, -1, 1, 13);
  const Array a = Array::from_values(std::span<const float>(v), {6, 2, 9});
  const auto bank = io::array_templates(a);
  EXPECT_EQ(bank->shape(), (Shape{6, 2, 9}));
  EXPECT_EQ(bank->dtype(), DType::f32);
  EXPECT_TRUE(bank->name().empty());
  expect_every_range(*bank, a);
  // A strided view (samples 2-7 of each channel) and a (T, K) int16 array, read as float64.
  const Array strided = a.slice(2, 2, 7);
  expect_every_range(*io::array_templates(strided), strided);
  const Array ints = Array::from_values(std::span<const float>(v), {12, 9}).astype(DType::i16);
  const auto one = io::array_templates(ints);
  EXPECT_EQ(one->shape(), (Shape{12, 1, 9}));
  EXPECT_EQ(one->dtype(), DType::f64);
  expect_every_range(*one, ints);
}

bool contains(const std::string& m, const std::string& part) {
  return m.find(part) != std::string::npos;
}

TEST(NpyTemplates, RefusalsNameTheFile) {
  const test::TempDir dir;
  const fs::path missing = dir / "missing.npy";
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_templates(missing); }),
                       missing.string() + ": no such file"));
  // Shapes that are not templates (a scalar, 1-D, no sample) and a dtype that is not real.
  for (const char* name : {"scalar_f8.npy", "f4_v3.npy", "empty_2d_i2.npy"}) {
    const std::string m =
        message_of<InvalidInput>([&] { (void)io::npy_templates(numpy_fixture(name)); });
    EXPECT_TRUE(contains(m, numpy_fixture(name).string() + ": templates have shape"))
        << name << ": " << m;
  }
  EXPECT_EQ(
      message_of<InvalidInput>([&] { (void)io::npy_templates(numpy_fixture("u8_le.npy")); }),
      numpy_fixture("u8_le.npy").string() + ": templates of dtype uint64: expected a real dtype");
  // A file cut short.
  const auto bytes = io::serialize_npy(Array::zeros(DType::f32, {4, 2, 10}));
  std::ofstream(dir / "cut.npy", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size() - 4));
  EXPECT_TRUE(contains(message_of<IoError>([&] { (void)io::npy_templates(dir / "cut.npy"); }),
                       (dir / "cut.npy").string() + ": truncated: header says 320 bytes of data"));
  // Ranges outside the bank.
  io::write_npy(dir / "ok.npy", Array::zeros(DType::f32, {4, 2, 10}));
  const auto ok = io::npy_templates(dir / "ok.npy");
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)ok->read(3, 5); }),
            (dir / "ok.npy").string() + ": templates [3, 5): expected a range inside [0, 4)");
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)ok->read(-1, 2); }),
            (dir / "ok.npy").string() + ": templates [-1, 2): expected a range inside [0, 4)");
}

TEST(NpyTemplates, NonFiniteValueNamedByItsIndexInTheBank) {
  const test::TempDir dir;
  Array bank = Array::zeros(DType::f64, {5, 2, 4});
  bank.data_as<double>()[(3 * 2 + 1) * 4 + 2] = std::nan("");
  bank.data_as<double>()[(4 * 2 + 0) * 4 + 0] = -HUGE_VAL;
  io::write_npy(dir / "bank.npy", bank);
  const auto source = io::npy_templates(dir / "bank.npy");
  const std::string name = (dir / "bank.npy").string();
  EXPECT_NO_THROW((void)source->read(0, 3));  // the bad templates are not read
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)source->read(2, 5); }),
            name + ": template 3, channel 1, sample 2 is nan: expected a finite value");
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)source->read(4, 5); }),
            name + ": template 4, channel 0, sample 0 is -inf: expected a finite value");
  // One process reads the whole bank and words it alike.
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)io::read_template_array(dir / "bank.npy"); }),
            name + ": template 3, channel 1, sample 2 is nan: expected a finite value");
  // Templates in memory are not checked by the source (matched filtering refuses them itself).
  EXPECT_NO_THROW((void)io::array_templates(bank)->read(0, 5));
}

}  // namespace
}  // namespace halfscope
