// The tile kernels of the MPI tile Cholesky (src/mpi/cholesky_steps.hpp): those of
// linalg::cholesky_tiles' CPU path, called the same way, with its error texts.
#include <string>

#include "halfscope/core/error.hpp"
#include "linalg/gemm_variants.hpp"
#include "mpi/cholesky_steps.hpp"

namespace halfscope::mpi::detail {

using linalg::GemmVariant;
using linalg::detail::FailedPart;
using linalg::detail::FailedTile;

void potrf_tile(const linalg::TileLayout& layout, std::int64_t k, float* tile,
                const std::string& policy) {
  const std::int64_t h = layout.tile_height(k), nb = layout.tile_size();
  const std::int64_t info = linalg::detail::potrf_lower(h, tile, h);
  if (info > 0)  // the text of linalg::cholesky_tiles
    throw NotPositiveDefinite("Cholesky with policy " + policy + ": tile (" + std::to_string(k) +
                              ", " + std::to_string(k) +
                              ") is not positive definite: leading minor of order " +
                              std::to_string(k * nb + info) + " (global pivot index " +
                              std::to_string(k * nb + info - 1) + ", 0-based)");
  // A rejected argument is a bug, not the matrix's: not a NumericalError, never retried.
  if (info < 0) throw Error("LAPACKE_spotrf rejected argument " + std::to_string(-info));
}

void update_tile(const linalg::TileLayout& layout, GemmVariant v, const TileUpdate& u) {
  const std::int64_t hi = layout.tile_height(u.i), hk = layout.tile_height(u.k);
  if (u.i == u.j) {
    linalg::detail::syrk_lower(hi, hk, u.lik, hi, u.c, hi);
    return;
  }
  const std::int64_t hj = layout.tile_height(u.j);
  linalg::detail::gemm_nt_update(v, hi, hj, hk, u.lik, hi, u.ljk, hj, u.c, hi,
                                 linalg::detail::TileLabel{u.i, u.j});
}

FailedTile classify_failure(const linalg::TileLayout& layout, GemmVariant v, const TileUpdate& u) {
  FailedTile f{u.i, u.j};
  if (u.i == u.j) return f;
  // Which input did not fit FP16? Only the FP16 variants can overflow an input: BF16 / TF32
  // keep FP32's exponent range.
  const std::int64_t hk = layout.tile_height(u.k);
  for (const auto& [o, operand] : {std::pair{u.i, u.lik}, std::pair{u.j, u.ljk}}) {
    if (!linalg::gemm_variant_uses_fp16(v) ||
        !linalg::detail::exceeds_half(operand, layout.tile_height(o), hk))
      continue;
    f.part = FailedPart::operand, f.oi = o, f.ok = u.k;
    return f;
  }
  if ((v == GemmVariant::HP2 || v == GemmVariant::HP3) &&
      linalg::detail::exceeds_half(u.c, layout.tile_height(u.i), layout.tile_height(u.j)))
    f.part = FailedPart::c_entry;
  return f;
}

}  // namespace halfscope::mpi::detail
