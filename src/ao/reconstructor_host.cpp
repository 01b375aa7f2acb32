// The reconstructor's covariances generated on the GPU into host memory (reconstructor_host.hpp):
// Cmm by slabs of tile columns (each a contiguous range of the lower layout, so one device buffer
// and one copy per slab), Ctm by blocks of rows. The GPU generator runs once per piece (its plan
// and tables again each time), so the pieces are as large as a third of the budget allows.
#include "ao/reconstructor_host.hpp"

#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "ao/covariance_select.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "halfscope/core/cuda.hpp"
#include "linalg/cholesky_cuda.hpp"
#include "linalg/out_of_core_cuda.hpp"
#endif

namespace halfscope::ao::detail {

#if HALFSCOPE_WITH_CUDA

std::int64_t reconstructor_budget(int device, std::int64_t requested) {
  return linalg::detail::device_budget(device, requested);
}

linalg::TileMatrix covariance_tiles_on_host(const AoSystem& system, std::int64_t nb, int device,
                                            std::int64_t budget) {
  const std::int64_t n = covariance_rows(system, CovarianceKind::cmm);
  const linalg::TileLayout l(n, n, nb, linalg::TileFill::lower);
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  // The pinned tiles (20 GB at the E-ELT: about a second to touch and register) are allocated on
  // a host thread while the GPU generates the first slab.
  std::future<linalg::TileMatrix> pinned = std::async(std::launch::async, [&l, device] {
    HS_CUDA_CHECK(cudaSetDevice(device));
    return linalg::TileMatrix(l, DType::f32, Memory::pinned);
  });
  const std::int64_t nt = l.tile_cols(), cap = budget / 3;
  using linalg::detail::column_elements;
  std::vector<std::int64_t> starts{0};  // slabs: the widest runs of columns within the cap
  while (starts.back() < nt) {
    std::int64_t c1 = starts.back() + 1;
    while (c1 < nt && column_elements(l, starts.back(), c1 + 1) * 4 <= cap) ++c1;
    starts.push_back(c1);
  }
  std::int64_t widest = 0;
  for (std::size_t x = 0; x + 1 < starts.size(); ++x)
    widest = std::max(widest, column_elements(l, starts[x], starts[x + 1]));
  // Two device buffers of the widest slab: each slab is generated in one while the previous one
  // goes down to the pinned tiles from the other (its own stream).
  const std::size_t slabs = starts.size() - 1;
  std::vector<Array> buffer;
  for (std::size_t b = 0; b < std::min<std::size_t>(slabs, 2); ++b)
    buffer.emplace_back(DType::f32, Shape{widest}, Memory::device);
  linalg::TileMatrix out;
  cuda::Stream copy;
  cuda::Event copied[2];
  const cuda::StreamDrain drain{copy.get()};  // before `out` and the buffers go, on any exit
  for (std::size_t x = 0; x < slabs; ++x) {
    const std::int64_t c0 = starts[x], c1 = starts[x + 1], origin = l.tile_offset(c0, c0);
    const std::int64_t elements = column_elements(l, c0, c1);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(nt * nt), -1);
    for (std::int64_t j = c0; j < c1; ++j)
      for (std::int64_t i = j; i < nt; ++i)
        offsets[static_cast<std::size_t>(i * nt + j)] = l.tile_offset(i, j) - origin;
    Array& b = buffer[x % 2];
    if (x >= 2) HS_CUDA_CHECK(cudaEventSynchronize(copied[x % 2].get()));  // its slab went down
    covariance_tiles_selected_device(system, CovarianceKind::cmm, l, b.data_as<float>(), elements,
                                     offsets, true);
    if (x == 0) out = pinned.get();
    HS_CUDA_CHECK(cudaMemcpyAsync(out.storage.data_as<float>() + origin, b.data(),
                                  static_cast<std::size_t>(elements * 4), cudaMemcpyDeviceToHost,
                                  copy.get()));
    copied[x % 2].record(copy.get());
  }
  copy.synchronize();
  return out;
}

Array ctm_rows_on_host(const AoSystem& system, std::int64_t total_rows, int device,
                       std::int64_t budget) {
  const std::int64_t m = covariance_rows(system, CovarianceKind::ctm);
  const std::int64_t n = covariance_cols(system, CovarianceKind::ctm);
  Array out(DType::f32, {total_rows, n}, Memory::pinned);
  const std::int64_t rows =
      std::clamp<std::int64_t>(budget / 3 / (n * 4), 1, std::max<std::int64_t>(m, 1));
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  Array block(DType::f32, {rows, n}, Memory::device);
  for (std::int64_t r0 = 0; r0 < m; r0 += rows) {
    const std::int64_t r1 = std::min(m, r0 + rows);
    covariance_rows_selected_cuda(system, CovarianceKind::ctm, r0, r1, block.data_as<float>(),
                                  true);
    HS_CUDA_CHECK(cudaMemcpy(out.data_as<float>() + r0 * n, block.data(),
                             static_cast<std::size_t>((r1 - r0) * n * 4), cudaMemcpyDeviceToHost));
  }
  return out;
}

Array ctm_rows_on_device(const AoSystem& system, std::int64_t total_rows, int device) {
  const std::int64_t m = covariance_rows(system, CovarianceKind::ctm);
  const std::int64_t n = covariance_cols(system, CovarianceKind::ctm);
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  Array out(DType::f32, {total_rows, n}, Memory::device);
  if (m > 0)
    covariance_rows_selected_cuda(system, CovarianceKind::ctm, 0, m, out.data_as<float>(), true);
  return out;
}

#else

std::int64_t reconstructor_budget(int, std::int64_t) {
  throw Unsupported("tomographic_reconstructor: device_memory needs a build with CUDA");
}

linalg::TileMatrix covariance_tiles_on_host(const AoSystem&, std::int64_t, int, std::int64_t) {
  throw Unsupported("tomographic_reconstructor: device_memory needs a build with CUDA");
}

Array ctm_rows_on_host(const AoSystem&, std::int64_t, int, std::int64_t) {
  throw Unsupported("tomographic_reconstructor: device_memory needs a build with CUDA");
}

Array ctm_rows_on_device(const AoSystem&, std::int64_t, int) {
  throw Unsupported("tomographic_reconstructor: device_memory needs a build with CUDA");
}

#endif

}  // namespace halfscope::ao::detail
