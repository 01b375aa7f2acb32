// Parts of a covariance generated on a GPU rank's device (src/ao/covariance_select.hpp): the GPU
// backend handed a selection, its output copied back into the rank's host storage (where the MPI
// factorization and the solves take them from).
#include <string>

#include "ao/covariance_plan.hpp"
#include "ao/covariance_select.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "core/staged_copy.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::ao::detail {

#if HALFSCOPE_WITH_CUDA

namespace {

int copy_threads() {
  return cuda::staging_threads(1);
}

}  // namespace

void covariance_tiles_selected_cuda(const AoSystem& system, CovarianceKind kind,
                                    const linalg::TileLayout& layout, float* local,
                                    std::int64_t local_elements,
                                    const std::vector<std::int64_t>& offsets, bool noise,
                                    int device) {
  const auto expected = layout.tile_rows() * layout.tile_cols();
  if (static_cast<std::int64_t>(offsets.size()) != expected)
    throw InvalidInput("covariance_tiles_selected_cuda: offsets: expected one per tile (" +
                       std::to_string(expected) + "), found " + std::to_string(offsets.size()));
  if (local_elements == 0) return;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  Array buffer(DType::f32, {local_elements}, Memory::device);
  // Elements outside every tile (none in a rank's storage) come back as zeros, not garbage.
  HS_CUDA_CHECK(cudaMemset(buffer.data(), 0, static_cast<std::size_t>(buffer.nbytes())));
  std::vector<void*> tiles(offsets.size(), nullptr);
  for (std::size_t t = 0; t < offsets.size(); ++t) {
    if (offsets[t] < 0) continue;
    if (offsets[t] >= local_elements)
      throw InvalidInput("covariance_tiles_selected_cuda: offsets: tile " + std::to_string(t) +
                         " starts at " + std::to_string(offsets[t]) + ", beyond the buffer's " +
                         std::to_string(local_elements) + " elements");
    tiles[t] = buffer.data_as<float>() + offsets[t];
  }
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = layout.rows();
  target.cols = layout.cols();
  target.tiles = &layout;
  target.data = buffer.data();
  target.tile_data = tiles.data();
  covariance_cuda(make_covariance_plan(system, noise), target);  // checks layout, kind, system
  cuda::download_staged(local, buffer.data(), buffer.nbytes(), copy_threads());
}

void covariance_rows_selected_cuda(const AoSystem& system, CovarianceKind kind,
                                   std::int64_t row_begin, std::int64_t row_end, float* out,
                                   bool noise, int device) {
  const CovariancePlan plan = make_covariance_plan(system, noise);
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = covariance_rows(system, kind);
  target.cols = covariance_cols(system, kind);
  target.row_begin = row_begin;
  target.row_end = row_end;
  target.data = out;  // for the check of the range, before the device buffer is allocated
  check_covariance_target(plan, target, "covariance_rows_selected_cuda");
  if (row_end <= row_begin || target.cols == 0) return;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  Array buffer(DType::f32, {row_end - row_begin, target.cols}, Memory::device);
  target.data = buffer.data();
  covariance_cuda(plan, target);
  cuda::download_staged(out, buffer.data(), buffer.nbytes(), copy_threads());
}

#else

void covariance_tiles_selected_cuda(const AoSystem&, CovarianceKind, const linalg::TileLayout&,
                                    float*, std::int64_t, const std::vector<std::int64_t>&, bool,
                                    int device) {
  throw Unsupported("covariance on a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}

void covariance_rows_selected_cuda(const AoSystem&, CovarianceKind, std::int64_t, std::int64_t,
                                   float*, bool, int device) {
  throw Unsupported("covariance on a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}

#endif

}  // namespace halfscope::ao::detail
