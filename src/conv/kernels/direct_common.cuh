// Device helpers shared by the direct GPU convolutions (naive.cuh, register.cuh): one tag type per
// precision (storage bits, arithmetic type, the one FMA), boundary-aware loads, and the FP16/BF16
// overflow accounting. Host side: src/conv/direct_cuda_common.hpp.
//
// Storage is handled as raw bits (uint16/32/64) everywhere a value is only moved (global loads,
// shared memory, stores), so no vector load or shared-memory copy depends on __half's layout, and
// converted to the arithmetic type only where it is used.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "halfscope/core/half.hpp"

/// Loop unrolling for nvcc; nothing for a host compiler (the host emulation of these kernels in
/// tests/conv/direct_cuda_emulator.hpp), which would warn about an unknown pragma.
#if defined(__CUDACC__)
#define HS_UNROLL _Pragma("unroll")
#define HS_NO_UNROLL _Pragma("unroll 1")
#else
#define HS_UNROLL
#define HS_NO_UNROLL
#endif

/// The block's dynamic shared memory (a host emulation of these kernels defines its own).
#ifndef HS_DYNAMIC_SHARED
#define HS_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

namespace halfscope::conv::kernels {

/// FP64 storage, FP64 arithmetic.
struct PrecDouble {
  using R = unsigned long long;
  using A = double;
  static constexpr bool kNarrow = false;
  __device__ static A widen(R r) { return __longlong_as_double(static_cast<long long>(r)); }
  __device__ static R narrow(A a) { return static_cast<R>(__double_as_longlong(a)); }
  __device__ static A fma(A k, A x, A acc) { return ::fma(k, x, acc); }
  __device__ static A zero() { return 0.0; }
};

/// FP32 storage, FP32 arithmetic.
struct PrecSingle {
  using R = unsigned int;
  using A = float;
  static constexpr bool kNarrow = false;
  __device__ static A widen(R r) { return __uint_as_float(r); }
  __device__ static R narrow(A a) { return __float_as_uint(a); }
  __device__ static A fma(A k, A x, A acc) { return __fmaf_rn(k, x, acc); }
  __device__ static A zero() { return 0.0f; }
};

/// FP16 storage, FP16 arithmetic: every multiply-add is one fused __hfma, rounded to FP16.
struct PrecHalf {
  using R = unsigned short;
  using A = __half;
  static constexpr bool kNarrow = true;
  static constexpr unsigned kExpMask = 0x7c00u;
  __device__ static A widen(R r) { return __ushort_as_half(r); }
  __device__ static R narrow(A a) { return __half_as_ushort(a); }
  __device__ static A fma(A k, A x, A acc) { return __hfma(k, x, acc); }
  __device__ static A zero() { return __ushort_as_half(0); }
};

/// FP16 storage, FP32 arithmetic, one rounding to FP16 at the end (the study's "mixed").
struct PrecMixed {
  using R = unsigned short;
  using A = float;
  static constexpr bool kNarrow = true;
  static constexpr unsigned kExpMask = 0x7c00u;
  __device__ static A widen(R r) { return __half2float(__ushort_as_half(r)); }
  __device__ static R narrow(A a) { return __half_as_ushort(__float2half_rn(a)); }
  __device__ static A fma(A k, A x, A acc) { return __fmaf_rn(k, x, acc); }
  __device__ static A zero() { return 0.0f; }
};

/// BF16 storage, FP32 arithmetic, one rounding to BF16 at the end.
struct PrecBF16 {
  using R = unsigned short;
  using A = float;
  static constexpr bool kNarrow = true;
  static constexpr unsigned kExpMask = 0x7f80u;
  __device__ static A widen(R r) { return __uint_as_float(static_cast<unsigned>(r) << 16); }
  __device__ static R narrow(A a) { return __bfloat16_as_ushort(__float2bfloat16_rn(a)); }
  __device__ static A fma(A k, A x, A acc) { return __fmaf_rn(k, x, acc); }
  __device__ static A zero() { return 0.0f; }
};

/// y mod n in [0, n), for any y (Boundary::Circular; the kernel may be larger than the image).
__device__ inline long long wrap_index(long long y, long long n) {
  const long long m = y % n;
  return m < 0 ? m + n : m;
}

/// Floor of a / b for b > 0 (a may be negative).
__device__ inline long long floor_div(long long a, long long b) {
  const long long q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// The geometry a kernel needs (geometry.hpp's Geometry with the pointers), passed by value.
struct ConvArgs {
  const void* image = nullptr;   // rows x cols, raw storage bits, C-contiguous
  const void* kernel = nullptr;  // krows x kcols, raw storage bits (the caller's array)
  void* out = nullptr;           // out_rows x out_cols
  long long rows = 0, cols = 0, out_rows = 0, out_cols = 0, row0 = 0, col0 = 0;
  int krows = 0, kcols = 0;
  int circular = 0;
  unsigned int* overflow = nullptr;  // FP16/BF16 storage: outputs non-finite from finite inputs
};

/// The factors of a rank-one kernel, k(u, v) = col[u] row[v], for the register method's streaming
/// kernel when the separable method runs it (separable_cuda, widths up to 7). Passed by value as
/// a kernel parameter, so a call uploads nothing and the FFMAs read the taps from the parameter
/// bank as they read constant memory.
struct SepTaps {
  static constexpr int kMaxWidth = 7;  // register_tuning::kStreamMaxWidth
  float row[kMaxWidth];                // FP32 arithmetic
  float col[kMaxWidth];
  unsigned row2[kMaxWidth];  // FP16 arithmetic: each tap in both halves of an HFMA2 operand
  unsigned col2[kMaxWidth];

  /// The taps of factors row[0..n), col[0..n) (n <= kMaxWidth): rounded to FP32, and that value
  /// rounded to FP16 (nearest even) in both halves of a word.
  static SepTaps of(const double* row, const double* col, int n) {
    SepTaps t{};
    for (int k = 0; k < n; ++k) {
      t.row[k] = static_cast<float>(row[k]);
      t.col[k] = static_cast<float>(col[k]);
      t.row2[k] = 0x10001u * float_to_half_bits_rne(t.row[k]);
      t.col2[k] = 0x10001u * float_to_half_bits_rne(t.col[k]);
    }
    return t;
  }
};

/// in(y, x) of geometry.hpp: the image inside, 0 (zero boundary) or the wrapped pixel outside.
template <class R>
__device__ inline R load_bounded(const R* img, long long rows, long long cols, bool circular,
                                 long long y, long long x) {
  const bool inside = static_cast<unsigned long long>(y) < static_cast<unsigned long long>(rows) &&
                      static_cast<unsigned long long>(x) < static_cast<unsigned long long>(cols);
  if (!inside) {
    if (!circular) return R(0);
    y = wrap_index(y, rows);
    x = wrap_index(x, cols);
  }
  return __ldg(img + y * cols + x);
}

/// True when a raw FP16/BF16 value is inf or NaN (exponent all ones).
template <class Prec>
__device__ inline bool is_nonfinite_bits(unsigned bits) {
  return (bits & Prec::kExpMask) == Prec::kExpMask;
}

/// Sets bit 15 or 31 of the result when the FP16/BF16 half-word below it is inf or NaN: adding
/// (0x8000 - mask) to the masked exponent carries into the sign position only when the exponent
/// is all ones, and never across the two halves. Three instructions per pair of outputs, so the
/// hot path can test every output and branch to the slow recount only when something is set.
template <class Prec>
__device__ inline unsigned nonfinite_pair_flags(unsigned word) {
  constexpr unsigned mask = Prec::kExpMask | (Prec::kExpMask << 16);
  constexpr unsigned add = (0x8000u - Prec::kExpMask) | ((0x8000u - Prec::kExpMask) << 16);
  return ((word & mask) + add) & 0x80008000u;
}

/// True when every image pixel and kernel tap that out(i, j) reads is finite: an inf or NaN
/// output is an overflow of the arithmetic only then (an inf in the input is passed on, as SciPy
/// does). Slow; called only for an output that is not finite.
template <class Prec>
__device__ bool footprint_finite(const ConvArgs& a, long long i, long long j) {
  using R = typename Prec::R;
  const R* img = static_cast<const R*>(a.image);
  const R* ker = static_cast<const R*>(a.kernel);
  for (int u = 0; u < a.krows; ++u)
    for (int v = 0; v < a.kcols; ++v) {
      if (is_nonfinite_bits<Prec>(__ldg(ker + static_cast<long long>(u) * a.kcols + v)))
        return false;
      const R x =
          load_bounded(img, a.rows, a.cols, a.circular != 0, i + a.row0 - u, j + a.col0 - v);
      if (is_nonfinite_bits<Prec>(x)) return false;
    }
  return true;
}

/// Adds this thread's overflow count to the device counter, one atomic per block that has any.
/// Every thread of the block must call it (it contains barriers).
__device__ inline void commit_overflow(unsigned count, unsigned int* counter) {
  __shared__ unsigned int block_count;
  const bool first = threadIdx.x == 0 && threadIdx.y == 0;
  if (first) block_count = 0;
  if (!__syncthreads_or(count != 0)) return;  // uniform: the common case costs one barrier
  if (count) atomicAdd(&block_count, count);
  __syncthreads();
  if (first) atomicAdd(counter, block_count);
}

}  // namespace halfscope::conv::kernels
