// Device code of the FP32 <-> FP16 / BF16 conversions (the SP2HP of study 002). Host side:
// src/core/convert_cuda.cu. Reference: the CPU conversion and classify_conversion in
// src/core/convert.cpp, which the GPU must match bit for bit and count for count.
//
// Floors: a conversion reads 4 bytes and writes 2 per element (6 B/element), so at an H100's
// ~3 TB/s copy ceiling 2^28 elements take ~0.5 ms; the arithmetic is negligible. The kernels are
// therefore written for bandwidth: 16-byte loads of four floats, one 8-byte store of four results,
// a grid-stride loop with 64-bit indices, and the counts kept in registers until one reduction per
// block and one atomic per nonzero counter per block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

namespace halfscope::kernels {

/// Per-conversion counts in device memory; `first_overflow` is LLONG_MAX when nothing overflowed.
struct ConversionCounters {
  unsigned long long overflow;
  unsigned long long underflow;
  unsigned long long subnormal;
  unsigned long long nan;
  long long first_overflow;
};

/// IEEE binary16. NaN is handled by bits, exactly like the CPU (`float_to_half_bits_rne_soft`):
/// the hardware cvt returns a canonical NaN, which would differ in sign and payload.
struct HalfFormat {
  static constexpr std::uint16_t inf_bits = 0x7c00u;
  static constexpr std::uint16_t min_normal_bits = 0x0400u;
  __device__ static std::uint16_t narrow(float x) {
    const unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
      return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
    return __half_as_ushort(__float2half_rn(x));  // round to nearest even, overflow to +-inf
  }
  __device__ static float widen(std::uint16_t b) {
    // NaN: same sign and payload, quiet bit set (IEEE: a signalling NaN converts to a quiet one),
    // as the CPU's _Float16 widening gives.
    if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0)
      return __uint_as_float((static_cast<unsigned int>(b & 0x8000u) << 16) | 0x7fc00000u |
                             (static_cast<unsigned int>(b & 0x3ffu) << 13));
    return __half2float(__ushort_as_half(b));  // exact
  }
};

/// bfloat16: the top half of binary32. NaN again by bits, as on the CPU (`float_to_bf16_bits_rne`).
struct BFloat16Format {
  static constexpr std::uint16_t inf_bits = 0x7f80u;
  static constexpr std::uint16_t min_normal_bits = 0x0080u;
  __device__ static std::uint16_t narrow(float x) {
    const unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
  __device__ static float widen(std::uint16_t b) {
    return __uint_as_float(static_cast<unsigned int>(b) << 16);  // exact, NaN included
  }
};

/// A fresh set of counts (no overflow yet).
__device__ inline ConversionCounters zero_counters() {
  return {0, 0, 0, 0, LLONG_MAX};
}

/// Adds one conversion of `x` with result `bits` to `t`: classify_conversion of
/// src/core/convert.cpp, on the device.
template <class Format>
__device__ void tally(ConversionCounters& t, float x, std::uint16_t bits, long long index) {
  if (isnan(x)) {
    ++t.nan;
    return;
  }
  const std::uint16_t mag = bits & 0x7fffu;
  if (mag == Format::inf_bits) {
    if (isfinite(x)) {
      ++t.overflow;
      t.first_overflow = min(t.first_overflow, index);
    }
  } else if (mag == 0) {
    if (x != 0.0f) ++t.underflow;
  } else if (mag < Format::min_normal_bits) {
    ++t.subnormal;
  }
}

__device__ inline void warp_reduce(ConversionCounters& t) {
  for (int offset = 16; offset > 0; offset /= 2) {
    t.overflow += __shfl_down_sync(0xffffffffu, t.overflow, offset);
    t.underflow += __shfl_down_sync(0xffffffffu, t.underflow, offset);
    t.subnormal += __shfl_down_sync(0xffffffffu, t.subnormal, offset);
    t.nan += __shfl_down_sync(0xffffffffu, t.nan, offset);
    t.first_overflow =
        min(t.first_overflow, __shfl_down_sync(0xffffffffu, t.first_overflow, offset));
  }
}

/// Reduces the block's counts and adds them to `out` with one atomic per nonzero counter.
/// Requires blockDim.x to be a multiple of 32 and at most 1024; every thread must call it.
__device__ inline void block_commit(ConversionCounters t, ConversionCounters* out) {
  __shared__ ConversionCounters per_warp[32];
  const unsigned lane = threadIdx.x % 32u;
  const unsigned warp = threadIdx.x / 32u;
  warp_reduce(t);
  if (lane == 0) per_warp[warp] = t;
  __syncthreads();
  if (warp != 0) return;
  const unsigned warps = blockDim.x / 32u;
  t = lane < warps ? per_warp[lane] : zero_counters();
  warp_reduce(t);
  if (lane != 0) return;
  if (t.overflow) atomicAdd(&out->overflow, t.overflow);
  if (t.underflow) atomicAdd(&out->underflow, t.underflow);
  if (t.subnormal) atomicAdd(&out->subnormal, t.subnormal);
  if (t.nan) atomicAdd(&out->nan, t.nan);
  if (t.first_overflow != LLONG_MAX) atomicMin(&out->first_overflow, t.first_overflow);
}

/// The element layout of one call: `head` scalar elements until both pointers are aligned, then
/// `vectors` groups of four, then the `tail` scalar elements. When the two pointers cannot be
/// aligned together, head = n and vectors = tail = 0 (all scalar, still coalesced).
struct VectorSplit {
  long long head;
  long long vectors;
  long long tail;
  __device__ long long scalar_index(long long i) const {
    return i < head ? i : head + 4 * vectors + (i - head);
  }
};

/// FP32 -> 16-bit format: round to nearest even, counting into `counters`.
template <class Format>
__global__ void narrow_kernel(const float* __restrict__ in, std::uint16_t* __restrict__ out,
                              VectorSplit split, ConversionCounters* counters) {
  ConversionCounters counts = zero_counters();
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;

  const float4* vin = reinterpret_cast<const float4*>(in + split.head);
  uint2* vout = reinterpret_cast<uint2*>(out + split.head);
  for (long long v = tid; v < split.vectors; v += stride) {
    const float4 f = vin[v];
    const std::uint16_t b0 = Format::narrow(f.x), b1 = Format::narrow(f.y);
    const std::uint16_t b2 = Format::narrow(f.z), b3 = Format::narrow(f.w);
    const long long base = split.head + 4 * v;
    tally<Format>(counts, f.x, b0, base);
    tally<Format>(counts, f.y, b1, base + 1);
    tally<Format>(counts, f.z, b2, base + 2);
    tally<Format>(counts, f.w, b3, base + 3);
    // Little-endian: element 0 in the low half-word.
    vout[v] = make_uint2(static_cast<unsigned>(b0) | (static_cast<unsigned>(b1) << 16),
                         static_cast<unsigned>(b2) | (static_cast<unsigned>(b3) << 16));
  }
  for (long long i = tid; i < split.head + split.tail; i += stride) {
    const long long index = split.scalar_index(i);
    const float x = in[index];
    const std::uint16_t b = Format::narrow(x);
    tally<Format>(counts, x, b, index);
    out[index] = b;
  }
  block_commit(counts, counters);
}

/// 16-bit format -> FP32, exact: 8-byte loads of four inputs, 16-byte stores of four floats.
template <class Format>
__global__ void widen_kernel(const std::uint16_t* __restrict__ in, float* __restrict__ out,
                             VectorSplit split) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint2* vin = reinterpret_cast<const uint2*>(in + split.head);
  float4* vout = reinterpret_cast<float4*>(out + split.head);
  for (long long v = tid; v < split.vectors; v += stride) {
    const uint2 b = vin[v];
    vout[v] = make_float4(Format::widen(static_cast<std::uint16_t>(b.x & 0xffffu)),
                          Format::widen(static_cast<std::uint16_t>(b.x >> 16)),
                          Format::widen(static_cast<std::uint16_t>(b.y & 0xffffu)),
                          Format::widen(static_cast<std::uint16_t>(b.y >> 16)));
  }
  for (long long i = tid; i < split.head + split.tail; i += stride) {
    const long long index = split.scalar_index(i);
    out[index] = Format::widen(in[index]);
  }
}

}  // namespace halfscope::kernels
