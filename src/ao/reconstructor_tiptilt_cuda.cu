// The LGS tip-tilt constants as a low-rank term: device side (src/ao/reconstructor_tiptilt.hpp).
// Two memory-bound passes over the solved right-hand sides: FP64 group sums of each row, and the
// rank-q update R -= P W (q = 2 per LGS, at most a few tens).
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "ao/reconstructor_tiptilt.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGroups = 64;  // the constant-memory-free shared arrays below

struct Group {
  long long first, count;
};

// One block per row: thread-strided FP64 sums of each group, reduced through shared memory.
__global__ void group_sums_kernel(const float* x, long long n, const Group* groups, int q,
                                  double* sums) {
  __shared__ double partial[kThreads];
  const long long row = blockIdx.x;
  const float* xr = x + row * n;
  for (int g = 0; g < q; ++g) {
    double s = 0;
    for (long long c = threadIdx.x; c < groups[g].count; c += blockDim.x)
      s += xr[groups[g].first + c];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[row * q + g] = partial[0];
    __syncthreads();
  }
}

// x[r, c] -= sum_g p[r, g] w[g, c] for rows r < rows (grid-stride over rows x columns).
__global__ void rank_update_kernel(float* x, long long rows, long long n, const double* p, int q,
                                   const float* w) {
  const long long total = rows * n;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = e / n, c = e % n;
    double v = x[e];
    for (int g = 0; g < q; ++g) v -= p[r * q + g] * static_cast<double>(w[g * n + c]);
    x[e] = static_cast<float>(v);
  }
}

void check_groups(std::size_t q) {
  if (q > static_cast<std::size_t>(kMaxGroups))
    throw Unsupported("LGS tip-tilt correction: at most " + std::to_string(kMaxGroups / 2) +
                      " LGS with a tip-tilt constant on the GPU, found " + std::to_string(q / 2));
}

// group_sums of `rows` rows of n floats on the current device, queued on `s`; synchronises it.
std::vector<double> sums_on(const float* x, std::int64_t rows, std::int64_t n,
                            const std::vector<TiptiltGroup>& groups, cudaStream_t s) {
  const auto q = static_cast<std::int64_t>(groups.size());
  std::vector<Group> host(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) host[g] = {groups[g].first, groups[g].count};
  std::vector<double> sums(static_cast<std::size_t>(rows * q));
  if (rows == 0 || q == 0) return sums;
  cuda::StreamScratch d_groups(q * static_cast<std::int64_t>(sizeof(Group)), s);
  cuda::StreamScratch d_sums(rows * q * static_cast<std::int64_t>(sizeof(double)), s);
  HS_CUDA_CHECK(cudaMemcpyAsync(d_groups.get(), host.data(), host.size() * sizeof(Group),
                                cudaMemcpyHostToDevice, s));
  group_sums_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      x, n, d_groups.as<Group>(), static_cast<int>(q), d_sums.as<double>());
  HS_CHECK_LAUNCH();
  HS_CUDA_CHECK(cudaMemcpyAsync(sums.data(), d_sums.get(), sums.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  return sums;
}

// Rows [0, rows) of x -= P W (w: q rows of n), queued on `s`; synchronises it.
void update_on(float* x, std::int64_t rows, std::int64_t n, const std::vector<double>& p,
               std::int64_t q, const float* w, cudaStream_t s) {
  if (rows == 0 || q == 0) return;
  cuda::StreamScratch d_p(rows * q * static_cast<std::int64_t>(sizeof(double)), s);
  HS_CUDA_CHECK(
      cudaMemcpyAsync(d_p.get(), p.data(), p.size() * sizeof(double), cudaMemcpyHostToDevice, s));
  rank_update_kernel<<<cuda::grid_blocks(rows * n, kThreads, 8), kThreads, 0, s>>>(
      x, rows, n, d_p.as<double>(), static_cast<int>(q), w);
  HS_CHECK_LAUNCH();
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace

std::vector<double> group_sums_cuda(const Array& x, const std::vector<TiptiltGroup>& groups) {
  check_groups(groups.size());
  const cuda::DeviceGuard restore;  // x's device, whichever is current
  HS_CUDA_CHECK(cudaSetDevice(cuda::device_of(x.data())));
  cuda::Stream stream;
  return sums_on(x.data_as<float>(), x.dim(0), x.dim(1), groups, stream.get());
}

void subtract_rank_update_cuda(Array& x, std::int64_t rows, const std::vector<double>& p,
                               std::int64_t w_row, std::int64_t q) {
  check_groups(static_cast<std::size_t>(q));
  const cuda::DeviceGuard restore;
  HS_CUDA_CHECK(cudaSetDevice(cuda::device_of(x.data())));
  cuda::Stream stream;
  float* data = x.data_as<float>();
  update_on(data, rows, x.dim(1), p, q, data + w_row * x.dim(1), stream.get());
}

void DeviceTiptiltBlocks::operator()(float* rows, std::int64_t first, std::int64_t count,
                                     void* stream) {
  const auto q = static_cast<std::int64_t>(groups_.size());
  const auto s = static_cast<cudaStream_t>(stream);
  if (!started_) {
    started_ = true;
    // W must come whole in the first block (blocks are handed over last first).
    declined_ = q == 0 || q > kMaxGroups || first + count != m_ + q || count < q;
    if (declined_) return;
    w_ = Array(DType::f32, {q, n_}, Memory::device);
    HS_CUDA_CHECK(cudaMemcpyAsync(w_.data(), rows + (count - q) * n_,
                                  static_cast<std::size_t>(q * n_) * 4, cudaMemcpyDeviceToDevice,
                                  s));
    std::vector<double> sums = sums_on(rows + (count - q) * n_, q, n_, groups_, s);
    s_ = tiptilt_system(std::move(sums), groups_);
    count -= q;
  }
  if (declined_) return;
  const std::int64_t x_rows = std::min(count, m_ - first);
  if (x_rows <= 0) return;
  const std::vector<double> p =
      tiptilt_coefficients(s_, sums_on(rows, x_rows, n_, groups_, s), x_rows, groups_);
  update_on(rows, x_rows, n_, p, q, w_.data_as<float>(), s);
}

}  // namespace halfscope::ao::detail
