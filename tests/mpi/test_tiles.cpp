// 2D block-cyclic tile matrices (halfscope/mpi/tiles.hpp): scatter then gather returns the input
// bit for bit; every rank owns exactly the tiles the block-cyclic formula gives it; bad grids and
// foreign tiles are refused with a typed error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/tiles.hpp"
#include "test_support.hpp"

namespace halfscope::mpi {
namespace {

using linalg::TileFill;
using linalg::TileLayout;
using linalg::TileMatrix;

// The same random tile matrix on every rank (the seed fixes it).
TileMatrix random_tiles(std::int64_t rows, std::int64_t cols, std::int64_t nb, TileFill fill) {
  TileMatrix m(TileLayout(rows, cols, nb, fill), DType::f32);
  const auto values = test::random_floats(m.layout.element_count(), -3.0f, 3.0f, 91);
  std::memcpy(m.storage.data_as<float>(), values.data(), values.size() * sizeof(float));
  return m;
}

// Grids to try on `ranks` ranks: the default one and the two one-dimensional ones.
std::vector<ProcessGrid> grids(int ranks) {
  return {ProcessGrid::for_ranks(ranks), ProcessGrid{1, ranks}, ProcessGrid{ranks, 1}};
}

TEST(MpiTiles, DefaultGridIsTheSquarestWithRowsAtMostCols) {
  EXPECT_EQ(ProcessGrid::for_ranks(1).rows, 1);
  EXPECT_EQ(ProcessGrid::for_ranks(2).cols, 2);
  EXPECT_EQ(ProcessGrid::for_ranks(3).rows, 1);
  EXPECT_EQ(ProcessGrid::for_ranks(4).rows, 2);
  EXPECT_EQ(ProcessGrid::for_ranks(4).cols, 2);
  EXPECT_EQ(ProcessGrid::for_ranks(6).rows, 2);
  EXPECT_EQ(ProcessGrid::for_ranks(6).cols, 3);
  EXPECT_EQ(ProcessGrid::for_ranks(12).rows, 3);
  EXPECT_THROW((void)ProcessGrid::for_ranks(0), InvalidInput);
}

TEST(MpiTiles, ScatterThenGatherReturnsTheInputBitForBit) {
  const Comm world = Comm::world();
  // Sizes not multiples of the tile size, so the short last tile row / column travels too.
  for (const TileFill fill : {TileFill::lower, TileFill::full})
    for (const ProcessGrid grid : grids(world.size())) {
      const std::int64_t rows = 77, cols = fill == TileFill::lower ? 77 : 53;
      const TileMatrix whole = random_tiles(rows, cols, 16, fill);
      const DistTileMatrix dist = DistTileMatrix::scatter(world, whole, grid);
      const int root = world.size() - 1;
      const TileMatrix back = dist.gather(root);
      if (world.rank() != root) {
        EXPECT_EQ(back.layout.element_count(), 0);
        continue;
      }
      ASSERT_EQ(back.layout.element_count(), whole.layout.element_count());
      EXPECT_EQ(std::memcmp(back.storage.data(), whole.storage.data(),
                            static_cast<std::size_t>(whole.layout.element_count()) * sizeof(float)),
                0)
          << "grid " << grid.rows << " x " << grid.cols;
    }
}

TEST(MpiTiles, OwnershipFollowsTheBlockCyclicFormula) {
  const Comm world = Comm::world();
  for (const ProcessGrid grid : grids(world.size())) {
    const TileMatrix whole = random_tiles(50, 50, 8, TileFill::lower);  // 7 x 7 tiles
    const DistTileMatrix dist = DistTileMatrix::scatter(world, whole, grid);
    const int pr = world.rank() / grid.cols, pc = world.rank() % grid.cols;
    std::int64_t elements = 0, tiles = 0;
    for (std::int64_t i = 0; i < 7; ++i)
      for (std::int64_t j = 0; j < 7; ++j) {
        const bool mine = j <= i && i % grid.rows == pr && j % grid.cols == pc;
        ASSERT_EQ(dist.owns(i, j), mine) << "tile (" << i << ", " << j << ")";
        if (!mine) continue;
        ++tiles;
        const std::int64_t count = whole.layout.tile_height(i) * whole.layout.tile_width(j);
        elements += count;
        // The owned tile holds the input's tile, in the TileMatrix's storage order.
        EXPECT_EQ(std::memcmp(dist.tile(i, j),
                              whole.storage.data_as<float>() + whole.layout.tile_offset(i, j),
                              static_cast<std::size_t>(count) * sizeof(float)),
                  0);
      }
    EXPECT_EQ(dist.local_elements(), elements);
    // Every stored tile has exactly one owner: the counts add up to the layout's.
    EXPECT_EQ(world.sum(tiles), whole.layout.tile_count());
    EXPECT_EQ(world.sum(elements), whole.layout.element_count());
  }
}

TEST(MpiTiles, BadGridsAndForeignTilesAreRefused) {
  const Comm world = Comm::world();
  const TileLayout layout(20, 20, 8, TileFill::lower);
  try {
    DistTileMatrix bad(world, layout, ProcessGrid{world.size() + 1, 1});
    FAIL() << "a grid of " << world.size() + 1 << " ranks was accepted";
  } catch (const InvalidInput& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find(std::to_string(world.size() + 1) + " x 1"), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(world.size()) + " MPI rank"), std::string::npos) << text;
  }
  EXPECT_THROW(DistTileMatrix(world, layout, ProcessGrid{0, world.size()}), InvalidInput);
  DistTileMatrix dist(world, layout, ProcessGrid{1, world.size()});
  EXPECT_THROW((void)dist.tile(0, 1), InvalidInput);  // above the diagonal: not stored
  if (world.size() > 1) {
    // Tile (1, 0) lives on rank 0 of a 1 x Q grid; (1, 1) on rank 1.
    const std::int64_t foreign = world.rank() == 0 ? 1 : 0;
    try {
      (void)dist.tile(1, foreign);
      FAIL() << "a tile of another rank was handed out";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("belongs to MPI rank " + std::to_string(foreign)),
                std::string::npos)
          << e.what();
    }
  }
  // Float64 storage is not what the tiles hold.
  const TileMatrix f64(layout, DType::f64);
  EXPECT_THROW((void)DistTileMatrix::scatter(world, f64, ProcessGrid{1, world.size()}),
               InvalidInput);
}

}  // namespace
}  // namespace halfscope::mpi
