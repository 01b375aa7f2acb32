// The panel solve of the GPU tile Cholesky (internal header, CUDA builds only).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

namespace halfscope::linalg::detail {

/// A tall panel as `count` column-major row blocks of w columns: block t at x + t * stride with
/// `rows` rows (`last_rows` for the last) and leading dimension ld (0: its row count). A tile
/// column below a diagonal tile is one (stride nb^2); one tall matrix is count 1, ld >= rows.
struct PanelBlocks {
  float* x = nullptr;
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t last_rows = 0;
  std::int64_t ld = 0;
  std::int64_t stride = 0;
};

/// Floats of scratch panel_trsm needs for panels of up to `rows` rows in all and w columns.
std::int64_t panel_trsm_scratch(std::int64_t rows, std::int64_t w) noexcept;

/// X L^T = T in place in strict FP32: T the panel `p`, `l` the lower triangle of the diagonal
/// tile (w x w, ld ldl). The columns are halved recursively down to widths of 128 or less
/// (leaves); the block between two halves, X2 -= X1 L21^T, is one FP32 GEMM batched over the
/// row blocks, and each leaf one FP32 GEMM by its block's inverse (leaf_inverses, all formed
/// first), its T copied aside. `scratch`: panel_trsm_scratch(rows, w) floats. Asynchronous on
/// the handle's stream.
void panel_trsm(cublasHandle_t blas, const float* l, std::int64_t ldl, const PanelBlocks& p,
                std::int64_t w, float* scratch);

}  // namespace halfscope::linalg::detail
