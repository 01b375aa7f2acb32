// Device loops of the Cholesky's power-of-two scaling (scaling_cuda.hpp). Memory-bound: the
// maximum reads n entries; the scaling reads and writes the lower triangle once (0.2 ms for the
// n = 10240 AO matrix at 2.5 TB/s), and it runs only for a matrix outside the unscaled band.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "linalg/scaling_cuda.hpp"
#include "linalg/tile_cuda.hpp"  // after_legacy_stream

namespace halfscope::linalg::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerColumn = 64;  // grid-stride blocks per tile column

// Block b: the largest of the w[b] diagonal entries of the diagonal tile at start[b].
__global__ void diagonal_max_kernel(const float* base, const std::int64_t* start,
                                    const std::int64_t* width, float* out) {
  __shared__ float partial[kThreads];
  const float* t = base + start[blockIdx.x];
  const std::int64_t w = width[blockIdx.x];
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < w; i += blockDim.x) m = fmaxf(m, t[i * (w + 1)]);
  partial[threadIdx.x] = m;  // fmaxf skips NaN
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// Tile column blockIdx.y: its diagonal tile's lower triangle and its other tiles times f.
__global__ void scale_lower_kernel(float* base, const std::int64_t* start,
                                   const std::int64_t* width, const std::int64_t* end, float f) {
  const std::int64_t s = start[blockIdx.y], w = width[blockIdx.y], e = end[blockIdx.y];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t x = s + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; x < e;
       x += stride) {
    const std::int64_t local = x - s;
    if (local < w * w && local % w < local / w) continue;  // strict upper half of the diagonal tile
    base[x] *= f;
  }
}

std::int64_t bytes_of(const std::vector<std::int64_t>& v) {
  return static_cast<std::int64_t>(v.size() * sizeof(std::int64_t));
}

// Copies v into the scratch `d` (of bytes_of(v)) on `stream`; its device pointer.
const std::int64_t* copy_in(const cuda::StreamScratch& d, const std::vector<std::int64_t>& v,
                            cudaStream_t stream) {
  HS_CUDA_CHECK(cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice, stream));
  return d.as<std::int64_t>();
}

}  // namespace

double max_diagonal_cuda(const float* base, const std::vector<std::int64_t>& start,
                         const std::vector<std::int64_t>& width) {
  if (start.empty()) return -std::numeric_limits<double>::infinity();
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(cuda::device_of(base)));
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  const cuda::StreamScratch d_start(bytes_of(start), stream.get()),
      d_width(bytes_of(width), stream.get());
  const auto n = static_cast<std::int64_t>(start.size());
  const cuda::StreamScratch d_out(n * static_cast<std::int64_t>(sizeof(float)), stream.get());
  diagonal_max_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream.get()>>>(
      base, copy_in(d_start, start, stream.get()), copy_in(d_width, width, stream.get()),
      d_out.as<float>());
  HS_CHECK_LAUNCH();
  std::vector<float> out(static_cast<std::size_t>(n));
  HS_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out.get(), out.size() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  double m = -std::numeric_limits<double>::infinity();
  for (const float x : out)
    if (x > m) m = x;
  return m;
}

void scale_lower_cuda(float* base, const std::vector<std::int64_t>& start,
                      const std::vector<std::int64_t>& width, const std::vector<std::int64_t>& end,
                      int e) {
  if (start.empty() || e == 0) return;
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(cuda::device_of(base)));
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  const cuda::StreamScratch d_start(bytes_of(start), stream.get()),
      d_width(bytes_of(width), stream.get()), d_end(bytes_of(end), stream.get());
  const std::int64_t* s = copy_in(d_start, start, stream.get());
  const std::int64_t* w = copy_in(d_width, width, stream.get());
  const std::int64_t* x = copy_in(d_end, end, stream.get());
  // One grid row per tile column, at most 65535 per launch.
  const auto n = static_cast<std::int64_t>(start.size());
  for (std::int64_t first = 0; first < n; first += 65535) {
    const dim3 grid(kBlocksPerColumn,
                    static_cast<unsigned>(std::min<std::int64_t>(65535, n - first)));
    scale_lower_kernel<<<grid, kThreads, 0, stream.get()>>>(base, s + first, w + first, x + first,
                                                            std::ldexp(1.0f, e));
    HS_CHECK_LAUNCH();
  }
  stream.synchronize();
}

}  // namespace halfscope::linalg::detail
