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

/// The blocks between halves on FP16 tensor cores in FP32-grade arithmetic (split16, as the
/// factorization's diagonal updates): X1 and L21 split by fp16_split at their rows' exponents
/// (diagonal_exponents: exponents[0] for the diagonal tile's rows, exponents[1 + t] for block t;
/// on the device and, as host_exponents, on the host), X2 -= 2^(e_t + e_0) [lo hi hi]_X1
/// [hi hi lo]_L21^T per run of blocks with one exponent; a block with kNoSplitExponent, or the
/// short last block, stays strict FP32. A part past FP16's range is not flagged (the conversion
/// is given `flag` with a tag that never wins): it needs |L(a, b)| above 4 sqrt(A(a, a)), so A is
/// not positive definite, and its Inf / NaN reaches a later pivot or the factor's checks.
/// `parts`: panel_trsm_split_scratch(rows, w) FP16 values.
struct PanelSplit {
  const int* exponents = nullptr;
  const int* host_exponents = nullptr;
  void* parts = nullptr;
  unsigned long long* flag = nullptr;
};

/// Floats of scratch panel_trsm needs for panels of up to `rows` rows in all and w columns.
std::int64_t panel_trsm_scratch(std::int64_t rows, std::int64_t w) noexcept;

/// FP16 values of PanelSplit::parts for panels of up to `rows` rows in all and w columns.
std::int64_t panel_trsm_split_scratch(std::int64_t rows, std::int64_t w) noexcept;

/// X L^T = T in place: T the panel `p`, `l` the lower triangle of the diagonal tile (w x w, ld
/// ldl). The columns are halved recursively down to widths of 128 or less (leaves); the block
/// between two halves, X2 -= X1 L21^T, is one GEMM batched over the row blocks (strict FP32; or
/// split16 with `split`, one per run of blocks with one exponent), and each leaf one strict FP32
/// GEMM by its block's inverse (leaf_inverses, all formed first), its T copied aside. `scratch`:
/// panel_trsm_scratch(rows, w) floats. Asynchronous on the handle's stream.
void panel_trsm(cublasHandle_t blas, const float* l, std::int64_t ldl, const PanelBlocks& p,
                std::int64_t w, float* scratch, const PanelSplit* split = nullptr);

}  // namespace halfscope::linalg::detail
