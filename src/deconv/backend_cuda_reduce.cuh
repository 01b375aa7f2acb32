// Device code of the CUDA deconvolution backend: the one-pass reductions (dot products, the
// criterion's two sums, maxima) and their terms. Each block reduces its share in a fixed order
// into `partials`, and the last block to finish sums the partials in a fixed order and writes the
// result into a DeviceBox (backend_cuda_kernels.cuh), so results are deterministic run to run.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "deconv/backend_cuda_kernels.cuh"

namespace halfscope::deconv::cudak {

/// Up to three sums (or maxima) in the accumulator type S.
template <class S>
struct Acc {
  S v[3];
};

/// One pass: every thread folds elements through `f(k, acc)`, the block reduces in shared memory
/// (fixed tree), the last block sums the per-block partials (fixed order) and hands the totals to
/// `f.finish(acc, box->result)` (which undoes any scaling).
template <class S, bool kMax, class F>
__global__ void reduce_kernel(std::int64_t n, F f, Acc<S>* partials, DeviceBox* box) {
  __shared__ Acc<S> shared[kThreads];
  __shared__ bool last;
  Acc<S> acc{{S(0), S(0), S(0)}};
  for (std::int64_t k = thread_index(); k < n; k += thread_count()) f(k, acc);
  shared[threadIdx.x] = acc;
  __syncthreads();
  const auto combine = [](Acc<S>& a, const Acc<S>& b) {
    for (int c = 0; c < 3; ++c)
      // Max keeps a NaN (b != b) so a NaN vector never reads as max 0.
      a.v[c] = kMax ? ((b.v[c] != b.v[c] || b.v[c] > a.v[c]) ? b.v[c] : a.v[c]) : a.v[c] + b.v[c];
  };
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = shared[0];
    __threadfence();
    last = atomicAdd(&box->blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Acc<S> total{{S(0), S(0), S(0)}};
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) {
    volatile const S* p = partials[b].v;  // written by other blocks: read past the L1
    const Acc<S> part{{p[0], p[1], p[2]}};
    combine(total, part);
  }
  shared[threadIdx.x] = total;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    f.finish(shared[0], box->result);
    box->blocks_done = 0;
  }
}

// ---- chunks: the vectorised passes over FP16 / FP32 vectors ----
// A thread loads 8 consecutive elements at once (one 16-byte load of FP16, two of FP32): with
// one 2-byte load per element in flight, the FP16 passes ran at a third of the memory
// bandwidth. Reductions over chunks fold each chunk's elements in index order, so every pass
// that reduces over chunks (DotTerm, the CG step's terms) sums in the same order.

inline constexpr int kChunk = 8;

template <class T>
struct Chunk {
  T v[kChunk];
};

/// Chunks covering n elements.
__host__ __device__ inline std::int64_t chunk_count(std::int64_t n) {
  return (n + kChunk - 1) / kChunk;
}

/// Elements [8c, 8c + 8) of x (those at n and beyond read as zero).
template <class T>
__device__ inline Chunk<T> load_chunk(const T* x, std::int64_t c, std::int64_t n) {
  Chunk<T> out;
  const std::int64_t base = c * kChunk;
  if (base + kChunk <= n && reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(x + base);
    uint4 raw[sizeof(T) / 2];
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) raw[i] = src[i];
    memcpy(&out, raw, sizeof(out));
  } else {
    for (int i = 0; i < kChunk; ++i) out.v[i] = base + i < n ? x[base + i] : T(0.0f);
  }
  return out;
}

/// Stores the elements of v below n at [8c, 8c + 8) of x.
template <class T>
__device__ inline void store_chunk(T* x, std::int64_t c, std::int64_t n, const Chunk<T>& v) {
  const std::int64_t base = c * kChunk;
  if (base + kChunk <= n && reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    uint4 raw[sizeof(T) / 2];
    memcpy(raw, &v, sizeof(v));
    uint4* dst = reinterpret_cast<uint4*>(x + base);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) dst[i] = raw[i];
  } else {
    for (int i = 0; i < kChunk && base + i < n; ++i) x[base + i] = v.v[i];
  }
}

/// Maxima of |a| (rows x cols, row stride lda), |b| and |c| (contiguous; null: 0) into
/// result[0..2], exact.
/// max that propagates NaN (fmax drops it): a NaN vector's max is NaN, not its finite part's.
__device__ inline double nan_max(double acc, double v) {
  return (v != v || v > acc) ? v : acc;
}

template <class T>
struct MaxTerm {
  const T* a;
  std::int64_t cols, lda;
  const T* b;
  const T* c;
  __device__ void operator()(std::int64_t k, Acc<double>& acc) const {
    acc.v[0] = nan_max(acc.v[0], fabs(to_double(a[window_index(k, cols, lda)])));
    if (b) acc.v[1] = nan_max(acc.v[1], fabs(to_double(b[k])));
    if (c) acc.v[2] = nan_max(acc.v[2], fabs(to_double(c[k])));
  }
  __device__ void finish(const Acc<double>& acc, double* out) const {
    for (int c2 = 0; c2 < 3; ++c2) out[c2] = acc.v[c2];
  }
};

/// half's products (backend_cpu_vectors.cpp's rule): sum0 = sum fl16(fl16(a s_a) fl16(b s_b)) in
/// FP32 with s = 2^-ceil(log2 max) from `m` (slots ia, ib), likewise sum1 over c, d when c is
/// given; finish multiplies the FP32 sums back by 2^(e_a + e_b) in FP64.
struct HalfProducts {
  const __half* a;
  const __half* b;
  int ia, ib;
  const __half* c;
  const __half* d;
  int ic, id;
  const DeviceBox* m;
  __device__ void operator()(std::int64_t k, Acc<float>& acc) const {
    acc.v[0] += __half2float(__hmul_rn(scale_pow2(a[k], box_scale(m, ia, -1, 0)),
                                       scale_pow2(b[k], box_scale(m, ib, -1, 0))));
    if (c)
      acc.v[1] += __half2float(__hmul_rn(scale_pow2(c[k], box_scale(m, ic, -1, 0)),
                                         scale_pow2(d[k], box_scale(m, id, -1, 0))));
  }
  __device__ void finish(const Acc<float>& acc, double* out) const {
    out[0] = ldexp(static_cast<double>(acc.v[0]),
                   pow2_exponent(m->result[ia]) + pow2_exponent(m->result[ib]));
    out[1] = c ? ldexp(static_cast<double>(acc.v[1]),
                       pow2_exponent(m->result[ic]) + pow2_exponent(m->result[id]))
               : 0.0;
    out[2] = 0;
  }
};

}  // namespace halfscope::deconv::cudak
