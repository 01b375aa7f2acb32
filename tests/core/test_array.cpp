#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope {
namespace {

Array iota_f64(Shape shape) {
  Array a(DType::f64, std::move(shape));
  std::iota(a.data_as<double>(), a.data_as<double>() + a.size(), 1.0);
  return a;
}

TEST(Array, ShapeStridesAndContiguity) {
  Array a(DType::f32, {3, 4, 5});
  EXPECT_EQ(a.size(), 60);
  EXPECT_EQ(a.nbytes(), 240);
  EXPECT_EQ(a.strides(), (Shape{20, 5, 1}));
  EXPECT_TRUE(a.is_c_contiguous());
  EXPECT_FALSE(a.is_f_contiguous());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  EXPECT_EQ(a.describe(), "float32[3, 4, 5] host");
  EXPECT_THROW((void)a.dim(3), InvalidInput);
  EXPECT_EQ(a.dim(-1), 5);
}

TEST(Array, SixtyFourBitSizes) {
  EXPECT_EQ(shape_size({1 << 20, 1 << 20, 4}), std::int64_t{1} << 42);
  EXPECT_THROW((void)shape_size({std::int64_t{1} << 40, std::int64_t{1} << 40}), InvalidInput);
  EXPECT_THROW((void)shape_size({-1, 3}), InvalidInput);
}

TEST(Array, FortranViewAndContiguousCopy) {
  Array c = iota_f64({2, 3});  // [[1,2,3],[4,5,6]]
  // The same buffer read as a Fortran-ordered 3x2 array is the transpose.
  Array f(c.buffer(), DType::f64, {3, 2}, f_strides({3, 2}));
  EXPECT_TRUE(f.is_f_contiguous());
  EXPECT_DOUBLE_EQ(f.at_as_double(1), 4.0);  // f[0,1] = c[1,0]
  Array fc = f.contiguous();
  EXPECT_TRUE(fc.is_c_contiguous());
  const double want[] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(fc.data_as<double>()[i], want[i]);
}

TEST(Array, SelectSliceAndReshapeShareTheBuffer) {
  Array a = iota_f64({4, 5});
  Array row = a.select(0, 2);
  EXPECT_EQ(row.shape(), (Shape{5}));
  EXPECT_EQ(row.at_as_double(0), 11.0);
  Array col = a.select(1, 3);
  EXPECT_EQ(col.at_as_double(2), 14.0);
  Array block = a.slice(0, 1, 3).slice(1, 2, 4);
  EXPECT_EQ(block.shape(), (Shape{2, 2}));
  EXPECT_FALSE(block.is_c_contiguous());
  EXPECT_EQ(block.contiguous().data_as<double>()[3], 14.0);  // a[2][3]
  block.contiguous().data_as<double>()[0] = -1;              // a copy: the original is unchanged
  EXPECT_EQ(a.at_as_double(7), 8.0);
  EXPECT_EQ(a.reshape({20}).at_as_double(19), 20.0);
  EXPECT_THROW((void)a.reshape({3, 7}), InvalidInput);
  EXPECT_THROW((void)block.reshape({4}), InvalidInput);
  EXPECT_THROW((void)a.slice(0, 3, 6), InvalidInput);
  EXPECT_THROW((void)a.select(1, 5), InvalidInput);
}

TEST(Array, BufferBoundsAreChecked) {
  auto buf = Buffer::allocate(64, Memory::host);
  EXPECT_NO_THROW(Array(buf, DType::f64, {8}, {1}));
  EXPECT_THROW(Array(buf, DType::f64, {9}, {1}), InvalidInput);
  EXPECT_THROW(Array(buf, DType::f64, {4}, {3}), InvalidInput);
  EXPECT_THROW(Array(buf, DType::f64, {2}, {1}, 56), InvalidInput);
}

TEST(Array, TypedAccessChecksTheDtype) {
  Array a(DType::f32, {2, 2});
  EXPECT_NO_THROW((void)a.data_as<float>());
  EXPECT_THROW((void)a.data_as<double>(), InvalidInput);
  auto v = a.view2d<float>();
  v(1, 1) = 3.5f;
  EXPECT_EQ(a.at_as_double(3), 3.5);
  Array b(DType::f32, {2, 2, 2});
  EXPECT_THROW((void)b.view2d<float>(), InvalidInput);
}

TEST(Array, AstypeRoundsAndChecksRanges) {
  const std::vector<double> v = {0.5, 1.5, 2.5, -0.5, 65519.0, 70000.0, 1e-8, 3e-5};
  Array a = Array::from_values<double>(v, {8});
  ConversionReport r;
  Array h = a.astype(DType::f16, &r);
  EXPECT_EQ(r.count, 8);
  EXPECT_EQ(r.overflow, 1);  // 70000
  EXPECT_EQ(r.first_overflow_index, 5);
  EXPECT_EQ(r.underflow, 1);              // 1e-8 < 2^-25
  EXPECT_EQ(r.subnormal, 1);              // 3e-5 < 2^-14
  EXPECT_EQ(h.at_as_double(4), 65504.0);  // below the overflow threshold of 65520
  EXPECT_THROW(require_finite(r, "test"), NumericalError);
  Array i =
      Array::from_values<double>(std::vector<double>{0.5, 1.5, 2.5, -2.5}, {4}).astype(DType::i32);
  EXPECT_EQ(i.data_as<std::int32_t>()[0], 0);  // round half to even
  EXPECT_EQ(i.data_as<std::int32_t>()[1], 2);
  EXPECT_EQ(i.data_as<std::int32_t>()[2], 2);
  EXPECT_EQ(i.data_as<std::int32_t>()[3], -2);
  EXPECT_THROW((void)Array::from_values<double>(std::vector<double>{300}, {1}).astype(DType::u8),
               InvalidInput);
  EXPECT_THROW((void)Array::from_values<double>(std::vector<double>{-1}, {1}).astype(DType::u64),
               InvalidInput);
  EXPECT_THROW(
      (void)Array::from_values<std::int64_t>(std::vector<std::int64_t>{-1}, {1}).astype(DType::u32),
      InvalidInput);
  Array u =
      Array::from_values<std::uint16_t>(std::vector<std::uint16_t>{65535}, {1}).astype(DType::f32);
  EXPECT_EQ(u.at_as_double(0), 65535.0);
}

TEST(Array, DeviceWithoutCudaIsUnsupportedOrWorks) {
  // In a CUDA build without a device this is a CudaError; without CUDA it is Unsupported. Either
  // way it is a typed error, never a crash.
  try {
    Array d(DType::f32, {4}, Memory::device);
    Array back = d.to(Memory::host);
    EXPECT_EQ(back.size(), 4);
  } catch (const Error&) {
    SUCCEED();
  }
}

}  // namespace
}  // namespace halfscope

namespace halfscope {
namespace {
TEST(Array, StridesOfHugeEmptyShapesAreAnErrorNotOverflow) {
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(shape_size({0, big, big}), 0);
  EXPECT_THROW((void)c_strides({0, big, big}), InvalidInput);
  EXPECT_THROW((void)f_strides({big, big, 0}), InvalidInput);
  EXPECT_THROW(Array(DType::f32, {0, big, big}), InvalidInput);
  EXPECT_EQ(Array(DType::f32, {0, 4}).size(), 0);
}
}  // namespace
}  // namespace halfscope
