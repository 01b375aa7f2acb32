// Parts of a covariance generated for one MPI rank (src/ao/covariance_select.hpp): a
// CovarianceTarget with a selection (covariance_plan.hpp) handed to the CPU backend, which skips
// the work units of the tiles / rows left out and evaluates the others exactly as for the whole
// matrix, or to the GPU backend (a GPU rank), whose output is then copied into the rank's host
// storage, where the MPI factorization and the solves take it from.
#include "ao/covariance_select.hpp"

#include <string>

#include "ao/covariance_plan.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "core/staged_copy.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::ao::detail {
namespace {

void check_tile_count(const linalg::TileLayout& layout, std::size_t found, const char* who) {
  const auto expected = layout.tile_rows() * layout.tile_cols();
  if (static_cast<std::int64_t>(found) != expected)
    throw InvalidInput(std::string(who) + ": expected one entry per tile (" +
                       std::to_string(layout.tile_rows()) + " x " +
                       std::to_string(layout.tile_cols()) + " = " + std::to_string(expected) +
                       "), found " + std::to_string(found));
}

// A float32 target of `layout`'s tiles, tile t at tiles[t] (null: not generated).
CovarianceTarget tiles_target(CovarianceKind kind, const linalg::TileLayout& layout,
                              void* const* tiles) {
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = layout.rows();
  target.cols = layout.cols();
  target.tiles = &layout;
  target.tile_data = tiles;
  return target;
}

// A float32 target of rows [row_begin, row_end) of `kind`, written from `out` on.
CovarianceTarget rows_target(const AoSystem& system, CovarianceKind kind, std::int64_t row_begin,
                             std::int64_t row_end, void* out) {
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = covariance_rows(system, kind);
  target.cols = covariance_cols(system, kind);
  target.data = out;
  target.row_begin = row_begin;
  target.row_end = row_end;
  return target;
}

}  // namespace

void covariance_tiles_selected(const AoSystem& system, CovarianceKind kind,
                               const linalg::TileLayout& layout, const std::vector<float*>& tiles,
                               bool noise) {
  check_tile_count(layout, tiles.size(), "covariance_tiles_selected: tiles");
  const CovariancePlan plan = make_covariance_plan(system, noise);
  // float* -> void*: the backend writes through the pointer typed by target.dtype.
  const std::vector<void*> data(tiles.begin(), tiles.end());
  covariance_cpu(plan, tiles_target(kind, layout, data.data()));  // checks layout, system, kind
}

void covariance_rows_selected(const AoSystem& system, CovarianceKind kind, std::int64_t row_begin,
                              std::int64_t row_end, float* out, bool noise) {
  const CovariancePlan plan = make_covariance_plan(system, noise);
  covariance_cpu(plan, rows_target(system, kind, row_begin, row_end, out));  // checks kind, range
}

#if HALFSCOPE_WITH_CUDA

void covariance_tiles_selected_cuda(const AoSystem& system, CovarianceKind kind,
                                    const linalg::TileLayout& layout, float* local,
                                    std::int64_t local_elements,
                                    const std::vector<std::int64_t>& offsets, bool noise,
                                    int device) {
  check_tile_count(layout, offsets.size(), "covariance_tiles_selected_cuda: offsets");
  if (local_elements == 0) return;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  Array buffer(DType::f32, {local_elements}, Memory::device);
  covariance_tiles_selected_device(system, kind, layout, buffer.data_as<float>(), local_elements,
                                   offsets, noise);
  cuda::download_staged(local, buffer.data(), buffer.nbytes(), cuda::staging_threads(1));
}

void covariance_tiles_selected_device(const AoSystem& system, CovarianceKind kind,
                                      const linalg::TileLayout& layout, float* buffer,
                                      std::int64_t elements,
                                      const std::vector<std::int64_t>& offsets, bool noise) {
  check_tile_count(layout, offsets.size(), "covariance_tiles_selected_device: offsets");
  // Elements outside every tile (none in a rank's storage) come back as zeros, not garbage.
  HS_CUDA_CHECK(cudaMemset(buffer, 0, static_cast<std::size_t>(elements) * 4));
  std::vector<void*> tiles(offsets.size(), nullptr);
  for (std::size_t t = 0; t < offsets.size(); ++t) {
    if (offsets[t] < 0) continue;
    if (offsets[t] >= elements)
      throw InvalidInput("covariance_tiles_selected_device: offsets: tile " + std::to_string(t) +
                         " starts at " + std::to_string(offsets[t]) + ", beyond the buffer's " +
                         std::to_string(elements) + " elements");
    tiles[t] = buffer + offsets[t];
  }
  CovarianceTarget target = tiles_target(kind, layout, tiles.data());
  target.data = buffer;  // the GPU backend's tile starts are offsets into it
  covariance_cuda(make_covariance_plan(system, noise), target);  // checks layout, system, kind
}

void covariance_rows_selected_cuda(const AoSystem& system, CovarianceKind kind,
                                   std::int64_t row_begin, std::int64_t row_end, float* out,
                                   bool noise) {
  const CovariancePlan plan = make_covariance_plan(system, noise);
  if (row_end <= row_begin) {
    check_covariance_target(plan, rows_target(system, kind, row_begin, row_end, out),
                            "covariance_rows_selected_cuda");
    return;
  }
  covariance_cuda(plan, rows_target(system, kind, row_begin, row_end, out));  // checks it all
}

#else

void covariance_tiles_selected_cuda(const AoSystem&, CovarianceKind, const linalg::TileLayout&,
                                    float*, std::int64_t, const std::vector<std::int64_t>&, bool,
                                    int device) {
  throw Unsupported("covariance on a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}

void covariance_tiles_selected_device(const AoSystem&, CovarianceKind, const linalg::TileLayout&,
                                      float*, std::int64_t, const std::vector<std::int64_t>&,
                                      bool) {
  throw Unsupported("covariance tiles on a GPU in a build without CUDA");
}

void covariance_rows_selected_cuda(const AoSystem&, CovarianceKind, std::int64_t, std::int64_t,
                                   float*, bool) {
  throw Unsupported("covariance rows on a GPU rank in a build without CUDA");
}

#endif

}  // namespace halfscope::ao::detail
