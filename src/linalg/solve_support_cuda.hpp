// Device helpers of the solves and of the refinement (internal header, CUDA builds only): the
// factor's tile norms the solve policy sees, a finiteness scan, a transpose, and the FP32
// residual B - X A of the refinement. Each call but first_non_finite_async runs on its own
// (non-blocking) stream, ordered after the work already queued on the legacy default stream (where
// Array copies run: a device-to-device or pageable cudaMemcpy can return before its copy ends),
// and synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// Blocks until the legacy default stream is idle: what an Array copy (clone, to) queued there has
/// landed before work on other streams reads or overwrites its buffers.
void wait_for_legacy_stream();

/// As factor_norms_cpu (solve_cpu.hpp) for device tiles: FP64 sums by a kernel, one block per
/// stored tile (the lower triangle only for diagonal tiles), copied back; last entry ||L||_F.
std::vector<double> factor_norms_cuda(const TileMatrix& l);

/// The index of the first non-finite entry of `count` device floats, or -1.
std::int64_t first_non_finite_cuda(const float* x, std::int64_t count);
/// *first = min(*first, the index of any non-finite entry of `count` device floats), on `stream`.
void first_non_finite_async(const float* x, std::int64_t count, unsigned long long* first,
                            cudaStream_t stream);

/// out (cols x rows, row-major) = in (rows x cols, row-major) transposed; device pointers.
void transpose_cuda(const float* in, std::int64_t rows, std::int64_t cols, float* out);

/// R = B - X A in FP32 on the device: `a` lower float32 device tiles of the symmetric A (diagonal
/// tiles holding both triangles), x, b, r the r x n row-major arrays (column-major n x r). One
/// cuBLAS SGEMM per stored tile and mirror (default math mode: FP32, no TF32).
void residual_cuda(const TileMatrix& a, const float* x, const float* b, float* r, std::int64_t rhs);

/// ||x||_F of `count` device floats (FP64 accumulation).
double norm_cuda(const float* x, std::int64_t count);

/// x += d for `count` device floats.
void add_cuda(float* x, const float* d, std::int64_t count);

}  // namespace halfscope::linalg::detail
