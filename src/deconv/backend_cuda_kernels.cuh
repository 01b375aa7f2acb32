// Device code of the CUDA deconvolution backend (host side: backend_cuda.cu,
// backend_cuda_operator.cuh, backend_cuda_evaluator.cu). Arithmetic per precision follows
// backend.hpp: the element types are
//   storage T (double, float, __half), arithmetic A (double, float, __half for half, float for
//   mixed), transform real R / complex C (double/double2, float/float2, __half/__half2).
// Every operation rounds on its own (explicit __fmul_rn / __dadd_rn / __hmul_rn ...: nvcc may
// contract plain __hmul + __hadd into an FMA, never the _rn forms): the GPU then computes what the
// CPU backend computes, operation by operation, and FP16 results never hide an FMA's extra
// precision.
//
// FP16 overflow: a kernel whose FP16 result would overflow (|v| >= 65520 before rounding, or not
// finite) records the operation and the largest magnitude in a DeviceStatus; the host reads it
// with the next scalar (backend.hpp). The reductions are in backend_cuda_reduce.cuh.
//
// half's power-of-two normalisations (as the CPU backend, backend_cpu_half.cpp): the input of each
// FP16 filter is scaled by 2^-(h1 + ceil(log2 max|x|)) and FP16 dot products scale both operands to
// a largest magnitude of at most 1, so the results do not depend on the pixel values' units and no
// product overflows. The maxima are reduced on the device into a DeviceBox that the next kernels
// read (pow2_exponent), so the scalings cost no host round trip.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace halfscope::deconv::cudak {

inline constexpr int kThreads = 256;           // threads per block of every kernel here
inline constexpr int kBlocksPerSm = 8;         // grid-stride waves for element-wise kernels
inline constexpr int kMaxReduceBlocks = 1024;  // size of the partials buffer

/// What the kernels report about FP16 overflow: the first operation (0: none) and the largest
/// magnitude seen among the overflowing results, as float bits (positive floats order as unsigned).
struct DeviceStatus {
  unsigned op = 0;
  unsigned largest_bits = 0;
};

/// The device side of the mailbox: a reduction's result and the status, read back in one copy.
struct DeviceBox {
  double result[3] = {0, 0, 0};
  DeviceStatus status;
  unsigned blocks_done = 0;  // the last-block counter of the reductions (reset by the last block)
};

// ---- element arithmetic, each operation rounded ----

__device__ inline double mul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline __half mul(__half a, __half b) {
  return __hmul_rn(a, b);
}
__device__ inline double add(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline __half add(__half a, __half b) {
  return __hadd_rn(a, b);
}
__device__ inline double sub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline float sub(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline __half sub(__half a, __half b) {
  return __hsub_rn(a, b);
}

/// Complex products, every operation rounded (conj_b: a * conj(b)).
template <bool kConj>
__device__ inline double2 cmul(double2 a, double2 b) {
  const double bi = kConj ? -b.y : b.y;
  return make_double2(sub(mul(a.x, b.x), mul(a.y, bi)), add(mul(a.x, bi), mul(a.y, b.x)));
}
template <bool kConj>
__device__ inline float2 cmul(float2 a, float2 b) {
  const float bi = kConj ? -b.y : b.y;
  return make_float2(sub(mul(a.x, b.x), mul(a.y, bi)), add(mul(a.x, bi), mul(a.y, b.x)));
}
template <bool kConj>
__device__ inline __half2 cmul(__half2 a, __half2 b) {
  const __half bi = kConj ? __hneg(b.y) : b.y;
  return __halves2half2(sub(mul(a.x, b.x), mul(a.y, bi)), add(mul(a.x, bi), mul(a.y, b.x)));
}
__device__ inline double2 cscale(double2 a, double s) {
  return make_double2(mul(a.x, s), mul(a.y, s));
}
__device__ inline float2 cscale(float2 a, float s) {
  return make_float2(mul(a.x, s), mul(a.y, s));
}
__device__ inline __half2 cscale(__half2 a, __half s) {
  return __halves2half2(mul(a.x, s), mul(a.y, s));
}

/// Storage -> arithmetic (and -> FP32 / FP64 for reductions and `assign`).
template <class A, class T>
__device__ inline A load(T v) {
  if constexpr (sizeof(A) == sizeof(T))
    return v;
  else if constexpr (sizeof(T) == 2)
    return static_cast<A>(__half2float(v));
  else
    return static_cast<A>(v);
}
template <class A>
__device__ inline float to_float(A v) {
  if constexpr (sizeof(A) == 2)
    return __half2float(v);
  else
    return static_cast<float>(v);
}
template <class A>
__device__ inline double to_double(A v) {
  if constexpr (sizeof(A) == 2)
    return static_cast<double>(__half2float(v));
  else
    return static_cast<double>(v);
}
template <class A>
__device__ inline A from_double(double v) {
  if constexpr (sizeof(A) == 2)
    return __double2half(v);
  else
    return static_cast<A>(v);
}

/// v * 2^k for an exact power-of-two factor `p2` held in FP32 (FP16 cannot hold 2^16 and above):
/// for FP16 the float product is exact, so its one rounding to FP16 is the FP16 result of v * 2^k.
__device__ inline __half scale_pow2(__half v, float p2) {
  return __float2half_rn(__half2float(v) * p2);
}
__device__ inline float scale_pow2(float v, float p2) {
  return v * p2;
}
__device__ inline double scale_pow2(double v, float p2) {
  return v * static_cast<double>(p2);
}

/// Records an FP16 overflow of operation `op` with magnitude `m`.
__device__ inline void report_overflow(DeviceStatus* s, unsigned op, float m) {
  if (s == nullptr) return;  // the FP64 evaluator's kernels carry no status
  atomicCAS(&s->op, 0u, op);
  atomicMax(&s->largest_bits, __float_as_uint(isnan(m) ? __int_as_float(0x7f800000) : fabsf(m)));
}

/// Arithmetic -> storage, flagging FP16 overflow (results of FP16 arithmetic that are inf or NaN,
/// FP32 values that round beyond 65504).
template <class T, class A>
__device__ inline T store(A v, DeviceStatus* s, unsigned op) {
  if constexpr (sizeof(T) == 2 && sizeof(A) == 2) {
    if (__hisinf(v) || __hisnan(v)) report_overflow(s, op, __half2float(v));
    return v;
  } else if constexpr (sizeof(T) == 2) {
    if (!(fabsf(v) < 65520.0f)) report_overflow(s, op, v);
    return __float2half_rn(v);
  } else {
    // FP32 / FP64 storage: an inf or NaN result (overflowed FP32, or NaN from upstream) is
    // reported like an FP16 overflow, never stored silently.
    if (!isfinite(v)) report_overflow(s, op, static_cast<float>(v));
    return static_cast<T>(v);
  }
}

/// ceil(log2 m) for finite m > 0, 0 otherwise (a zero vector stays zero whatever its scale).
__device__ inline int pow2_exponent(double m) {
  if (!(m > 0) || isinf(m)) return 0;
  int e = 0;
  const double f = frexp(m, &e);  // m = f 2^e, f in [0.5, 1)
  return f == 0.5 ? e - 1 : e;
}

/// 2^(sign ceil(log2 box->result[slot]) + base) as FP32 (1 when box is null and base is 0).
__device__ inline float box_scale(const DeviceBox* box, int slot, int sign, int base) {
  const int e = box ? pow2_exponent(box->result[slot]) : 0;
  return ldexpf(1.0f, sign * e + base);
}

/// Offset of element k of a rows x cols window at (0, 0) of a row-major array of row stride ld
/// (no 64-bit division when the window is the whole array, as on the circular grid).
__device__ inline std::int64_t window_index(std::int64_t k, std::int64_t cols, std::int64_t ld) {
  if (ld == cols) return k;
  const std::int64_t i = k / cols;
  return i * ld + (k - i * cols);
}

__device__ inline std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---- the operator's passes (the transforms between them are cuFFT's) ----

/// grid (gr x gc) = src (rows x cols) in the transform type, zero outside the image. The
/// conversion of mixed's FP16 to FP32 happens here. half (xmax given): times
/// 2^-(h1 + ceil(log2 max|src|)), max|src| = xmax->result[0] (exact but for FP16 subnormals).
/// mixed with `e` (the device-side CG step's scale): src / e rounded to FP16 first, the value
/// axpby(1 / e, src, 0, tmp) would have stored, so the scaled copy is never written.
template <class T, class R>
__global__ void pad_kernel(const T* src, std::int64_t rows, std::int64_t cols, R* grid,
                           std::int64_t gr, std::int64_t gc, const DeviceBox* xmax, int h1,
                           const double* e = nullptr) {
  const float p = xmax ? box_scale(xmax, 0, -1, -h1) : 1.0f;
  const bool whole = gr == rows && gc == cols;
  float inv_e = 1.0f;
  if constexpr (sizeof(T) == 2 && sizeof(R) == 4)
    if (e) inv_e = static_cast<float>(1.0 / *e);
  const auto value = [&](T x) {
    if constexpr (sizeof(T) == 2 && sizeof(R) == 4)
      if (e) return __half2float(__float2half_rn(mul(inv_e, __half2float(x))));
    return load<R>(x);
  };
  for (std::int64_t k = thread_index(); k < gr * gc; k += thread_count()) {
    R v = R(0.0f);
    if (whole) {
      v = value(src[k]);
    } else {
      const std::int64_t i = k / gc, j = k - i * gc;
      if (i < rows && j < cols) v = value(src[i * cols + j]);
    }
    if (xmax) v = scale_pow2(v, p);
    grid[k] = v;
  }
}

/// spec *= q (real multiplier, circular normal operator), then * post (half: 2^-floor(m/2)).
template <class C, class R>
__global__ void multiply_real_kernel(C* spec, const R* q, std::int64_t n, R post, bool scaled) {
  for (std::int64_t k = thread_index(); k < n; k += thread_count()) {
    C v = spec[k];
    v.x = mul(v.x, q[k]);
    v.y = mul(v.y, q[k]);
    if (scaled) v = cscale(v, post);
    spec[k] = v;
  }
}

/// spec *= h (or conj(h)), then * post.
template <bool kConj, class C, class R>
__global__ void multiply_complex_kernel(C* spec, const C* h, std::int64_t n, R post, bool scaled) {
  for (std::int64_t k = thread_index(); k < n; k += thread_count()) {
    C v = cmul<kConj>(spec[k], h[k]);
    if (scaled) v = cscale(v, post);
    spec[k] = v;
  }
}

/// Zero-boundary crop between H and H^T: zeroes the grid outside [0, rows) x [0, cols); half
/// (ymax given: the window's max magnitude) scales the window by 2^-(h1 + ceil(log2 ymax)) for the
/// next forward transform, and reports an FP16 value that overflowed inside the first transform
/// pair as operation `op`'s.
template <class R>
__global__ void crop_kernel(R* grid, std::int64_t rows, std::int64_t cols, std::int64_t gr,
                            std::int64_t gc, const DeviceBox* ymax, int h1, DeviceStatus* s,
                            unsigned op) {
  const float p = ymax ? box_scale(ymax, 0, -1, -h1) : 1.0f;
  for (std::int64_t k = thread_index(); k < gr * gc; k += thread_count()) {
    const std::int64_t i = k / gc, j = k - i * gc;
    if (i >= rows || j >= cols) {
      grid[k] = R(0.0f);
    } else if (ymax) {
      if constexpr (sizeof(R) == 2)
        if (__hisinf(grid[k]) || __hisnan(grid[k])) report_overflow(s, op, __half2float(grid[k]));
      grid[k] = scale_pow2(grid[k], p);
    }
  }
}

/// The precision's spectra from the FP64 h^: h = h^ * hs (complex) and, when q is given,
/// q = (|h^|^2 + lambda) * qs (real), each rounded once (hs, qs: 1/N, or FP16's powers of two).
template <class C, class R>
__global__ void spectra_kernel(const double2* h64, std::int64_t n, double hs, double lambda,
                               double qs, C* h, R* q) {
  for (std::int64_t k = thread_index(); k < n; k += thread_count()) {
    const double2 v = h64[k];
    C c;
    c.x = from_double<R>(v.x * hs);
    c.y = from_double<R>(v.y * hs);
    h[k] = c;
    if (q) q[k] = from_double<R>((v.x * v.x + v.y * v.y + lambda) * qs);
  }
}

/// out = grid * p2 * 2^(ceil(log2 m1) + ceil(log2 m2)) [+ lambda * x] on the image window,
/// rounded to storage, overflow flagged (m1, m2: half's filter-input maxima, or null). The
/// arithmetic is A (FP32 for mixed: the FP32 transform's value, one rounding at the end).
template <class T, class A, class R>
__global__ void readout_kernel(const R* grid, std::int64_t gc, std::int64_t rows, std::int64_t cols,
                               float p2, const DeviceBox* m1, const DeviceBox* m2, const T* x,
                               A lambda, T* out, DeviceStatus* s, unsigned op) {
  const float f = p2 * box_scale(m1, 0, 1, 0) * box_scale(m2, 0, 1, 0);
  for (std::int64_t k = thread_index(); k < rows * cols; k += thread_count()) {
    A v = scale_pow2(load<A>(grid[window_index(k, cols, gc)]), f);
    if (x) v = add(v, mul(lambda, load<A>(x[k])));
    out[k] = store<T>(v, s, op);
  }
}

/// r = g - fl(grid * p2 * 2^ceil(log2 m1)) on the image window, in A, rounded to storage (half's
/// criterion: H x rounded to FP16, then the difference rounded, as the CPU backend).
template <class T, class A, class R>
__global__ void residual_kernel(const R* grid, std::int64_t gc, std::int64_t rows,
                                std::int64_t cols, float p2, const DeviceBox* m1, const T* g, T* r,
                                DeviceStatus* s, unsigned op) {
  const float f = p2 * box_scale(m1, 0, 1, 0);
  for (std::int64_t k = thread_index(); k < rows * cols; k += thread_count()) {
    r[k] = store<T>(sub(load<A>(g[k]), scale_pow2(load<A>(grid[window_index(k, cols, gc)]), f)), s,
                    op);
  }
}

/// a x + b y in A, each operation rounded, then stored (the one expression of axpby, which the
/// device-side CG step's passes reuse so that they round exactly as axpby does).
template <class T, class A>
__device__ inline T axpby_value(A a, T x, A b, T y, DeviceStatus* s, unsigned op) {
  return store<T>(add(mul(a, load<A>(x)), mul(b, load<A>(y))), s, op);
}

/// y = a x + b y in A.
template <class T, class A>
__global__ void axpby_kernel(std::int64_t n, A a, const T* x, A b, T* y, DeviceStatus* s,
                             unsigned op) {
  for (std::int64_t k = thread_index(); k < n; k += thread_count())
    y[k] = axpby_value(a, x[k], b, y[k], s, op);
}

/// to = scale * src + beta * to in W (FP32, FP64 for double); beta == 0 does not read `to`.
template <class W, class S, class T>
__global__ void assign_kernel(std::int64_t n, const S* src, W scale, W beta, T* to, DeviceStatus* s,
                              unsigned op) {
  for (std::int64_t k = thread_index(); k < n; k += thread_count()) {
    W v = mul(scale, load<W>(src[k]));
    if (beta != W(0)) v = add(v, mul(beta, load<W>(to[k])));
    to[k] = store<T>(v, s, op);
  }
}

}  // namespace halfscope::deconv::cudak
