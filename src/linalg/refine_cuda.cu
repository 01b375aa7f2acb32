// Device side of the refinement (solve_support_cuda.hpp): the residual R = B - X A in FP32 with
// cuBLAS SGEMMs over the lower tiles of A, its norm and the correction x += d.
//
// Layout: the r x n row-major X, B, R are column-major n x r (ld n), so block j of rows of X meets
// tile column j of A. A is symmetric and only its lower tiles are stored: R_i -= A_ij X_j for the
// tile itself and R_j -= A_ij^T X_i for its mirror (i > j); a diagonal tile holds both triangles
// and is used once. The GEMMs run on one stream in order, so no two write a block at once.
// Floor: 2 n^2 r flops at the FP32 rate, e.g. 10k x 10k x 1.3k: 0.26 TFLOP, ~5 ms on an H100.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/solve_support_cuda.hpp"
#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {
namespace {

constexpr int kReduceThreads = 256;

// *sum += sum of x_i^2 in FP64 (one atomic per block).
__global__ void square_sum_kernel(const float* x, std::int64_t count, double* sum) {
  __shared__ double partial[kReduceThreads];
  double s = 0.0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    s += static_cast<double>(x[i]) * x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}

__global__ void add_kernel(float* x, const float* d, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] += d[i];
}

int blas_int(std::int64_t v, const char* what) {
  if (v > INT_MAX)
    throw Unsupported(std::string("residual_cuda: ") + what + " = " + std::to_string(v) +
                      " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

}  // namespace

void residual_cuda(const TileMatrix& a, const float* x, const float* b, float* r,
                   std::int64_t rhs) {
  const TileLayout& layout = a.layout;
  const std::int64_t n = layout.rows(), nt = layout.tile_rows(), nb = layout.tile_size();
  const int ld = blas_int(n, "n"), cols = blas_int(rhs, "right-hand sides");
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  HS_CUDA_CHECK(cudaMemcpyAsync(r, b, static_cast<std::size_t>(n * rhs) * sizeof(float),
                                cudaMemcpyDeviceToDevice, stream.get()));
  {
    // The lease resets the math mode to the default (FP32, no TF32) and synchronises on release.
    cuda::CublasLease blas(stream.get());
    const float minus_one = -1.0f, one = 1.0f;
    const float* base = a.storage.data_as<float>();
    for (std::int64_t j = 0; j < nt; ++j)
      for (std::int64_t i = j; i < nt; ++i) {
        const float* t = base + layout.tile_offset(i, j);
        const int hi = static_cast<int>(layout.tile_height(i));
        const int hj = static_cast<int>(layout.tile_width(j));
        HS_CUBLAS_CHECK(cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, hi, cols, hj, &minus_one,
                                    t, hi, x + j * nb, ld, &one, r + i * nb, ld));
        if (i != j)
          HS_CUBLAS_CHECK(cublasSgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, hj, cols, hi,
                                      &minus_one, t, hi, x + i * nb, ld, &one, r + j * nb, ld));
      }
  }
  stream.synchronize();
}

double norm_cuda(const float* x, std::int64_t count) {
  if (count <= 0) return 0.0;
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  cuda::StreamScratch sum(sizeof(double), stream.get());
  HS_CUDA_CHECK(cudaMemsetAsync(sum.get(), 0, sizeof(double), stream.get()));
  square_sum_kernel<<<cuda::grid_blocks(count, kReduceThreads, 4), kReduceThreads, 0,
                      stream.get()>>>(x, count, sum.as<double>());
  HS_CHECK_LAUNCH();
  auto* mailbox = static_cast<double*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(
      cudaMemcpyAsync(mailbox, sum.get(), sizeof(double), cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return std::sqrt(*mailbox);
}

void add_cuda(float* x, const float* d, std::int64_t count) {
  if (count <= 0) return;
  cuda::Stream stream;
  after_legacy_stream(stream.get());
  add_kernel<<<cuda::grid_blocks(count, 256, 4), 256, 0, stream.get()>>>(x, d, count);
  HS_CHECK_LAUNCH();
  stream.synchronize();
}

}  // namespace halfscope::linalg::detail
