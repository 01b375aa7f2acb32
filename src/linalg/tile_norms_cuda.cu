// Device Frobenius norms of tiles for the precision policies (src/linalg/tile_norms.hpp,
// declared in tile_cuda.hpp): one block per tile, FP64 sums, one copy back. Memory-bound: one read
// of the matrix (80 ms for the 20 GB E-ELT lower triangle at 2.5 TB/s).
#include <cuda_runtime.h>

#include <cstdint>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kThreads = 256;

__global__ void tile_norms_kernel(const float* base, const std::int64_t* offsets,
                                  const std::int64_t* elems, double* out) {
  __shared__ double partial[kThreads];
  const float* t = base + offsets[blockIdx.x];
  double sum = 0.0;
  for (std::int64_t e = threadIdx.x; e < elems[blockIdx.x]; e += blockDim.x) {
    const double x = t[e];
    sum += x * x;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sqrt(partial[0]);
}

}  // namespace

void tile_norms_cuda(const float* base, const std::int64_t* offsets_host,
                     const std::int64_t* elems_host, std::int64_t count, double* out,
                     cudaStream_t stream) {
  if (count <= 0) return;
  after_legacy_stream(stream);  // A may have been written asynchronously on the legacy stream
  const auto bytes = count * static_cast<std::int64_t>(sizeof(std::int64_t));
  cuda::StreamScratch offsets(bytes, stream), elems(bytes, stream);
  cuda::StreamScratch norms(count * static_cast<std::int64_t>(sizeof(double)), stream);
  HS_CUDA_CHECK(cudaMemcpyAsync(offsets.get(), offsets_host, static_cast<std::size_t>(bytes),
                                cudaMemcpyHostToDevice, stream));
  HS_CUDA_CHECK(cudaMemcpyAsync(elems.get(), elems_host, static_cast<std::size_t>(bytes),
                                cudaMemcpyHostToDevice, stream));
  // One block per tile: NT (NT + 1) / 2 tiles, a few thousand at most.
  tile_norms_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
      base, offsets.as<std::int64_t>(), elems.as<std::int64_t>(), norms.as<double>());
  HS_CHECK_LAUNCH();
  HS_CUDA_CHECK(cudaMemcpyAsync(out, norms.get(), static_cast<std::size_t>(count) * sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace halfscope::linalg::detail
