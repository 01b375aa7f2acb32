// Device helpers of the triangular solves (solve_support_cuda.hpp): the factor's tile norms for
// the solve policy, a finiteness scan of the right-hand sides and of the result, and the
// transpose solve_spd uses for n x r right-hand sides. Memory-bound one-pass kernels: each reads
// its input once (floor: bytes / HBM bandwidth, ~0.1 ms for a 10k x 10k factor's 400 MB).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "linalg/solve_support_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kNormThreads = 256;

// One stored tile: where it starts, its shape, and whether only its lower triangle counts.
struct TileRef {
  std::int64_t offset;
  std::int64_t rows;
  std::int64_t cols;
  int lower;
};

// Block b sums the squares of tile b in FP64 (the lower triangle for a diagonal tile).
__global__ void tile_norm_kernel(const float* base, const TileRef* tiles, double* out) {
  __shared__ double partial[kNormThreads];
  const TileRef t = tiles[blockIdx.x];
  const float* p = base + t.offset;
  // Threads along a column (coalesced), columns in turn; a diagonal tile starts each column at
  // its diagonal.
  double sum = 0.0;
  for (std::int64_t col = 0; col < t.cols; ++col)
    for (std::int64_t row = (t.lower ? col : 0) + threadIdx.x; row < t.rows; row += blockDim.x) {
      const double v = p[row + col * t.rows];
      sum += v * v;
    }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// *first = min(*first, index of a non-finite entry).
__global__ void non_finite_kernel(const float* x, std::int64_t count, unsigned long long* first) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    if (!isfinite(x[i])) atomicMin(first, static_cast<unsigned long long>(i));
}

constexpr int kTransposeTile = 32;

// out[c * rows + r] = in[r * cols + c] through a shared-memory tile (coalesced both ways).
__global__ void transpose_kernel(const float* in, std::int64_t rows, std::int64_t cols,
                                 float* out) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTransposeTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTransposeTile;
  for (int y = threadIdx.y; y < kTransposeTile; y += blockDim.y) {
    const std::int64_t r = r0 + y, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[y][threadIdx.x] = in[r * cols + c];
  }
  __syncthreads();
  for (int y = threadIdx.y; y < kTransposeTile; y += blockDim.y) {
    const std::int64_t c = c0 + y, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = tile[threadIdx.x][y];
  }
}

}  // namespace

void wait_for_legacy_stream() {
  HS_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

std::vector<double> factor_norms_cuda(const TileMatrix& l) {
  const TileLayout& layout = l.layout;
  const std::int64_t nt = layout.tile_rows();
  std::vector<TileRef> tiles;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i)
      tiles.push_back(
          {layout.tile_offset(i, j), layout.tile_height(i), layout.tile_width(j), i == j ? 1 : 0});
  const auto count = static_cast<std::int64_t>(tiles.size());
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  cuda::StreamScratch refs(count * static_cast<std::int64_t>(sizeof(TileRef)), stream.get());
  cuda::StreamScratch sums(count * static_cast<std::int64_t>(sizeof(double)), stream.get());
  HS_CUDA_CHECK(cudaMemcpyAsync(refs.get(), tiles.data(), tiles.size() * sizeof(TileRef),
                                cudaMemcpyHostToDevice, stream.get()));
  // One block per tile: grid.x allows 2^31 - 1 blocks, far beyond any NT (NT^2 / 2 tiles).
  tile_norm_kernel<<<static_cast<unsigned>(count), kNormThreads, 0, stream.get()>>>(
      l.storage.data_as<float>(), refs.as<TileRef>(), sums.as<double>());
  HS_CHECK_LAUNCH();
  std::vector<double> squares(tiles.size());
  HS_CUDA_CHECK(cudaMemcpyAsync(squares.data(), sums.get(), squares.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  std::vector<double> norms(static_cast<std::size_t>(nt * nt + 1), 0.0);
  double total = 0.0;
  std::size_t t = 0;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i, ++t) {
      norms[static_cast<std::size_t>(i * nt + j)] = std::sqrt(squares[t]);
      total += squares[t];
    }
  norms.back() = std::sqrt(total);
  return norms;
}

void first_non_finite_async(const float* x, std::int64_t count, unsigned long long* first,
                            cudaStream_t stream) {
  if (count <= 0) return;
  non_finite_kernel<<<cuda::grid_blocks(count, 256, 4), 256, 0, stream>>>(x, count, first);
  HS_CHECK_LAUNCH();
}

std::int64_t first_non_finite_cuda(const float* x, std::int64_t count) {
  if (count <= 0) return -1;
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  cuda::StreamScratch first(sizeof(unsigned long long), stream.get());
  const unsigned long long none = static_cast<unsigned long long>(count);
  auto* mailbox = static_cast<unsigned long long*>(cuda::pinned_mailbox());
  *mailbox = none;
  HS_CUDA_CHECK(
      cudaMemcpyAsync(first.get(), mailbox, sizeof(none), cudaMemcpyHostToDevice, stream.get()));
  first_non_finite_async(x, count, first.as<unsigned long long>(), stream.get());
  HS_CUDA_CHECK(
      cudaMemcpyAsync(mailbox, first.get(), sizeof(none), cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return *mailbox == none ? -1 : static_cast<std::int64_t>(*mailbox);
}

void transpose_cuda(const float* in, std::int64_t rows, std::int64_t cols, float* out) {
  if (rows <= 0 || cols <= 0) return;
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  const dim3 block(kTransposeTile, 8);
  // grid.y is limited to 65535 blocks: rows up to 2 M, beyond any n here (E-ELT: 100,368).
  const dim3 grid(static_cast<unsigned>((cols + kTransposeTile - 1) / kTransposeTile),
                  static_cast<unsigned>((rows + kTransposeTile - 1) / kTransposeTile));
  if ((rows + kTransposeTile - 1) / kTransposeTile > 65535)
    throw Unsupported("transpose_cuda: " + std::to_string(rows) + " rows exceed the grid limit");
  transpose_kernel<<<grid, block, 0, stream.get()>>>(in, rows, cols, out);
  HS_CHECK_LAUNCH();
  stream.synchronize();
}

}  // namespace halfscope::linalg::detail
