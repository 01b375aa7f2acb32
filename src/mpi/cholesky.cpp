// The MPI tile Cholesky (halfscope/mpi/cholesky.hpp): validation, the tile norms and variant
// table every rank agrees on, the agreement on the earliest failure, and the recover retries.
// The steps themselves are in cholesky_steps.cpp.
#include "halfscope/mpi/cholesky.hpp"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cpu.hpp"
#include "linalg/scaling.hpp"
#include "linalg/tile_norms.hpp"
#include "mpi/cholesky_steps.hpp"

namespace halfscope::mpi {
namespace {

using linalg::GemmVariant;
using linalg::detail::FailedPart;
using linalg::detail::FailedTile;

std::int64_t tile_elements(const linalg::TileLayout& layout, std::int64_t i, std::int64_t j) {
  return layout.tile_height(i) * layout.tile_width(j);
}

// The norms of every stored tile, on every rank: each tile's owner computes it with the FP64 sum
// of linalg's tile_norms, the other ranks contribute zeros, so the sum over ranks is exact and
// the table (hence the matrix norm and the variant table) equals the one-process one bit for bit.
std::vector<double> global_norms(const DistTileMatrix& a, int threads) {
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nt = layout.tile_rows(), ntc = layout.tile_cols();
  std::vector<double> norms(static_cast<std::size_t>(nt * ntc), 0.0);
  // Each tile's norm is one thread's sum, whatever the thread count: the same bits. Spread over
  // the rank's share of the cores (a GPU rank's 1.2 GB of tiles took 0.2 s on one thread).
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t x = 0; x < nt * ntc; ++x) {
    const std::int64_t i = x / ntc, j = x % ntc;
    if (a.owns(i, j))
      norms[static_cast<std::size_t>(x)] =
          linalg::detail::frobenius_norm(a.tile(i, j), tile_elements(layout, i, j));
  }
  a.comm().sum(std::span<double>(norms));
  return norms;
}

// InvalidInput on every rank when a tile is not finite, naming its first non-finite entry (the
// owner finds it; the others know the tile from the norms).
void require_finite(const DistTileMatrix& a, const std::vector<double>& norms) {
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nt = layout.tile_rows();
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i) {
      if (std::isfinite(norms[static_cast<std::size_t>(i * nt + j)])) continue;
      agree(a.comm(), [&] {
        if (!a.owns(i, j)) return;
        const float* t = a.tile(i, j);
        const std::int64_t h = layout.tile_height(i);
        for (std::int64_t e = 0; e < tile_elements(layout, i, j); ++e) {
          if (std::isfinite(t[e])) continue;
          throw InvalidInput("mpi::cholesky: the matrix must hold finite values; tile (" +
                             std::to_string(i) + ", " + std::to_string(j) + ") has " +
                             std::to_string(t[e]) + " at row " +
                             std::to_string(i * layout.tile_size() + e % h) + ", column " +
                             std::to_string(j * layout.tile_size() + e / h) + " (0-based)");
        }
        throw InvalidInput("mpi::cholesky: the matrix must hold finite values; tile (" +
                           std::to_string(i) + ", " + std::to_string(j) +
                           ") has a non-finite Frobenius norm");
      });
    }
}

// One factorization. On a failure every rank throws the earliest one (by step, then tile) and
// stores its tile in *failed; a finished factor with a non-finite diagonal tile throws
// cholesky_tiles' NumericalError.
void attempt(DistTileMatrix& a, const detail::GridComms& comms,
             const std::vector<GemmVariant>& variants, const std::string& policy, int device,
             CholeskyTraffic& traffic, std::int64_t* scratch, FailedTile* failed) {
  const Comm& world = a.comm();
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nt = layout.tile_rows();
  const detail::RankFailure mine =
      detail::factor_steps(a, comms, variants, policy, device, traffic, scratch);
  // Any non-finite entry of L(i, k) reaches diagonal tile (i, i) through its SYRK.
  std::int64_t bad = detail::kNoFailure;
  for (std::int64_t k = 0; k < nt && mine.key == detail::kNoFailure; ++k)
    if (a.owns(k, k) &&
        !std::isfinite(linalg::detail::frobenius_norm(a.tile(k, k), tile_elements(layout, k, k)))) {
      bad = k;
      break;
    }
  // The one collective of the outcome: minima as maxima of the negated keys.
  std::array<std::int64_t, 2> firsts{-mine.key, -bad};
  world.max(std::span<std::int64_t>(firsts));
  const std::int64_t key = -firsts[0], first_bad = -firsts[1];
  if (key != detail::kNoFailure) {
    const std::int64_t i = (key / nt) % nt, j = key % nt;
    const int root = a.grid().owner(i, j);  // the only rank that can hold this key
    std::array<std::int64_t, 5> tile{mine.tile.i, mine.tile.j,
                                     static_cast<std::int64_t>(mine.tile.part), mine.tile.oi,
                                     mine.tile.ok};
    world.broadcast(std::span<std::int64_t>(tile), root);
    *failed = FailedTile{tile[0], tile[1], static_cast<FailedPart>(tile[2]), tile[3], tile[4]};
    agree(world, [&] {
      if (world.rank() != root) return;
      if (mine.key != key || !mine.error)
        throw Error("mpi::cholesky: the failure of tile (" + std::to_string(i) + ", " +
                    std::to_string(j) + ") was lost on its owner");
      std::rethrow_exception(mine.error);
    });
  }
  if (first_bad != detail::kNoFailure) {
    *failed = FailedTile{first_bad, first_bad};
    // Every rank knows it; agree only marks the error as agreed (printed once by the CLI).
    agree(world, [&] {
      throw NumericalError("Cholesky with policy " + policy + ": diagonal tile (" +
                           std::to_string(first_bad) + ", " + std::to_string(first_bad) +
                           ") of the factor holds a non-finite entry (an FP32 overflow)");
    });
  }
}

// The largest diagonal entry, on every rank: each diagonal tile's owner gives its maximum, the
// others zeros, and the sum over ranks is exact (as global_norms).
double global_max_diagonal(const DistTileMatrix& a) {
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nt = layout.tile_rows();
  std::vector<double> maxima(static_cast<std::size_t>(nt), 0.0);
  for (std::int64_t k = 0; k < nt; ++k) {
    if (a.owns(k, k))
      maxima[static_cast<std::size_t>(k)] =
          linalg::detail::tile_diagonal_max(a.tile(k, k), layout.tile_height(k));
  }
  a.comm().sum(std::span<double>(maxima));
  return maxima.empty() ? 0.0 : *std::max_element(maxima.begin(), maxima.end());
}

// Multiplies this rank's tiles' lower triangles by 2^e (cholesky_tiles' scaling, tile by tile).
void scale_local(DistTileMatrix& a, int e, int threads) {
  if (e == 0) return;
  const linalg::TileLayout& layout = a.layout();
  const std::int64_t nt = layout.tile_rows();
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t x = 0; x < nt * nt; ++x) {
    const std::int64_t i = x / nt, j = x % nt;
    if (i >= j && a.owns(i, j))
      linalg::detail::scale_lower_tile(a.tile(i, j), layout.tile_height(i), layout.tile_width(j),
                                       i == j, e);
  }
}

}  // namespace

namespace detail {

GridComms::GridComms(const Comm& world, const ProcessGrid& grid)
    : row(world.rank() / grid.cols),
      col(world.rank() % grid.cols),
      row_comm(world.split(row, col)),
      col_comm(world.split(col, row)) {
  MPI_Comm host = MPI_COMM_NULL;
  check_mpi(
      MPI_Comm_split_type(world.raw(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &host),
      "MPI_Comm_split_type");
  int on_host = 1;
  const int code = MPI_Comm_size(host, &on_host);
  MPI_Comm_free(&host);
  check_mpi(code, "MPI_Comm_size");
  threads = std::getenv("OMP_NUM_THREADS") != nullptr
                ? omp_get_max_threads()
                : std::max(1, omp_get_num_procs() / std::max(1, on_host));
}

}  // namespace detail

linalg::CholeskyReport cholesky(DistTileMatrix& a, const linalg::CholeskyOptions& options,
                                CholeskyTraffic* traffic) {
  const linalg::TileLayout& layout = a.layout();
  // Every rank decides the same, but through agree, so that the error counts as agreed.
  agree(a.comm(), [&] {
    if (layout.fill() != linalg::TileFill::lower)
      throw InvalidInput(
          "mpi::cholesky: the matrix must use a lower tile layout, found a full one");
    if (options.devices.size() > 1)
      throw InvalidInput(
          "mpi::cholesky: devices: expected at most one CUDA device per rank (a GPU rank), "
          "found " +
          std::to_string(options.devices.size()));
    if (options.device_memory != 0)
      throw InvalidInput(
          "mpi::cholesky: device_memory: expected 0 (a GPU rank holds its tiles in core), "
          "found " +
          std::to_string(options.device_memory));
    // A panel tile and its status word travel as one MPI message of int count.
    if (layout.tile_size() * layout.tile_size() + 1 > INT_MAX)
      throw InvalidInput(
          "mpi::cholesky: expected a tile size of at most 46340 (one MPI message "
          "per tile), found " +
          std::to_string(layout.tile_size()));
  });
  linalg::CholeskyReport report;
  report.policy = options.policy.name();
  const std::int64_t nt = layout.tile_rows();
  const detail::GridComms comms(a.comm(), a.grid());
  std::vector<double> norms = global_norms(a, comms.threads);
  require_finite(a, norms);
  // cholesky_tiles' scaling for FP16 variants (linalg/scaling.hpp): the same k and the same
  // scaled norms for the policy on every rank.
  const int k_fp16 =
      options.scale ? linalg::detail::fp16_scaling_exponent(
                          global_max_diagonal(a), *std::max_element(norms.begin(), norms.end()))
                    : 0;
  for (double& x : norms) x = std::ldexp(x, -2 * k_fp16);
  std::vector<GemmVariant> variants;
  agree(a.comm(),
        [&] { variants = linalg::detail::choose_variants(layout, norms, options.policy); });
  const int k = linalg::detail::rounds_to_fp16(variants) ? k_fp16 : 0;
  scale_local(a, -2 * k, comms.threads);
  report.scaling_exponent = k;
  const std::string policy_text = linalg::detail::scaled_policy_text(report.policy, k);
  // This rank's tiles as they came in, kept only when a retry may need them.
  std::vector<float> original;
  agree(a.comm(), [&] {
    if (options.recover) original.assign(a.local_data(), a.local_data() + a.local_elements());
  });
  const int device = options.devices.empty() ? -1 : options.devices.front();
  std::int64_t scratch = 0;
  CholeskyTraffic moved;
  FailedTile failed;
  for (;;) {
    try {
      attempt(a, comms, variants, policy_text, device, moved, &scratch, &failed);
      break;
    } catch (const NumericalError& e) {
      if (!options.recover) throw;
      // The rule of cholesky_tiles, on the same table on every rank: the same promotion.
      std::string change;
      if (failed.i < failed.j || !linalg::detail::promote_failure(variants, nt, failed, change))
        throw;
      report.recoveries.push_back("attempt " + std::to_string(report.attempts) + " failed (" +
                                  e.what() + "); " + change);
      ++report.attempts;
      std::copy(original.begin(), original.end(), a.local_data());
    }
  }
  scale_local(a, k, comms.threads);
  report.workspace_bytes = scratch + static_cast<std::int64_t>(original.size() * sizeof(float));
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  if (traffic) *traffic = moved;
  return report;
}

}  // namespace halfscope::mpi
