// Tiled storage (linalg/tiles.hpp): offsets against an independent enumeration of the documented
// order, and dense <-> tiled round trips for full and lower layouts at awkward sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg {
namespace {

// (rows, cols, nb): nb dividing the size, not dividing it, larger than it, and 1 x 1.
struct Case {
  std::int64_t rows, cols, nb;
};
const Case kCases[] = {{6, 6, 3}, {7, 7, 3}, {5, 5, 2}, {4, 4, 9}, {1, 1, 1},
                       {1, 1, 4}, {9, 9, 1}, {7, 4, 3}, {3, 8, 5}};

// The documented order, written out: tile columns left to right, in each the stored tiles top
// to bottom, each tile column-major with its own height as leading dimension.
std::vector<std::int64_t> expected_offsets(std::int64_t rows, std::int64_t cols, std::int64_t nb,
                                           bool lower) {
  std::vector<std::int64_t> off(static_cast<std::size_t>(rows * cols), -1);
  std::int64_t next = 0;
  for (std::int64_t j0 = 0; j0 < cols; j0 += nb)
    for (std::int64_t i0 = lower ? j0 : 0; i0 < rows; i0 += nb) {
      const std::int64_t h = std::min(nb, rows - i0), w = std::min(nb, cols - j0);
      for (std::int64_t c = 0; c < w; ++c)
        for (std::int64_t r = 0; r < h; ++r)
          off[static_cast<std::size_t>((i0 + r) * cols + j0 + c)] = next++;
    }
  return off;
}

TEST(Tiles, OffsetsFollowTheDocumentedOrder) {
  for (const Case& k : kCases)
    for (const bool lower : {false, true}) {
      if (lower && k.rows != k.cols) continue;
      const TileLayout t(k.rows, k.cols, k.nb, lower ? TileFill::lower : TileFill::full);
      const auto want = expected_offsets(k.rows, k.cols, k.nb, lower);
      std::int64_t stored = 0;
      for (const std::int64_t o : want) stored += o >= 0;
      EXPECT_EQ(t.element_count(), stored);
      for (std::int64_t i = 0; i < k.rows; ++i)
        for (std::int64_t j = 0; j < k.cols; ++j) {
          const std::int64_t w = want[static_cast<std::size_t>(i * k.cols + j)];
          EXPECT_EQ(t.stored(i / k.nb, j / k.nb), w >= 0);
          if (w >= 0) {
            EXPECT_EQ(t.element_offset(i, j), w) << i << ", " << j << " nb " << k.nb;
          }
        }
      const std::int64_t tr = (k.rows + k.nb - 1) / k.nb, tc = (k.cols + k.nb - 1) / k.nb;
      EXPECT_EQ(t.tile_rows(), tr);
      EXPECT_EQ(t.tile_cols(), tc);
      EXPECT_EQ(t.tile_count(), lower ? tr * (tr + 1) / 2 : tr * tc);
      EXPECT_EQ(t.tile_height(tr - 1), k.rows - (tr - 1) * k.nb);
      EXPECT_EQ(t.tile_width(tc - 1), k.cols - (tc - 1) * k.nb);
    }
}

TEST(Tiles, HandComputedLowerOffsets) {
  // 5 x 5, nb 2, lower: column 0 holds rows 0..4 (10 elements), column 1 rows 2..4 (6), column 2
  // row 4 (1).
  const TileLayout t(5, 5, 2, TileFill::lower);
  EXPECT_EQ(t.element_count(), 17);
  EXPECT_EQ(t.tile_offset(1, 0), 4);
  EXPECT_EQ(t.tile_offset(2, 0), 8);
  EXPECT_EQ(t.tile_offset(1, 1), 10);
  EXPECT_EQ(t.tile_offset(2, 1), 14);
  EXPECT_EQ(t.tile_offset(2, 2), 16);
  EXPECT_EQ(t.element_offset(3, 2), 11);
  EXPECT_THROW((void)t.tile_offset(0, 1), InvalidInput);
}

template <class T>
void round_trip(DType dtype) {
  for (const Case& k : kCases)
    for (const bool lower : {false, true}) {
      if (lower && k.rows != k.cols) continue;
      Array dense(dtype, {k.rows, k.cols});
      for (std::int64_t e = 0; e < dense.size(); ++e) dense.data_as<T>()[e] = static_cast<T>(e + 1);
      const TileMatrix tm =
          TileMatrix::from_dense(dense, k.nb, lower ? TileFill::lower : TileFill::full, dtype);
      const Array back = tm.to_dense();
      ASSERT_EQ(back.dtype(), dtype);
      for (std::int64_t i = 0; i < k.rows; ++i)
        for (std::int64_t j = 0; j < k.cols; ++j) {
          // A lower layout keeps the lower triangle and mirrors it.
          const std::int64_t si = lower && j > i ? j : i, sj = lower && j > i ? i : j;
          ASSERT_EQ(back.data_as<T>()[i * k.cols + j], static_cast<T>(si * k.cols + sj + 1))
              << "(" << i << ", " << j << ") nb " << k.nb << (lower ? " lower" : " full");
          if (!lower || j <= i) {
            ASSERT_EQ(tm.storage.data_as<T>()[tm.layout.element_offset(i, j)],
                      static_cast<T>(i * k.cols + j + 1));
          }
        }
    }
}

TEST(Tiles, RoundTripFloat64) {
  round_trip<double>(DType::f64);
}
TEST(Tiles, RoundTripFloat32) {
  round_trip<float>(DType::f32);
}

TEST(Tiles, FromDenseConvertsDtype) {
  Array dense(DType::f64, {3, 3});
  for (std::int64_t e = 0; e < 9; ++e) dense.data_as<double>()[e] = 0.1 * static_cast<double>(e);
  const TileMatrix tm = TileMatrix::from_dense(dense, 2, TileFill::full, DType::f32);
  const Array back = tm.to_dense();
  for (std::int64_t e = 0; e < 9; ++e)
    EXPECT_EQ(back.data_as<float>()[e], static_cast<float>(0.1 * static_cast<double>(e)));
}

TEST(Tiles, InvalidLayouts) {
  EXPECT_THROW(TileLayout(0, 3, 2, TileFill::full), InvalidInput);
  EXPECT_THROW(TileLayout(3, 3, 0, TileFill::full), InvalidInput);
  EXPECT_THROW(TileLayout(3, 4, 2, TileFill::lower), InvalidInput);
  EXPECT_THROW(TileMatrix(TileLayout(2, 2, 1, TileFill::full), DType::f16), InvalidInput);
}

}  // namespace
}  // namespace halfscope::linalg
