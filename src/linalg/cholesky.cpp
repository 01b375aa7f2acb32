// Tile Cholesky: validation, the policy's choice per tile, --recover and the dispatch to the CPU
// (cholesky_cpu.cpp) or GPU (cholesky_cuda.cu) factorization (include/halfscope/linalg/
// cholesky.hpp). The norms and the choice per tile are in tile_norms.cpp.
#include "halfscope/linalg/cholesky.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cpu.hpp"
#include "linalg/tile_norms.hpp"

#if HALFSCOPE_WITH_CUDA
#include "linalg/cholesky_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace {

// One precision up, or the same variant when there is nothing higher to try.
GemmVariant promote(GemmVariant v) {
  switch (v) {
    case GemmVariant::HP3:
      return GemmVariant::HP2;
    case GemmVariant::HP2:
      return GemmVariant::HP1;
    case GemmVariant::HP1:
    case GemmVariant::TF32:
    case GemmVariant::BF16:
      return GemmVariant::SP;
    case GemmVariant::SP:
    case GemmVariant::DP:
      return v;
  }
  return v;
}

// Promotes the tiles of the failing region and describes the change; false when none could be
// promoted. A failed pivot at (k, k) depends on every tile (i, j) with j < i <= k (its
// dependency cone); an overflow in the GEMM updating (i, j) on that tile's variant alone.
bool promote_region(std::vector<GemmVariant>& variants, std::int64_t nt, std::int64_t fi,
                    std::int64_t fj, std::string& change) {
  std::map<std::string, std::int64_t> moves;
  const bool pivot = fi == fj;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i) {
      const bool in_region = pivot ? i <= fi : (i == fi && j == fj);
      if (!in_region) continue;
      GemmVariant& v = variants[static_cast<std::size_t>(i * nt + j)];
      const GemmVariant up = promote(v);
      if (up == v) continue;
      ++moves[std::string(gemm_variant_name(v)) + "->" + std::string(gemm_variant_name(up))];
      v = up;
    }
  if (moves.empty()) return false;
  change = pivot ? "promoted the tiles (i, j), j < i <= " + std::to_string(fi) + ":"
                 : "promoted tile (" + std::to_string(fi) + ", " + std::to_string(fj) + "):";
  for (const auto& [move, count] : moves) change += " " + move + " x" + std::to_string(count);
  return true;
}

}  // namespace

CholeskyReport cholesky_tiles(TileMatrix& a, const CholeskyOptions& options) {
  if (a.layout.fill() != TileFill::lower)
    throw InvalidInput("cholesky_tiles: the matrix must use a lower tile layout, found a full one");
  if (a.dtype() != DType::f32)
    throw InvalidInput("cholesky_tiles: the matrix must be float32, found " +
                       std::string(dtype_name(a.dtype())));
#if !HALFSCOPE_WITH_CUDA
  if (a.storage.on_device())
    throw Unsupported("cholesky_tiles: device memory in a build without CUDA");
#endif

  CholeskyReport report;
  report.policy = options.policy.name();
  const std::int64_t nt = a.layout.tile_rows();
  std::vector<GemmVariant> variants =
      detail::choose_variants(a, detail::tile_norms(a), options.policy);
  // The input, kept (in the matrix's own memory) only when a retry may need it.
  const Array original = options.recover ? a.storage.clone() : Array{};
  const std::int64_t bytes = a.layout.element_count() * static_cast<std::int64_t>(sizeof(float));
  if (options.recover) report.workspace_bytes = bytes;
  [[maybe_unused]] const std::int64_t kept = report.workspace_bytes;  // used by the GPU path
  detail::FailedTile failed;
  for (;;) {
    try {
      if (a.storage.on_device()) {
#if HALFSCOPE_WITH_CUDA
        report.workspace_bytes = kept + detail::cholesky_cuda(a, variants, report.policy, &failed);
#endif
      } else {
        detail::cholesky_cpu(a, variants, report.policy, &failed);
      }
      break;
    } catch (const NumericalError& e) {
      if (!options.recover) throw;
      // POTRF failures come from (k, k), GEMM overflows from the updated tile (i > j); when the
      // region has nothing left to promote the failure is the matrix's, not the precision's.
      std::string change;
      if (failed.i < failed.j || !promote_region(variants, nt, failed.i, failed.j, change)) throw;
      report.recoveries.push_back("attempt " + std::to_string(report.attempts) + " failed (" +
                                  e.what() + "); " + change);
      ++report.attempts;
      copy_bytes(a.storage.data(), a.storage.memory(), original.data(), original.memory(), bytes);
    }
  }
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  return report;
}

}  // namespace halfscope::linalg
