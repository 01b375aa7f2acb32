// Tiled matrix storage (include/halfscope/linalg/tiles.hpp).
#include "halfscope/linalg/tiles.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "linalg/tiles_cuda.hpp"
#endif

namespace halfscope::linalg {

TileLayout::TileLayout(std::int64_t rows, std::int64_t cols, std::int64_t nb, TileFill fill)
    : rows_(rows), cols_(cols), nb_(nb), fill_(fill) {
  if (rows < 1 || cols < 1)
    throw InvalidInput("TileLayout: the matrix must be at least 1 x 1, found " +
                       std::to_string(rows) + " x " + std::to_string(cols));
  if (nb < 1) throw InvalidInput("TileLayout: tile size must be >= 1, found " + std::to_string(nb));
  if (fill == TileFill::lower && rows != cols)
    throw InvalidInput("TileLayout: a lower (symmetric) layout needs a square matrix, found " +
                       std::to_string(rows) + " x " + std::to_string(cols));
  tile_rows_ = (rows + nb - 1) / nb;
  tile_cols_ = (cols + nb - 1) / nb;
  column_start_.resize(static_cast<std::size_t>(tile_cols_));
  std::int64_t offset = 0;
  for (std::int64_t tj = 0; tj < tile_cols_; ++tj) {
    column_start_[static_cast<std::size_t>(tj)] = offset;
    // Rows stored in this tile column: all of them, or from the diagonal tile down.
    const std::int64_t first_row = fill == TileFill::lower ? tj * nb : 0;
    offset += (rows - first_row) * tile_width(tj);
  }
  count_ = offset;
}

std::int64_t TileLayout::tile_height(std::int64_t ti) const noexcept {
  return std::min(nb_, rows_ - ti * nb_);
}

std::int64_t TileLayout::tile_width(std::int64_t tj) const noexcept {
  return std::min(nb_, cols_ - tj * nb_);
}

bool TileLayout::stored(std::int64_t ti, std::int64_t tj) const noexcept {
  return ti >= 0 && tj >= 0 && ti < tile_rows_ && tj < tile_cols_ &&
         (fill_ == TileFill::full || ti >= tj);
}

std::int64_t TileLayout::tile_offset(std::int64_t ti, std::int64_t tj) const {
  if (!stored(ti, tj))
    throw InvalidInput("TileLayout: tile (" + std::to_string(ti) + ", " + std::to_string(tj) +
                       ") is not stored in this " + std::to_string(tile_rows_) + " x " +
                       std::to_string(tile_cols_) +
                       (fill_ == TileFill::lower ? " lower" : " full") + " layout");
  const std::int64_t first_tile_row = fill_ == TileFill::lower ? tj : 0;
  // Every tile above (ti, tj) in its column is a full nb rows high.
  return column_start_[static_cast<std::size_t>(tj)] + (ti - first_tile_row) * nb_ * tile_width(tj);
}

std::int64_t TileLayout::element_offset(std::int64_t i, std::int64_t j) const {
  const std::int64_t ti = i / nb_, tj = j / nb_;
  return tile_offset(ti, tj) + (j - tj * nb_) * tile_height(ti) + (i - ti * nb_);
}

std::int64_t TileLayout::tile_count() const noexcept {
  return fill_ == TileFill::full ? tile_rows_ * tile_cols_ : tile_rows_ * (tile_rows_ + 1) / 2;
}

TileMatrix::TileMatrix(TileLayout layout_in, DType dtype, Memory memory)
    : layout(std::move(layout_in)) {
  if (dtype != DType::f32 && dtype != DType::f64)
    throw InvalidInput("TileMatrix: storage must be float32 or float64, found " +
                       std::string(dtype_name(dtype)));
  storage = Array(dtype, {layout.element_count()}, memory);
}

namespace {

// Calls f(storage offset, i, j) for every stored element, tile column by tile column in parallel.
template <class F>
void for_each_stored(const TileLayout& layout, F&& f) {
  const bool lower = layout.fill() == TileFill::lower;
  const std::int64_t nb = layout.tile_size();
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t tj = 0; tj < layout.tile_cols(); ++tj) {
    for (std::int64_t ti = lower ? tj : 0; ti < layout.tile_rows(); ++ti) {
      const std::int64_t base = layout.tile_offset(ti, tj);
      const std::int64_t h = layout.tile_height(ti), w = layout.tile_width(tj);
      for (std::int64_t c = 0; c < w; ++c)
        for (std::int64_t r = 0; r < h; ++r) f(base + c * h + r, ti * nb + r, tj * nb + c);
    }
  }
}

// In a lower layout the strict upper half of a diagonal tile mirrors the lower half: it is read
// from the lower triangle and never written back over it.
template <class T>
void tiles_to_dense(const TileLayout& layout, const T* tiles, T* dense) {
  const std::int64_t cols = layout.cols();
  const bool lower = layout.fill() == TileFill::lower;
  for_each_stored(layout, [&](std::int64_t at, std::int64_t i, std::int64_t j) {
    if (lower && j > i) return;
    dense[i * cols + j] = tiles[at];
    if (lower) dense[j * cols + i] = tiles[at];
  });
}

template <class T>
void dense_to_tiles(const TileLayout& layout, const T* dense, T* tiles) {
  const std::int64_t cols = layout.cols();
  const bool lower = layout.fill() == TileFill::lower;
  for_each_stored(layout, [&](std::int64_t at, std::int64_t i, std::int64_t j) {
    tiles[at] = lower && j > i ? dense[j * cols + i] : dense[i * cols + j];
  });
}

}  // namespace

Array TileMatrix::to_dense(Memory memory, UpperTriangle upper) const {
#if HALFSCOPE_WITH_CUDA
  if (storage.on_device() && memory == Memory::device &&
      layout.tile_size() <= detail::kMaxDeviceRelayoutTile &&
      cuda::device_of(storage.data()) == cuda::current_device()) {
    Array dense(storage.dtype(), {layout.rows(), layout.cols()}, Memory::device);
    const cuda::Stream stream;
    detail::tiles_to_dense_cuda(*this, dense, upper, stream.get());
    return dense;
  }
#endif
  const Array host = storage.on_device() ? storage.to(Memory::host) : storage;
  Array dense(host.dtype(), {layout.rows(), layout.cols()});
  if (host.dtype() == DType::f64)
    tiles_to_dense(layout, host.data_as<double>(), dense.data_as<double>());
  else
    tiles_to_dense(layout, host.data_as<float>(), dense.data_as<float>());
  if (upper == UpperTriangle::zero && layout.fill() == TileFill::lower) {
    const std::int64_t n = layout.rows();
    const std::size_t bytes = dense.dtype() == DType::f64 ? 8 : 4;
    auto* base = static_cast<std::byte*>(dense.data());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n - 1; ++i)
      std::memset(base + static_cast<std::size_t>(i * n + i + 1) * bytes, 0,
                  static_cast<std::size_t>(n - i - 1) * bytes);
  }
  return memory == Memory::host ? dense : dense.to(memory);
}

TileMatrix TileMatrix::from_dense(const Array& dense, std::int64_t nb, TileFill fill, DType dtype,
                                  Memory memory) {
  if (dense.ndim() != 2)
    throw InvalidInput("TileMatrix::from_dense: expected a 2-D matrix, found " + dense.describe());
#if HALFSCOPE_WITH_CUDA
  // Device storage is allocated on the current device (Array): a matrix there is tiled there;
  // one on another device goes through the host as before.
  if (dense.on_device() && memory == Memory::device && dense.is_c_contiguous() &&
      (dense.dtype() == DType::f32 || dense.dtype() == DType::f64) &&
      (dtype == DType::f32 || dtype == DType::f64) && nb <= detail::kMaxDeviceRelayoutTile &&
      cuda::device_of(dense.data()) == cuda::current_device()) {
    TileMatrix out(TileLayout(dense.dim(0), dense.dim(1), nb, fill), dtype, Memory::device);
    const cuda::Stream stream;
    detail::dense_to_tiles_cuda(dense, out, stream.get());
    return out;
  }
#endif
  TileMatrix out(TileLayout(dense.dim(0), dense.dim(1), nb, fill), dtype, Memory::host);
  Array source = dense.on_device() ? dense.to(Memory::host) : dense;
  source = (source.dtype() == dtype ? source : source.astype(dtype)).contiguous();
  if (dtype == DType::f64)
    dense_to_tiles(out.layout, source.data_as<double>(), out.storage.data_as<double>());
  else
    dense_to_tiles(out.layout, source.data_as<float>(), out.storage.data_as<float>());
  if (memory != Memory::host) out.storage = out.storage.to(memory);
  return out;
}

Memory dense_copy_memory(const TileMatrix& tiles, const Array& like) {
#if HALFSCOPE_WITH_CUDA
  if (!tiles.storage.on_device() || !like.on_device()) return Memory::host;
  const int device = cuda::device_of(tiles.storage.data());
  if (device != cuda::device_of(like.data()) || device != cuda::current_device())
    return Memory::host;
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const double bytes = static_cast<double>(tiles.layout.rows()) *
                       static_cast<double>(tiles.layout.cols()) *
                       static_cast<double>(dtype_size(tiles.dtype()));
  return bytes <= 0.95 * static_cast<double>(free) ? Memory::device : Memory::host;
#else
  (void)tiles;
  (void)like;
  return Memory::host;
#endif
}

}  // namespace halfscope::linalg
