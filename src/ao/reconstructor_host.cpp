// The reconstructor's covariances generated on the GPU into host memory (reconstructor_host.hpp):
// Cmm by slabs of tile columns (each a contiguous range of the lower layout, so one copy per
// slab), Ctm by blocks of rows; two device buffers, so a piece goes down while the next one is
// generated. The GPU generator runs once per piece (its plan and tables again each time), so the
// pieces are as large as a third of the budget allows.
#include "ao/reconstructor_host.hpp"

#include <algorithm>
#include <future>
#include <string>
#include <utility>
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

namespace {

float* floats(linalg::TileMatrix& t) {
  return t.storage.data_as<float>();
}
float* floats(Array& a) {
  return a.data_as<float>();
}

// Pieces generated on the current device one after the other into pinned host memory, which
// `allocate()` makes on a host thread meanwhile (touching and registering the E-ELT's 20 GB of
// tiles takes about a second). Two device buffers of `widest` floats: each piece goes down on its
// own stream while the next one is generated. `generate(x, buffer)` fills piece x and returns
// {where it starts in the host floats, its float count}.
template <class Out, class Allocate, class Generate>
Out generate_to_host(std::size_t pieces, std::int64_t widest, const Allocate& allocate,
                     const Generate& generate) {
  const int device = cuda::current_device();
  std::future<Out> pinned = std::async(std::launch::async, [&allocate, device] {
    HS_CUDA_CHECK(cudaSetDevice(device));
    return allocate();
  });
  std::vector<Array> buffer;
  for (std::size_t b = 0; b < std::min<std::size_t>(pieces, 2); ++b)
    buffer.emplace_back(DType::f32, Shape{widest}, Memory::device);
  Out out;
  cuda::Stream copy;
  cuda::Event copied[2];
  const cuda::StreamDrain drain{copy.get()};  // before `out` and the buffers go, on any exit
  for (std::size_t x = 0; x < pieces; ++x) {
    float* b = buffer[x % 2].data_as<float>();
    if (x >= 2) HS_CUDA_CHECK(cudaEventSynchronize(copied[x % 2].get()));  // its piece went down
    const auto [at, elements] = generate(x, b);
    if (x == 0) out = pinned.get();
    HS_CUDA_CHECK(cudaMemcpyAsync(floats(out) + at, b, static_cast<std::size_t>(elements * 4),
                                  cudaMemcpyDeviceToHost, copy.get()));
    copied[x % 2].record(copy.get());
  }
  if (pieces == 0) out = pinned.get();
  copy.synchronize();
  return out;
}

}  // namespace

linalg::TileMatrix covariance_tiles_on_host(const AoSystem& system, std::int64_t nb, int device,
                                            std::int64_t budget) {
  const std::int64_t n = covariance_rows(system, CovarianceKind::cmm);
  const linalg::TileLayout l(n, n, nb, linalg::TileFill::lower);
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
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
  return generate_to_host<linalg::TileMatrix>(
      starts.size() - 1, widest, [&l] { return linalg::TileMatrix(l, DType::f32, Memory::pinned); },
      [&](std::size_t x, float* buffer) {
        const std::int64_t c0 = starts[x], c1 = starts[x + 1], origin = l.tile_offset(c0, c0);
        const std::int64_t elements = column_elements(l, c0, c1);
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(nt * nt), -1);
        for (std::int64_t j = c0; j < c1; ++j)
          for (std::int64_t i = j; i < nt; ++i)
            offsets[static_cast<std::size_t>(i * nt + j)] = l.tile_offset(i, j) - origin;
        covariance_tiles_selected_device(system, CovarianceKind::cmm, l, buffer, elements, offsets,
                                         true);
        return std::pair{origin, elements};
      });
}

Array ctm_rows_on_host(const AoSystem& system, std::int64_t total_rows, int device,
                       std::int64_t budget) {
  const std::int64_t m = covariance_rows(system, CovarianceKind::ctm);
  const std::int64_t n = covariance_cols(system, CovarianceKind::ctm);
  const std::int64_t rows =
      std::clamp<std::int64_t>(budget / 3 / (n * 4), 1, std::max<std::int64_t>(m, 1));
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(device));
  return generate_to_host<Array>(
      static_cast<std::size_t>((m + rows - 1) / rows), rows * n,
      [&] {
        return Array(DType::f32, {total_rows, n}, Memory::pinned);
      },
      [&](std::size_t x, float* buffer) {
        const std::int64_t r0 = static_cast<std::int64_t>(x) * rows, r1 = std::min(m, r0 + rows);
        covariance_rows_selected_cuda(system, CovarianceKind::ctm, r0, r1, buffer, true);
        return std::pair{r0 * n, (r1 - r0) * n};
      });
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
