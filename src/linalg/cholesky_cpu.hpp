// CPU task-graph factorization behind cholesky_tiles (internal header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// What failed in a GEMM update (for --recover's promotion): an FP16 operand tile of L, a C
/// entry rounded to FP16 (HP2 / HP3), or anything else (a result, a pivot).
enum class FailedPart : std::uint8_t { other, operand, c_entry };

/// The tile whose task failed: (k, k) for a non-positive pivot, (i, j) for an overflow in a GEMM
/// updating (i, j); for an operand overflow also the operand tile L(oi, ok).
struct FailedTile {
  std::int64_t i = -1;
  std::int64_t j = -1;
  FailedPart part = FailedPart::other;
  std::int64_t oi = -1;
  std::int64_t ok = -1;
};

/// Factors the lower float32 host tile matrix in place, the GEMMs updating tile (i, j) in
/// variants[i * NT + j]. Throws NotPositiveDefinite (naming the tile, the global pivot and
/// `policy_name`) or the GEMM's NumericalError, after storing the failing tile in `*failed`;
/// after a throw `a` holds partial results.
void cholesky_cpu(TileMatrix& a, const std::vector<GemmVariant>& variants,
                  const std::string& policy_name, FailedTile* failed);

}  // namespace halfscope::linalg::detail
