// The low-precision arithmetic contract of matched filtering: what `half`, `mixed`, `bf16` and
// `split` compute, written once so the CPU emulation (direct_lowp_cpu.cpp) and the GPU kernels
// (tensor_cuda*.cu, cublas_cuda.cu) implement the same thing. The CPU follows it exactly; a GPU
// kernel follows the scaling and rounding rules exactly and may sum in another order (tensor
// cores do), so the two agree within the bound of tests/mfilter/mfilter_testing.hpp.
//
// Known departure: the tensor kernel (kernels/tensor_mf.cuh, docs/mfilter-tensor.md) scales
// coarser than the slices below, one shift per template channel and one per staged data tile,
// folded into its FP32 epilogue; its rounding (RNE) and hi + lo split are the contract's. It is
// therefore held to the error bound of mfilter_testing.hpp (whose underflow term uses the global
// maxima, valid for any scaling granularity), not to bit equality with the CPU emulation.
//
// Notation: one template channel t (K samples, float32 as dispatch hands it: unit energy, in full
// normalization demeaned first, in FP64, then rounded to float32), one data channel S (float32,
// max |S| in [0.5, 1), demeaned over the channel in full normalization),
// a window starting at data sample s. The K axis is cut into slices of kSliceLength = 16 samples
// (k = 16 b .. 16 b + 15, the last slice may be shorter): one mma k-step.
//
// Scale rule (power of two, so scaling and unscaling are exact): for a set of values with
// maximum magnitude M > 0, shift = scale_shift(M) = 15 - e where M = m 2^e, m in [0.5, 1)
// (frexp), so M 2^shift lies in [2^14, 2^15): as large as FP16 allows with one bit of headroom for
// the rounding (FP16 max 65504 > 2^15), so nothing overflows and the smallest values stay clear
// of FP16's subnormals. M = 0 gives shift 0 (all values are zero).
//   * template slice shift  a(b) = scale_shift(max_k |t[k]| over slice b)
//   * data slice shift: d(s, b) = scale_shift(max |S[q]| over the samples the slice multiplies,
//     q = s + 16 b .. s + 16 b + len_b - 1, len_b = min(16, K - 16 b)); a sliding maximum over
//     16 samples (and one over K mod 16 for the last slice when K is not a multiple of 16), so
//     the result does not depend on how the data are cut into time chunks.
//
// mixed (study 001's kernel):
//   th = fp16(ldexp(t[k], a(b))), xh = fp16(ldexp(S[s + k], d(s, b)))     (RNE)
//   partial_b = sum over the slice of th * xh, in FP32 (products of two FP16 are exact in FP32)
//   acc = sum_b ldexp(partial_b, -(a(b) + d(s, b))) in FP32
// bf16: th = bf16(t[k]), xh = bf16(S[s + k]) (no scaling: BF16 has FP32's range),
//   acc = sum_k th * xh in FP32 (products exact in FP32).
// split (FP32-grade on FP16 tensor cores): the same shifts as mixed; for each operand
//   hi = fp16(ldexp(x, shift)), lo = fp16(ldexp(x, shift) - hi)  (the subtraction is exact in
//   FP32), partial_b = sum th.hi * xh.hi + th.hi * xh.lo + th.lo * xh.hi in FP32 (lo * lo, below
//   2^-22 relative, is dropped), unscaled and summed over slices as mixed.
// half (cuBLAS variant 4, all FP16, global normalization):
//   th = fp16(t[k] / Mt), xh = fp16(S[s + k] / Ms) with Mt = max |templates| over the whole
//   template array, Ms = max |data| over the whole data (of the chunk on the GPU), FP32 division;
//   acc16 = fp16(acc16 + fp16(th * xh)) for k = 0 .. K - 1 (every operation rounds to FP16),
//   acc = float(acc16) * Mt * Ms. An infinite or NaN acc16 is a NumericalError (it cannot
//   happen for K < 65504 since |th|, |xh| <= 1, but the check stays).
//
// All precisions then: CC = acc / sqrt(E_T E_S) with the FP64 energies of backends.hpp, 0 for
// flat windows or templates and outside the data, clamped to [-1, 1], stored as float32.
// In full normalization the numerator is sum_k t'[k] S[s + k] with the demeaned template t' and
// the window as dispatch hands it over (sum_k t' = 0 makes demeaning the window unnecessary in
// exact arithmetic). Dispatch (prepare.cpp) has already removed each channel's FP64 mean before
// rounding to float32, so the operands err relative to |S - channel mean|, not to a large DC
// offset; what remains is the window's local mean against its fluctuation (slow drifts within a
// channel), which high-pass filtering the data removes.
#pragma once

#include <cmath>
#include <cstdint>

#include "halfscope/core/half.hpp"

#if defined(__CUDACC__)
#define HS_MF_HOST_DEVICE __host__ __device__
#else
#define HS_MF_HOST_DEVICE
#endif

namespace halfscope::mfilter {

/// Samples per scaling slice: one FP16 mma k-step (m16n8k16).
inline constexpr std::int64_t kSliceLength = 16;

/// The power-of-two shift of the contract above: M * 2^shift in [2^14, 2^15) for M > 0, 0 for
/// M == 0 (or a non-finite M, which validation excludes).
HS_MF_HOST_DEVICE inline int scale_shift(float max_abs) {
  if (!(max_abs > 0.0f) || !(max_abs < INFINITY)) return 0;
  int e = 0;
  (void)frexpf(max_abs, &e);
  return 15 - e;
}

/// Number of K slices: ceil(K / 16).
HS_MF_HOST_DEVICE inline std::int64_t slice_count(std::int64_t K) {
  return (K + kSliceLength - 1) / kSliceLength;
}

/// Host helper: the shift of every run of `len` (1..16) samples of one channel of L samples,
/// shift[p] = scale_shift(max |x[p .. p + len - 1]|) for p <= L - len (later entries clip at the
/// end of the data and are never used by a window inside the data). `shift` has L entries;
/// int16 because a float's shift spans -113 .. 163.
inline void data_shifts(const float* x, std::int64_t L, std::int64_t len, std::int16_t* shift) {
  // Direct maximum over `len` samples: O(16 L), small next to the O(K L) correlation.
  for (std::int64_t p = 0; p < L; ++p) {
    float m = 0.0f;
    const std::int64_t end = p + len < L ? p + len : L;
    for (std::int64_t q = p; q < end; ++q) m = fabsf(x[q]) > m ? fabsf(x[q]) : m;
    shift[p] = static_cast<std::int16_t>(scale_shift(m));
  }
}

}  // namespace halfscope::mfilter
