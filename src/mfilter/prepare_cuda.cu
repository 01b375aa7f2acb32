// Per-channel statistics and the shift-and-scale of device data for prepare.cpp (see
// prepare_cuda.hpp). Statistics: each block reduces a slice of one channel, then one block per
// channel reduces the blocks' partial records, so a channel costs one read of its samples.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/prepare_cuda.hpp"

namespace halfscope::mfilter {

namespace {

constexpr int kThreads = 256;

// A partial record: count of non-finite values, min and max of the finite ones, and a Neumaier
// sum (s + c, c collecting the rounding errors of s), combined exactly by TwoSum, so the total
// is within a few FP64 roundings of the exact sum whatever the reduction order.
struct Partial {
  unsigned long long bad;
  double lo, hi, s, c;
};

__device__ void two_sum_into(double& s, double& c, double x) {
  const double t = __dadd_rn(s, x);
  const double bp = __dsub_rn(t, s);
  const double err = __dadd_rn(__dsub_rn(s, __dsub_rn(t, bp)), __dsub_rn(x, bp));
  s = t;
  c = __dadd_rn(c, err);
}

__device__ Partial combine(Partial a, const Partial& b) {
  a.bad += b.bad;
  a.lo = fmin(a.lo, b.lo);
  a.hi = fmax(a.hi, b.hi);
  two_sum_into(a.s, a.c, b.s);
  a.c = __dadd_rn(a.c, b.c);
  return a;
}

// Tree reduction of one Partial per thread (blockDim.x == kThreads); thread 0 gets the result.
__device__ Partial block_reduce(Partial p) {
  __shared__ Partial sh[kThreads];
  sh[threadIdx.x] = p;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      sh[threadIdx.x] = combine(sh[threadIdx.x], sh[threadIdx.x + half]);
    __syncthreads();
  }
  return sh[0];
}

__device__ Partial empty_partial() {
  return Partial{0ull, __longlong_as_double(0x7ff0000000000000ll),
                 -__longlong_as_double(0x7ff0000000000000ll), 0.0, 0.0};
}

// Block (bx, c) reduces samples bx * kThreads + tid + m * stride of channel c (pre[c] applied
// to the sum, exact for a power of two) into parts[c * gridDim.x + bx].
template <class T>
__global__ void channel_partials(const T* __restrict__ x, std::int64_t samples,
                                 const double* __restrict__ pre, Partial* __restrict__ parts) {
  const std::int64_t c = blockIdx.y;
  const T* row = x + c * samples;
  const double f = pre ? pre[c] : 1.0;
  Partial p = empty_partial();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       k < samples; k += stride) {
    const double v = static_cast<double>(row[k]);
    if (!isfinite(v)) {
      ++p.bad;
      continue;
    }
    p.lo = fmin(p.lo, v);
    p.hi = fmax(p.hi, v);
    two_sum_into(p.s, p.c, __dmul_rn(v, f));
  }
  p = block_reduce(p);
  if (threadIdx.x == 0) parts[c * gridDim.x + blockIdx.x] = p;
}

// Block c reduces the `per_channel` partial records of channel c into out[c].
__global__ void channel_totals(const Partial* __restrict__ parts, int per_channel,
                               DeviceChannelStats* __restrict__ out) {
  const std::int64_t c = blockIdx.x;
  Partial p = empty_partial();
  for (int b = static_cast<int>(threadIdx.x); b < per_channel; b += blockDim.x)
    p = combine(p, parts[c * per_channel + b]);
  p = block_reduce(p);
  if (threadIdx.x == 0) {
    out[c].non_finite = static_cast<std::int64_t>(p.bad);
    // A channel without finite values reports 0 (it is rejected anyway).
    out[c].min = p.bad == 0 || p.lo <= p.hi ? p.lo : 0.0;
    out[c].max = p.bad == 0 || p.lo <= p.hi ? p.hi : 0.0;
    out[c].sum = __dadd_rn(p.s, p.c);
  }
}

// out[i] = (x[i] * pre[c] - mean[c]) * post[c] in FP64 with every operation rounded separately
// (as the host computes it; nvcc would otherwise contract into FMAs), then one rounding to O.
template <class T, class O>
__global__ void shift_scale(const T* __restrict__ x, std::int64_t samples, std::int64_t total,
                            const double* __restrict__ factors, O* __restrict__ out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const std::int64_t c = i / samples;
    const double* f = factors + 3 * c;  // pre, mean, post
    const double v = __dmul_rn(__dsub_rn(__dmul_rn(static_cast<double>(x[i]), f[0]), f[1]), f[2]);
    out[i] = static_cast<O>(v);
  }
}

}  // namespace

std::vector<DeviceChannelStats> device_channel_stats(const Array& data, std::int64_t channels,
                                                     std::int64_t samples,
                                                     const std::vector<double>& pre) {
  if (channels > 65535)
    throw Unsupported("matched_filter: device statistics support at most 65535 channels, found " +
                      std::to_string(channels));
  // The caller may have written the data on any stream (the public API takes none).
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  const cudaStream_t stream = nullptr;
  const int total_blocks = cuda::grid_blocks(channels * samples, kThreads, 4);
  const int per_channel = static_cast<int>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(total_blocks / channels, (samples + kThreads - 1) / kThreads), 1,
      1024));
  const auto C = static_cast<std::size_t>(channels);
  cuda::StreamScratch parts(channels * per_channel * static_cast<std::int64_t>(sizeof(Partial)),
                            stream);
  cuda::StreamScratch records(channels * static_cast<std::int64_t>(sizeof(DeviceChannelStats)),
                              stream);
  cuda::StreamScratch factors(channels * static_cast<std::int64_t>(sizeof(double)), stream);
  if (!pre.empty())
    HS_CUDA_CHECK(cudaMemcpyAsync(factors.get(), pre.data(), C * sizeof(double),
                                  cudaMemcpyHostToDevice, stream));
  const double* f = pre.empty() ? nullptr : factors.as<double>();
  const dim3 grid(static_cast<unsigned>(per_channel), static_cast<unsigned>(channels));
  if (data.dtype() == DType::f32)
    channel_partials<<<grid, kThreads, 0, stream>>>(data.data_as<float>(), samples, f,
                                                    parts.as<Partial>());
  else
    channel_partials<<<grid, kThreads, 0, stream>>>(data.data_as<double>(), samples, f,
                                                    parts.as<Partial>());
  HS_CHECK_LAUNCH();
  channel_totals<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
      parts.as<Partial>(), per_channel, records.as<DeviceChannelStats>());
  HS_CHECK_LAUNCH();
  std::vector<DeviceChannelStats> out(C);
  const std::size_t bytes = C * sizeof(DeviceChannelStats);
  if (bytes <= 256) {  // the thread's pinned mailbox: the copy waits for exactly this work
    void* box = cuda::pinned_mailbox();
    HS_CUDA_CHECK(cudaMemcpyAsync(box, records.get(), bytes, cudaMemcpyDeviceToHost, stream));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::memcpy(out.data(), box, bytes);
  } else {
    HS_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), records.get(), bytes, cudaMemcpyDeviceToHost, stream));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return out;
}

Array device_shift_scale(const Array& data, std::int64_t channels, std::int64_t samples, DType want,
                         const std::vector<double>& pre, const std::vector<double>& mean,
                         const std::vector<double>& post) {
  const cudaStream_t stream = nullptr;
  const auto C = static_cast<std::size_t>(channels);
  std::vector<double> host(3 * C);
  for (std::size_t c = 0; c < C; ++c) {
    host[3 * c] = pre[c];
    host[3 * c + 1] = mean[c];
    host[3 * c + 2] = post[c];
  }
  cuda::StreamScratch factors(static_cast<std::int64_t>(host.size() * sizeof(double)), stream);
  HS_CUDA_CHECK(cudaMemcpyAsync(factors.get(), host.data(), host.size() * sizeof(double),
                                cudaMemcpyHostToDevice, stream));
  Array out(want, {channels, samples}, Memory::device);
  const std::int64_t total = channels * samples;
  const int blocks = cuda::grid_blocks(total, kThreads, 8);
  const double* f = factors.as<double>();
  const bool in32 = data.dtype() == DType::f32;
  if (want == DType::f32) {
    if (in32)
      shift_scale<<<blocks, kThreads, 0, stream>>>(data.data_as<float>(), samples, total, f,
                                                   out.data_as<float>());
    else
      shift_scale<<<blocks, kThreads, 0, stream>>>(data.data_as<double>(), samples, total, f,
                                                   out.data_as<float>());
  } else {
    if (in32)
      shift_scale<<<blocks, kThreads, 0, stream>>>(data.data_as<float>(), samples, total, f,
                                                   out.data_as<double>());
    else
      shift_scale<<<blocks, kThreads, 0, stream>>>(data.data_as<double>(), samples, total, f,
                                                   out.data_as<double>());
  }
  HS_CHECK_LAUNCH();
  // No wait: a pageable upload has copied `host` before cudaMemcpyAsync returned, and run_cuda
  // synchronizes the device before its backends read `out` (dispatch.hpp).
  return out;
}

}  // namespace halfscope::mfilter
