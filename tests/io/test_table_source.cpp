// Network tables read by ranges of templates (halfscope/io/table_source.hpp): every range of
// NumPy's own files (both byte orders, Fortran order, every dtype, one or more axes) equals the
// same rows of read_npy in the stored dtype; a Fortran-order file of four axes read in every range
// (NpyPartReader::read_rows); arrays in memory; and every refusal names the file (a non-finite
// value by its row's index in the whole table).
#include <cmath>
#include <cstring>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/table_source.hpp"
#include "io_test_support.hpp"

namespace halfscope {
namespace {

namespace fs = std::filesystem;
using test::message_of;
using test::numpy_fixture;
using test::same_bytes;

// Rows [a, b) of `whole` as TableSource::read gives them: (b - a, elements per row), stored dtype.
Array expected_rows(const Array& whole, std::int64_t a, std::int64_t b) {
  const std::int64_t row = whole.dim(0) == 0 ? 0 : whole.size() / whole.dim(0);
  return whole.slice(0, a, b).contiguous().reshape({b - a, row});
}

void expect_every_range(const io::TableSource& source, const Array& whole) {
  test::expect_every_range(source, source.shape()[0], [&](std::int64_t a, std::int64_t b) {
    return expected_rows(whole, a, b);
  });
}

TEST(NpyTable, EveryRangeOfNumpysFilesEqualsReadNpy) {
  for (const char* name :
       {"i1.npy", "i2_be.npy", "i4_le.npy", "i8_be.npy", "u1.npy", "u2_be.npy", "u4_le.npy",
        "u8_be.npy", "f8_fortran.npy", "i4_be_fortran.npy", "u2_v2.npy", "empty_2d_i2.npy"}) {
    SCOPED_TRACE(name);
    const Array whole = io::read_npy(numpy_fixture(name));
    const auto table = io::npy_table(numpy_fixture(name), "moveouts");
    EXPECT_EQ(table->shape(), whole.shape());
    EXPECT_EQ(table->dtype(), whole.dtype());
    expect_every_range(*table, whole);
  }
}

TEST(NpyTable, FortranOrderOfFourAxes) {
  const test::TempDir dir;
  // Several rows, and a single row (whose elements are in Fortran order too: one read).
  for (const Shape& shape : {Shape{5, 3, 4, 2}, Shape{1, 3, 4, 2}}) {
    const std::vector<float> v = test::random_floats(shape_size(shape), -3, 3, 7);
    auto buffer = Buffer::allocate(shape_size(shape) * 4, Memory::host);
    std::memcpy(buffer->data(), v.data(), v.size() * sizeof(float));
    const Array fortran(buffer, DType::f32, shape, f_strides(shape));
    io::write_npy(dir / "f.npy", fortran);
    const auto table = io::npy_table(dir / "f.npy", "weights");
    EXPECT_EQ(table->shape(), shape);
    expect_every_range(*table, fortran);
  }
}

TEST(NpyTable, NonFiniteValueNamedByItsRowInTheTable) {
  // NumPy's float fixtures: (2, 3), row 0 finite (-1.5, 1/3, 65504), row 1 (-0, inf, nan).
  for (const char* name :
       {"f2_le.npy", "f2_be.npy", "f4_le.npy", "f4_be.npy", "f8_le.npy", "f8_be.npy"}) {
    SCOPED_TRACE(name);
    const Array whole = io::read_npy(numpy_fixture(name));
    const auto table = io::npy_table(numpy_fixture(name), "weights");
    EXPECT_TRUE(same_bytes(expected_rows(whole, 0, 1), table->read(0, 1)));
    EXPECT_EQ(message_of<InvalidInput>([&] { (void)table->read(0, 2); }),
              numpy_fixture(name).string() + ": weights [1, 1] is not finite: expected a real");
  }
}

TEST(NpyTable, RefusalsNameTheFile) {
  const test::TempDir dir;
  const fs::path missing = dir / "missing.npy";
  EXPECT_NE(message_of<IoError>([&] {
              (void)io::npy_table(missing, "weights");
            }).find(missing.string() + ": no such file"),
            std::string::npos);
  EXPECT_EQ(message_of<InvalidInput>(
                [&] { (void)io::npy_table(numpy_fixture("scalar_f8.npy"), "moveouts"); }),
            numpy_fixture("scalar_f8.npy").string() +
                ": moveouts have shape (): expected (T, C) (templates, channels)");
  io::write_npy(dir / "ok.npy", Array::zeros(DType::i32, {4, 2}));
  const auto ok = io::npy_table(dir / "ok.npy", "moveouts");
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)ok->read(3, 5); }),
            (dir / "ok.npy").string() + ": rows [3, 5): expected a range inside [0, 4)");
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)ok->read(2, 1); }),
            (dir / "ok.npy").string() + ": rows [2, 1): expected a range inside [0, 4)");
}

TEST(ArrayTable, RangesOfArraysInMemory) {
  const std::vector<float> v = test::random_floats(6 * 4, -1, 1, 3);
  const Array a = Array::from_values(std::span<const float>(v), {6, 4});
  const auto table = io::array_table(a);
  EXPECT_EQ(table->shape(), (Shape{6, 4}));
  EXPECT_EQ(table->dtype(), DType::f32);
  EXPECT_EQ(table->describe(), a.describe());
  expect_every_range(*table, a);
  // A strided view (columns 1-2), a one-dimensional table (a column), and no value checked here.
  const Array strided = a.slice(1, 1, 3);
  expect_every_range(*io::array_table(strided), strided);
  const Array column = Array::from_values(std::span<const float>(v), {24});
  const auto one = io::array_table(column);
  EXPECT_EQ(one->read(5, 7).shape(), (Shape{2, 1}));
  expect_every_range(*one, column);
  Array nan = a.clone();
  nan.data_as<float>()[3] = std::nanf("");
  EXPECT_NO_THROW((void)io::array_table(nan)->read(0, 6));
  EXPECT_EQ(message_of<InvalidInput>([&] { (void)table->read(0, 7); }),
            "table " + a.describe() + ": rows [0, 7): expected a range inside [0, 6)");
}

}  // namespace
}  // namespace halfscope
