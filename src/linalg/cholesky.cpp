// Tile Cholesky: validation, the policy's choice per tile and --recover (include/halfscope/linalg/
// cholesky.hpp). The factorization itself is in cholesky_cpu.cpp.
#include "halfscope/linalg/cholesky.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cpu.hpp"

namespace halfscope::linalg {
namespace {

// Frobenius norm of stored tile (i, j).
double tile_norm(const TileMatrix& a, std::int64_t i, std::int64_t j) {
  const float* t = a.storage.data_as<float>() + a.layout.tile_offset(i, j);
  const std::int64_t count = a.layout.tile_height(i) * a.layout.tile_width(j);
  double sum = 0.0;
  for (std::int64_t x = 0; x < count; ++x) sum += static_cast<double>(t[x]) * t[x];
  return std::sqrt(sum);
}

// The variant of each off-diagonal tile (i > j) from the input's norms; diagonal and upper
// entries are unused (SP).
std::vector<GemmVariant> choose_variants(const TileMatrix& a, const Policy& policy) {
  const std::int64_t nt = a.layout.tile_rows();
  std::vector<double> norms(static_cast<std::size_t>(nt * nt), 0.0);
  double total = 0.0;  // ||A||_F^2: off-diagonal tiles stand for themselves and their mirror
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i) {
      const double n = tile_norm(a, i, j);
      norms[static_cast<std::size_t>(i * nt + j)] = n;
      total += (i == j ? 1.0 : 2.0) * n * n;
    }
  total = std::sqrt(total);
  std::vector<GemmVariant> variants(static_cast<std::size_t>(nt * nt), GemmVariant::SP);
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      variants[static_cast<std::size_t>(i * nt + j)] =
          policy(TileQuery{i, j, norms[static_cast<std::size_t>(i * nt + j)], total, nt});
  return variants;
}

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
  if (a.storage.on_device())
    throw InvalidInput("cholesky_tiles: the matrix must be in host memory, found device memory");

  CholeskyReport report;
  report.policy = options.policy.name();
  const std::int64_t nt = a.layout.tile_rows();
  std::vector<GemmVariant> variants = choose_variants(a, options.policy);
  // The input, kept only when a retry may need it.
  const Array original = options.recover ? a.storage.clone() : Array{};
  detail::FailedTile failed;
  for (;;) {
    try {
      detail::cholesky_cpu(a, variants, report.policy, &failed);
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
      std::copy_n(original.data_as<float>(), a.layout.element_count(), a.storage.data_as<float>());
    }
  }
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  return report;
}

}  // namespace halfscope::linalg
