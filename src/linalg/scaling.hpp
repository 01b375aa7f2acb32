// Power-of-two scaling of the matrix before a tile Cholesky with FP16 GEMM variants (internal
// header; cholesky.cpp and the MPI Cholesky). FP16's normal range is [2^-14, 65504]: a matrix in
// small units (1e-20) puts its factor's entries (sqrt of A's) below it, where HP1 flushes its
// operands to zero (error 4e-2 instead of 9e-6); a matrix around 1e-6 does the same to HP2 / HP3's
// C entries. 4^-k A has the factor 2^-k L, both exact in FP32, so the factorization runs on A
// moved near 1 and L is moved back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// The band, as powers of two, of the largest diagonal entry d of A that is left unscaled.
/// Every |entry| of an SPD matrix and of its Schur complements, hence every C entry of HP2 / HP3,
/// is at most d, and every entry of L at most sqrt(d): d <= 2^12 leaves FP16 a factor 16 below
/// 65504; d >= 2^-6 keeps the accuracy of d = 1 (measured on exp(-r/3) covariances of condition
/// 1e3 and 3e4, n = 512, tile 128: the HP1 / HP2 / HP3 factor errors are flat from d = 2^-6 to
/// 2^14 and grow below, 1.5x at 2^-12 and failing at 2^-24). Inside the band nothing changes, bit
/// for bit.
inline constexpr int kUnscaledLow = -6;
inline constexpr int kUnscaledHigh = 12;

/// The k of the scaling A -> 4^-k A that brings d into [1, 4) when d lies outside the band; else
/// 0 (also for d not positive and finite: the factorization reports such a matrix). `max_entry`
/// bounds |a_ij| from above: a k whose scaling would overflow it is not used (an entry beyond d
/// shows A is not SPD anyway). |k| <= 63, so that 2^(2k) is a normal float.
int fp16_scaling_exponent(double max_diagonal, double max_entry);

/// Whether a variant table holds a variant that rounds data to FP16 (HP1, HP2, HP3): only those
/// are scaled.
bool rounds_to_fp16(const std::vector<GemmVariant>& variants);

/// The policy's name as the factorization's messages give it: with k != 0, followed by
/// " on A scaled by 2^-2k" (any value a message quotes is then of the scaled matrix).
std::string scaled_policy_text(const std::string& policy, int k);

/// The largest diagonal entry of one column-major host diagonal tile of h x h (NaN skipped; -inf
/// for h = 0): each rank's share of max_diagonal in the MPI Cholesky.
double tile_diagonal_max(const float* tile, std::int64_t h);

/// The largest diagonal entry of a lower float32 tile matrix in host or device memory (NaN
/// entries are skipped; -inf for an empty matrix). Reads the n diagonal entries only.
double max_diagonal(const TileMatrix& a);

/// The largest |entry| of the lower triangle of a host tile matrix (one pass over it).
double max_abs_lower(const TileMatrix& a);

/// Multiplies every entry on and below the diagonal by 2^e, in place (host or device memory);
/// the strict upper half of the diagonal tiles is left as it is. Exact for entries that stay in
/// FP32's normal range.
void scale_lower(TileMatrix& a, int e);

/// The same on one column-major host tile of h x w (leading dimension h); `diagonal`: only its
/// lower triangle.
void scale_lower_tile(float* tile, std::int64_t h, std::int64_t w, bool diagonal, int e);

}  // namespace halfscope::linalg::detail
