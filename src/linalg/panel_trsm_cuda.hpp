// The panel solve of the GPU tile Cholesky (internal header, CUDA builds only).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

namespace halfscope::linalg::detail {

/// X L^T = T in place in strict FP32: `x` the tall column-major panel T (rows x w, ld ldx), `l`
/// the lower triangle of the diagonal tile (w x w, ld ldl). The columns are halved recursively
/// down to widths of 128 or less, each solved by cublasStrsm; the block between two halves,
/// X2 -= X1 L21^T, is one FP32 GEMM. Asynchronous on the handle's stream.
void panel_trsm(cublasHandle_t blas, const float* l, std::int64_t ldl, float* x, std::int64_t ldx,
                std::int64_t rows, std::int64_t w);

}  // namespace halfscope::linalg::detail
