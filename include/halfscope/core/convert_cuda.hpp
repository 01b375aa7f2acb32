// FP32 <-> FP16 / BF16 conversions on a CUDA device (the GPU SP2HP of study 002).
//
// Same rounding (nearest even), same result bits and same ConversionReport counts as the CPU
// conversions of convert.hpp, which the GPU tests compare against. Include only where
// HALFSCOPE_WITH_CUDA is set.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "halfscope/core/array.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/core/half.hpp"

namespace halfscope {

/// Converts `n` device floats to FP16 on stream `s` and returns the counts (overflow, underflow,
/// subnormal, NaN, first overflow index) exactly as `convert_to_half` on the host would. Any
/// alignment and any n (64-bit) are accepted. Synchronises `s` to read the counts back.
ConversionReport convert_to_half_device(const float* d_in, Half* d_out, std::int64_t n,
                                        cudaStream_t s = nullptr);
/// As convert_to_half_device, to bfloat16.
ConversionReport convert_to_bf16_device(const float* d_in, BFloat16* d_out, std::int64_t n,
                                        cudaStream_t s = nullptr);

/// Widens `n` device FP16 values to float (exact). Enqueued on `s`; does not synchronise.
void convert_to_float_device(const Half* d_in, float* d_out, std::int64_t n,
                             cudaStream_t s = nullptr);
/// Widens `n` device bfloat16 values to float (exact). Enqueued on `s`; does not synchronise.
void convert_to_float_device(const BFloat16* d_in, float* d_out, std::int64_t n,
                             cudaStream_t s = nullptr);

/// A new C-contiguous float16 device array converted from a C-contiguous float32 device array;
/// the counts are added to `report` when given. Throws InvalidInput for any other input.
Array to_half_device(const Array& device_f32, ConversionReport* report = nullptr,
                     cudaStream_t s = nullptr);
/// As to_half_device, to bfloat16.
Array to_bf16_device(const Array& device_f32, ConversionReport* report = nullptr,
                     cudaStream_t s = nullptr);
/// A new float32 device array from a C-contiguous float16 or bfloat16 device array (exact).
/// Synchronises `s` before returning.
Array to_float_device(const Array& device_narrow, cudaStream_t s = nullptr);

}  // namespace halfscope
