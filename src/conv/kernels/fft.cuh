// Device code of the GPU FFT convolution (host side: src/conv/fft_cuda.cu; index maps:
// src/conv/fft_layout.hpp). Around cuFFT's R2C and C2R the method needs four kernels: pad the
// image onto the transform grid, pad (and fold) the kernel, multiply the spectra, read the window
// out. All are memory-bound copies with a little arithmetic, so each one is written for bandwidth:
// 16-byte vector accesses wherever alignment allows, 64-bit indices, a grid-stride loop over
// groups of V consecutive elements, and no shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "conv/fft_layout.hpp"
#include "conv/kernels/fft_tuning.hpp"
#include "conv/kernels/storage_types.cuh"

namespace halfscope::conv::kernels::fftk {

using namespace storage;

// ---- arithmetic in the transform's type (FP16 rounds every operation, as precision `half` says)

__device__ inline double mul(double a, double b) {
  return a * b;
}
__device__ inline float mul(float a, float b) {
  return a * b;
}
__device__ inline __half mul(__half a, __half b) {
  return __hmul(a, b);
}
__device__ inline double add(double a, double b) {
  return a + b;
}
__device__ inline float add(float a, float b) {
  return a + b;
}
__device__ inline __half add(__half a, __half b) {
  return __hadd(a, b);
}

__device__ inline double2 cmul(double2 a, double2 b) {
  return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ inline float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
/// FP16 complex product with every operation rounded to FP16: re = fma(ar, br, -(ai*bi)),
/// im = fma(ar, bi, ai*br).
__device__ inline __half2 cmul(__half2 a, __half2 b) {
  const __half re = __hfma(a.x, b.x, __hneg(__hmul(a.y, b.y)));
  const __half im = __hfma(a.x, b.y, __hmul(a.y, b.x));
  return __halves2half2(re, im);
}

__device__ inline std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---- kernel fingerprint (spectrum cache)

/// Result of fingerprint_kernel: a 64-bit hash of the kernel's bytes and, per cached candidate, a
/// nonzero flag when any byte differs. Zero-initialise before the launch.
struct KernelFingerprint {
  unsigned long long hash;
  unsigned int mismatch[tuning::kMaxSpectrumCandidates];
};

/// The bytes to fingerprint and up to kMaxSpectrumCandidates device copies of the same length.
struct FingerprintArgs {
  const unsigned char* data;
  std::int64_t nbytes;
  const unsigned char* candidates[tuning::kMaxSpectrumCandidates];
  int count;
};

/// splitmix64's finaliser: a bijection of 64-bit words that mixes every input bit into every
/// output bit.
__host__ __device__ inline unsigned long long mix64(unsigned long long z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ull;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Word i of a byte string: bytes 4i .. 4i+3, little-endian, zero past the end. The same words
/// whatever the pointer's alignment, so the hash depends on the bytes only.
__device__ inline unsigned int load_word(const unsigned char* p, std::int64_t i,
                                         std::int64_t nbytes) {
  const std::int64_t b = 4 * i;
  if (b + 4 <= nbytes && (reinterpret_cast<std::uintptr_t>(p) & 3u) == 0)
    return __ldg(reinterpret_cast<const unsigned int*>(p) + i);
  unsigned int w = 0;
  for (int k = 0; k < 4 && b + k < nbytes; ++k) w |= static_cast<unsigned int>(p[b + k]) << (8 * k);
  return w;
}

/// hash = sum over words i of mix64((i << 32 | word_i) ^ seed) mod 2^64 (order-free, so the sum
/// needs no ordered reduction and is deterministic), and a byte-exact comparison with every
/// candidate in the same pass. Floors: reads nbytes * (1 + count); a 65x65 FP32 kernel is 17 KB,
/// a launch-latency affair; a 4096x4096 FP32 PSF (64 MB) takes ~20 us per pass on an H100.
__global__ void fingerprint_kernel(FingerprintArgs a, KernelFingerprint* out) {
  const std::int64_t words = (a.nbytes + 3) / 4;
  unsigned long long h = 0;
  unsigned int diff = 0;
  for (std::int64_t i = global_thread(); i < words; i += grid_threads()) {
    const unsigned int w = load_word(a.data, i, a.nbytes);
    h += mix64((static_cast<unsigned long long>(i) << 32 | w) ^ 0x9e3779b97f4a7c15ull);
#pragma unroll
    for (int c = 0; c < tuning::kMaxSpectrumCandidates; ++c)  // unrolled: no local-memory array
      if (c < a.count && load_word(a.candidates[c], i, a.nbytes) != w) diff |= 1u << c;
  }
  for (int offset = 16; offset > 0; offset /= 2) h += __shfl_down_sync(0xffffffffu, h, offset);
  diff = __reduce_or_sync(0xffffffffu, diff);
  if (threadIdx.x % 32u != 0) return;
  if (h != 0) atomicAdd(&out->hash, h);
#pragma unroll
  for (int c = 0; c < tuning::kMaxSpectrumCandidates; ++c)
    if ((diff >> c) & 1u) atomicOr(&out->mismatch[c], 1u);
}

// ---- pad the image onto the transform grid

/// P(y, x) = scale * image(ay.image_source(y), ax.image_source(x)), 0 where either is -1, for the
/// whole n_r x n_c grid. Each thread writes V consecutive grid elements of one row (one 16-byte
/// store of V*sizeof(R) when `vec_store`) and loads them as one vector when they come from V
/// consecutive, aligned image pixels (`vec_load`: image base and row pitch aligned).
/// Floors (H100, 3.35 TB/s): rows*cols*sizeof(T) read + n_r*n_c*sizeof(R) written; 4096^2 FP32
/// onto 4200^2 moves 138 MB: 41 us. No arithmetic to speak of (FP16: one exact power-of-two
/// scaling).
template <class T, class R, int V, bool kScaled>
__global__ void __launch_bounds__(tuning::kFftThreads, tuning::kFftBlocksPerSm)
    pad_image_kernel(const T* __restrict__ image, R* __restrict__ grid, FftAxis ay, FftAxis ax,
                     R scale, bool vec_load, bool vec_store) {
  const std::int64_t groups_per_row = (ax.n + V - 1) / V;
  const std::int64_t total = ay.n * groups_per_row;
  for (std::int64_t g = global_thread(); g < total; g += grid_threads()) {
    const std::int64_t y = g / groups_per_row;
    const std::int64_t x0 = (g - y * groups_per_row) * V;
    Pack<R, V> o;
    const std::int64_t ys = ay.image_source(y);
    if (ys < 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = R{};
    } else {
      const T* row = image + ys * ax.image;
      if (vec_load && ax.source_contiguous(x0, V) && (x0 - ax.shift) % V == 0) {
        const Pack<T, V> in = load_pack(reinterpret_cast<const Pack<T, V>*>(row + (x0 - ax.shift)));
#pragma unroll
        for (int k = 0; k < V; ++k) o.v[k] = convert<R>(in.v[k]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const std::int64_t xs = ax.image_source(x0 + k);
          o.v[k] = xs >= 0 ? convert<R>(row[xs]) : R{};
        }
      }
      if constexpr (kScaled) {
#pragma unroll
        for (int k = 0; k < V; ++k) o.v[k] = mul(o.v[k], scale);
      }
    }
    R* dst = grid + y * ax.n + x0;
    if (vec_store) {
      store_pack(reinterpret_cast<Pack<R, V>*>(dst), o);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (x0 + k < ax.n) dst[k] = o.v[k];
    }
  }
}

// ---- pad (and fold) the kernel

/// Q(a, b) = sum over taps u = a, a + ay.period, ... and v = b, b + ax.period, ... of
/// kernel(u, v), times `scale`, for a < ay.kfold and b < ax.kfold; 0 elsewhere on the grid. Under
/// the zero boundary nothing folds (period = kernel extent). kScaleTerms scales every tap before
/// the sum (FP16: exact power of two, and the sum cannot overflow where the taps do not);
/// otherwise the sum is scaled once. Runs only when a kernel spectrum is not cached, so it is kept
/// simple: one element per thread iteration, coalesced scalar stores. Floors: n_r*n_c*sizeof(R)
/// written (70 MB for 4200^2 FP32: 21 us) + the kernel read.
template <class T, class R, bool kScaleTerms>
__global__ void pad_kernel_kernel(const T* __restrict__ kernel, R* __restrict__ grid, FftAxis ay,
                                  FftAxis ax, R scale) {
  const std::int64_t total = ay.n * ax.n;
  for (std::int64_t e = global_thread(); e < total; e += grid_threads()) {
    const std::int64_t a = e / ax.n;
    const std::int64_t b = e - a * ax.n;
    R acc = R{};
    if (a < ay.kfold && b < ax.kfold) {
      for (std::int64_t u = a; u < ay.kernel; u += ay.period)
        for (std::int64_t v = b; v < ax.kernel; v += ax.period) {
          const R tap = convert<R>(kernel[u * ax.kernel + v]);
          acc = add(acc, kScaleTerms ? mul(tap, scale) : tap);
        }
      if constexpr (!kScaleTerms) acc = mul(acc, scale);
    }
    grid[e] = acc;
  }
}

// ---- pointwise spectrum product

/// x[f] = x[f] * k[f] over the half spectrum (the 1/N of the inverse transform is already in k).
/// 16 bytes per operand per access: 2 FP32 complex, 1 FP64, 4 FP16. Both buffers are the
/// method's own allocations (cudaMalloc / cudaMallocAsync: 256-byte aligned).
/// Floors: 3 * n * sizeof(C) bytes; 4200 x 2101 FP32: 212 MB, 63 us at 3.35 TB/s; 6 flop per
/// complex, negligible.
template <class C>
__global__ void spectrum_multiply_kernel(C* __restrict__ x, const C* __restrict__ k,
                                         std::int64_t n) {
  constexpr int V = 16 / static_cast<int>(sizeof(C));
  using P = Pack<C, V>;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    P a = load_pack(reinterpret_cast<const P*>(x) + p);
    const P b = load_pack(reinterpret_cast<const P*>(k) + p);
#pragma unroll
    for (int j = 0; j < V; ++j) a.v[j] = cmul(a.v[j], b.v[j]);
    store_pack(reinterpret_cast<P*>(x) + p, a);
  }
  const std::int64_t tail = packs * V + global_thread();
  if (tail < n) x[tail] = cmul(x[tail], k[tail]);
}

// ---- read the window out

/// out(i, j) = grid(ay.readout(i), ax.readout(j)) rounded once to the storage type, 0 where either
/// is -1; counts outputs that are not finite (an FP16 overflow) into *nonfinite. Each thread
/// writes V = 16 / sizeof(T) consecutive outputs of one row (one 16-byte store when `vec_store`)
/// and loads them as one vector when they read V consecutive aligned grid elements.
/// Floors: out_rows*out_cols*(sizeof(R) + sizeof(T)); 4096^2 FP32: 134 MB, 40 us on an H100.
template <class R, class T, int V>
__global__ void __launch_bounds__(tuning::kFftThreads, tuning::kFftReadoutBlocksPerSm)
    readout_kernel(const R* __restrict__ grid, T* __restrict__ out, std::int64_t out_rows,
                   std::int64_t out_cols, FftAxis ay, FftAxis ax, bool vec_load, bool vec_store,
                   unsigned long long* nonfinite) {
  const std::int64_t groups_per_row = (out_cols + V - 1) / V;
  const std::int64_t total = out_rows * groups_per_row;
  unsigned int bad = 0;
  for (std::int64_t g = global_thread(); g < total; g += grid_threads()) {
    const std::int64_t i = g / groups_per_row;
    const std::int64_t j0 = (g - i * groups_per_row) * V;
    const int count = static_cast<int>(out_cols - j0 < V ? out_cols - j0 : V);
    Pack<T, V> o;
    const std::int64_t pr = ay.readout(i);
    if (pr < 0) {
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = T{};
    } else {
      const R* row = grid + pr * ax.n;
      const std::int64_t pc0 = ax.readout(j0);
      if (vec_load && count == V && pc0 >= 0 && pc0 % V == 0 && ax.readout_contiguous(j0, V)) {
        const Pack<R, V> in = load_pack(reinterpret_cast<const Pack<R, V>*>(row + pc0));
#pragma unroll
        for (int k = 0; k < V; ++k) o.v[k] = convert<T>(in.v[k]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const std::int64_t pc = k < count ? ax.readout(j0 + k) : -1;
          o.v[k] = pc >= 0 ? convert<T>(row[pc]) : T{};
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) bad += (k < count && !is_finite(o.v[k])) ? 1u : 0u;
    }
    T* dst = out + i * out_cols + j0;
    if (vec_store) {
      store_pack(reinterpret_cast<Pack<T, V>*>(dst), o);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (k < count) dst[k] = o.v[k];
    }
  }
  commit_nonfinite(bad, nonfinite);
}

}  // namespace halfscope::conv::kernels::fftk
