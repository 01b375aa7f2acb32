// 2D block-cyclic tile matrices over MPI ranks (halfscope/mpi/tiles.hpp).
#include "halfscope/mpi/tiles.hpp"

#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "core/huge_pages.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cpu.hpp"

namespace halfscope::mpi {
namespace {

std::string grid_text(const ProcessGrid& g) {
  return std::to_string(g.rows) + " x " + std::to_string(g.cols);
}

using linalg::detail::tile_text;

}  // namespace

ProcessGrid ProcessGrid::for_ranks(int ranks) {
  if (ranks < 1)
    throw InvalidInput("ProcessGrid: expected at least one rank, found " + std::to_string(ranks));
  // The largest divisor P <= sqrt(ranks): the squarest grid, which balances the row and column
  // broadcasts of a factorization.
  int rows = 1;
  for (int p = 1; p * p <= ranks; ++p)
    if (ranks % p == 0) rows = p;
  return ProcessGrid{rows, ranks / rows};
}

void ProcessGrid::check(int ranks) const {
  if (rows < 1 || cols < 1 || static_cast<std::int64_t>(rows) * cols != ranks)
    throw InvalidInput(
        "process grid " + grid_text(*this) + " does not match the " + std::to_string(ranks) +
        " MPI rank(s): expected rows x cols = " + std::to_string(ranks) + " with rows, cols >= 1");
}

DistTileMatrix::DistTileMatrix(const Comm& comm, linalg::TileLayout layout, ProcessGrid grid)
    : comm_(&comm), layout_(std::move(layout)), grid_(grid) {
  grid_.check(comm.size());
  const std::int64_t nt = layout_.tile_rows(), ntc = layout_.tile_cols();
  offsets_.assign(static_cast<std::size_t>(nt * ntc), -1);
  // The layout's order (column of tiles by column of tiles, top to bottom) restricted to this
  // rank's tiles, so a gather can unpack every rank's share in one pass over the layout.
  for (std::int64_t j = 0; j < ntc; ++j)
    for (std::int64_t i = 0; i < nt; ++i) {
      if (!layout_.stored(i, j) || grid_.owner(i, j) != comm.rank()) continue;
      offsets_[static_cast<std::size_t>(i * ntc + j)] = local_elements_;
      local_elements_ += layout_.tile_height(i) * layout_.tile_width(j);
    }
  data_ = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(local_elements_));
  ::halfscope::detail::advise_huge_pages(data_.get(),
                                         static_cast<std::size_t>(local_elements_) * sizeof(float));
}

bool DistTileMatrix::owns(std::int64_t ti, std::int64_t tj) const noexcept {
  if (ti < 0 || tj < 0 || ti >= layout_.tile_rows() || tj >= layout_.tile_cols()) return false;
  return offsets_[static_cast<std::size_t>(ti * layout_.tile_cols() + tj)] >= 0;
}

std::int64_t DistTileMatrix::offset_of(std::int64_t ti, std::int64_t tj) const {
  if (owns(ti, tj)) return offsets_[static_cast<std::size_t>(ti * layout_.tile_cols() + tj)];
  if (ti < 0 || tj < 0 || ti >= layout_.tile_rows() || tj >= layout_.tile_cols() ||
      !layout_.stored(ti, tj))
    throw InvalidInput("DistTileMatrix: tile " + tile_text(ti, tj) + " is not stored by the " +
                       std::to_string(layout_.tile_rows()) + " x " +
                       std::to_string(layout_.tile_cols()) + "-tile layout");
  throw InvalidInput("DistTileMatrix: tile " + tile_text(ti, tj) + " belongs to MPI rank " +
                     std::to_string(grid_.owner(ti, tj)) + ", not to this rank " +
                     std::to_string(comm_->rank()));
}

float* DistTileMatrix::tile(std::int64_t ti, std::int64_t tj) {
  return data_.get() + offset_of(ti, tj);
}

const float* DistTileMatrix::tile(std::int64_t ti, std::int64_t tj) const {
  return data_.get() + offset_of(ti, tj);
}

DistTileMatrix DistTileMatrix::scatter(const Comm& comm, const linalg::TileMatrix& whole,
                                       ProcessGrid grid) {
  if (whole.dtype() != DType::f32 || whole.storage.on_device())
    throw InvalidInput("DistTileMatrix::scatter: expected a float32 host tile matrix, found " +
                       std::string(dtype_name(whole.dtype())) +
                       (whole.storage.on_device() ? " in device memory" : ""));
  DistTileMatrix out(comm, whole.layout, grid);
  const linalg::TileLayout& layout = out.layout_;
  const float* src = whole.storage.data_as<float>();
  for (std::int64_t j = 0; j < layout.tile_cols(); ++j)
    for (std::int64_t i = 0; i < layout.tile_rows(); ++i) {
      if (!out.owns(i, j)) continue;
      const std::int64_t count = layout.tile_height(i) * layout.tile_width(j);
      std::memcpy(out.tile(i, j), src + layout.tile_offset(i, j),
                  static_cast<std::size_t>(count) * sizeof(float));
    }
  return out;
}

linalg::TileMatrix DistTileMatrix::gather(int root) const {
  const auto shares = comm_->gather_bytes(
      std::as_bytes(std::span<const float>(data_.get(), static_cast<std::size_t>(local_elements_))),
      root);
  if (comm_->rank() != root) return linalg::TileMatrix{};
  linalg::TileMatrix whole(layout_, DType::f32);
  float* dst = whole.storage.data_as<float>();
  // Each share holds its rank's tiles in the layout's order: unpack them in that same order.
  std::vector<std::size_t> next(shares.size(), 0);
  for (std::int64_t j = 0; j < layout_.tile_cols(); ++j)
    for (std::int64_t i = 0; i < layout_.tile_rows(); ++i) {
      if (!layout_.stored(i, j)) continue;
      const auto r = static_cast<std::size_t>(grid_.owner(i, j));
      const auto bytes =
          static_cast<std::size_t>(layout_.tile_height(i) * layout_.tile_width(j)) * sizeof(float);
      if (next[r] + bytes > shares[r].size())
        throw Error("DistTileMatrix::gather: MPI rank " + std::to_string(r) + " sent " +
                    std::to_string(shares[r].size()) + " bytes, fewer than its tiles need");
      std::memcpy(dst + layout_.tile_offset(i, j), shares[r].data() + next[r], bytes);
      next[r] += bytes;
    }
  return whole;
}

}  // namespace halfscope::mpi
