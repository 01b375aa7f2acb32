// Triangular solves by explicit inverses of diagonal blocks (internal, CUDA builds only): the
// leaves of the factorization's panel solve and the diagonal tiles of the substitutions.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "linalg/tile_cuda.hpp"

namespace halfscope::linalg::detail {

/// Width of the diagonal blocks inverted by one thread block (leaf_inverses).
inline constexpr std::int64_t kInverseLeaf = 128;

/// `count` lower triangular w x w blocks with leading dimension ld: block t at base +
/// offsets[t * offset_stride] (device table), or at base alone when offsets is null (count 1).
struct TriangularBlocks {
  const float* base = nullptr;
  const std::int64_t* offsets = nullptr;
  std::int64_t offset_stride = 1;
  std::int64_t count = 1;
  std::int64_t ld = 0;
  std::int64_t w = 0;
};

/// -L_bb^-1 for each diagonal block b of width kInverseLeaf (the last one narrower) of every
/// block of `in`, by FP32 substitution: leaf b of block t at out + t * block_stride + b *
/// leaf_stride, ld ldo, its strict upper triangle written as zeros. One launch for all of them.
/// Asynchronous on `stream`.
void leaf_inverses(const TriangularBlocks& in, float* out, std::int64_t ldo,
                   std::int64_t leaf_stride, std::int64_t block_stride, cudaStream_t stream);

/// The rest of -L^-1 (w x w, ld w, at neg_inv) for the lower triangular tile `l` (ld ldl), its
/// leaves already in place (leaf_inverses with ldo = w, leaf_stride = kInverseLeaf (w + 1)) and
/// the blocks above them zero: the blocks below the leaves by halving, strict FP32 GEMMs
/// (-L^-1 of [L11 0; L21 L22] has N21 = N22 L21 N11 with N = -L^-1). `scratch`: w^2 / 4 floats.
/// Asynchronous on the handle's stream.
void join_inverse(cublasHandle_t blas, const float* l, std::int64_t ldl, std::int64_t w,
                  float* neg_inv, float* scratch);

/// -L^-1 of one tile (zeroing, leaf_inverses and join_inverse): the negation makes
/// apply_inverse's C -= A B an assignment.
void negated_inverse(cublasHandle_t blas, const float* l, std::int64_t ldl, std::int64_t w,
                     float* neg_inv, float* scratch);

/// Floats of scratch apply_inverse needs: both operands split into TF32 parts, stacked.
std::int64_t apply_inverse_scratch(std::int64_t w, std::int64_t r) noexcept;

/// X = op(L)^-1 X in place for the w x r block `x` (ld ldx), op(L) = L^T when `transpose`, with
/// `neg_inv` from negated_inverse: X is zeroed, then C -= (-L^-1) X as one 3xTF32 product on
/// tensor cores, its three terms stacked along K (Nh Xl + Nl Xh + Nh Xh; cuBLAS may sum the K
/// blocks in any order, which changes nothing to the bound). A non-finite entry of the inverse (a
/// numerically singular tile) stores `tag` in *flag, one of X (or one TF32 cannot hold) `tag_x`.
/// Asynchronous.
void apply_inverse(cublasHandle_t blas, const float* neg_inv, std::int64_t w, bool transpose,
                   float* x, std::int64_t ldx, std::int64_t r, float* scratch, FailureCode* flag,
                   FailureCode tag, FailureCode tag_x);

}  // namespace halfscope::linalg::detail
