// The device re-layout of TileMatrix::from_dense / to_dense (src/linalg/tiles_cuda.cu) against the
// host one (tiles.cpp), element for element: a re-layout only moves values (and rounds float64 to
// float32 the same way on both sides), so the results must be bit-equal. Lower and full layouts,
// tile sizes dividing n or not, one-tile and one-element matrices, float32 and float64 on both
// sides; a lower layout must not read the upper triangle (NaN there); the factor's dense copy
// with a zero upper triangle. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "test_support.hpp"

namespace halfscope::linalg {
namespace {

// n x n (rows x cols) random values; the strict upper triangle NaN when `poison_upper`.
Array random_dense(std::int64_t rows, std::int64_t cols, bool poison_upper, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      v[static_cast<std::size_t>(i * cols + j)] =
          poison_upper && j > i ? std::numeric_limits<double>::quiet_NaN() : u(rng) * 1e3;
  return Array::from_values<double>(v, {rows, cols});
}

bool bit_equal(const Array& a, const Array& b) {
  const Array x = a.to(Memory::host), y = b.to(Memory::host);
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.data(), y.data(), static_cast<std::size_t>(x.nbytes())) == 0;
}

struct Shape2 {
  std::int64_t rows, cols, nb;
};

TEST(GpuTiles, DeviceRelayoutEqualsTheHostOne) {
  HS_REQUIRE_GPU();
  for (const Shape2 s : {Shape2{300, 300, 64}, Shape2{97, 97, 97}, Shape2{1, 1, 16},
                         Shape2{40, 40, 7}, Shape2{130, 70, 32}})
    for (const TileFill fill : {TileFill::lower, TileFill::full}) {
      if (fill == TileFill::lower && s.rows != s.cols) continue;
      const bool lower = fill == TileFill::lower;
      const Array dense64 = random_dense(s.rows, s.cols, lower, s.rows * 7 + s.nb);
      for (const DType src : {DType::f64, DType::f32})
        for (const DType dst : {DType::f32, DType::f64}) {
          SCOPED_TRACE(testing::Message() << s.rows << "x" << s.cols << " nb " << s.nb
                                          << (lower ? " lower " : " full ") << dtype_name(src)
                                          << " -> " << dtype_name(dst));
          const Array dense = dense64.astype(src);
          const TileMatrix host = TileMatrix::from_dense(dense, s.nb, fill, dst, Memory::host);
          const TileMatrix dev =
              TileMatrix::from_dense(dense.to(Memory::device), s.nb, fill, dst, Memory::device);
          ASSERT_TRUE(dev.storage.on_device());
          EXPECT_TRUE(bit_equal(dev.storage, host.storage));
          for (const UpperTriangle upper : {UpperTriangle::mirror, UpperTriangle::zero}) {
            const Array back_host = host.to_dense(Memory::host, upper);
            const Array back_dev = dev.to_dense(Memory::device, upper);
            ASSERT_TRUE(back_dev.on_device());
            EXPECT_TRUE(bit_equal(back_dev, back_host));
          }
        }
    }
}

TEST(GpuTiles, ZeroUpperTriangleKeepsTheLowerOneOnly) {
  HS_REQUIRE_GPU();
  const std::int64_t n = 75;
  const Array dense = random_dense(n, n, false, 5).astype(DType::f32);
  const TileMatrix t = TileMatrix::from_dense(dense.to(Memory::device), 16, TileFill::lower,
                                              DType::f32, Memory::device);
  const Array l = t.to_dense(Memory::device, UpperTriangle::zero).to(Memory::host);
  const Array whole = t.to_dense(Memory::device, UpperTriangle::mirror).to(Memory::host);
  const float* a = dense.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const float want_l = j <= i ? a[i * n + j] : 0.0f;
      const float want_sym = j <= i ? a[i * n + j] : a[j * n + i];
      ASSERT_EQ(l.data_as<float>()[i * n + j], want_l) << i << ", " << j;
      ASSERT_EQ(whole.data_as<float>()[i * n + j], want_sym) << i << ", " << j;
    }
}

}  // namespace
}  // namespace halfscope::linalg
