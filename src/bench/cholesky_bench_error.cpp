// The FP64 backward error of a tile Cholesky factor (include/halfscope/bench/cholesky_bench.hpp):
// shared by `bench cholesky` and `halfscope cholesky --check`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif

namespace halfscope::bench {
namespace {

using linalg::TileMatrix;

// Tile (ti, tj) of `m` widened to FP64 (column-major, ld = its height); with `lower_only` the
// strictly upper part is zero (the diagonal tiles of L keep A's upper half, which is not L).
std::vector<double> tile_f64(const TileMatrix& m, std::int64_t ti, std::int64_t tj,
                             bool lower_only) {
  const std::int64_t h = m.layout.tile_height(ti), w = m.layout.tile_width(tj);
  const float* src = m.storage.data_as<float>() + m.layout.tile_offset(ti, tj);
  std::vector<double> out(static_cast<std::size_t>(h * w));
  for (std::int64_t c = 0; c < w; ++c)
    for (std::int64_t r = 0; r < h; ++r)
      out[static_cast<std::size_t>(c * h + r)] =
          lower_only && r < c ? 0.0 : static_cast<double>(src[c * h + r]);
  return out;
}

// C (h x w) -= X (h x k) Y^T (w x k), column-major, FP64.
void subtract_product(std::vector<double>& c, const std::vector<double>& x,
                      const std::vector<double>& y, std::int64_t h, std::int64_t w,
                      std::int64_t k) {
#if HALFSCOPE_HAS_BLAS
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, static_cast<int>(h), static_cast<int>(w),
              static_cast<int>(k), -1.0, x.data(), static_cast<int>(h), y.data(),
              static_cast<int>(w), 1.0, c.data(), static_cast<int>(h));
#else
  for (std::int64_t q = 0; q < k; ++q)
    for (std::int64_t col = 0; col < w; ++col) {
      const double yv = y[static_cast<std::size_t>(q * w + col)];
      for (std::int64_t r = 0; r < h; ++r)
        c[static_cast<std::size_t>(col * h + r)] -= x[static_cast<std::size_t>(q * h + r)] * yv;
    }
#endif
}

double squared_norm(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0, [](double s, double x) { return s + x * x; });
}

// ||E_ij||_F^2 and ||A_ij||_F^2 of one stored tile.
std::pair<double, double> tile_error(const TileMatrix& l, const TileMatrix& a, std::int64_t i,
                                     std::int64_t j) {
  std::vector<double> e = tile_f64(a, i, j, false);
  const double a2 = squared_norm(e);
  const std::int64_t h = a.layout.tile_height(i), w = a.layout.tile_width(j);
  for (std::int64_t k = 0; k <= j; ++k) {
    const std::int64_t kw = l.layout.tile_width(k);
    subtract_product(e, tile_f64(l, i, k, i == k), tile_f64(l, j, k, j == k), h, w, kw);
  }
  return {squared_norm(e), a2};
}

// A host copy of a device tile matrix; an empty one for host input (used in place).
TileMatrix on_host(const TileMatrix& m) {
  TileMatrix out;
  if (m.storage.on_device()) {
    out.layout = m.layout;
    out.storage = m.storage.to(Memory::host);
  }
  return out;
}

}  // namespace

BackwardError cholesky_backward_error(const TileMatrix& l_in, const TileMatrix& a_in,
                                      std::int64_t max_tiles) {
  const linalg::TileLayout& la = l_in.layout;
  const linalg::TileLayout& lb = a_in.layout;
  if (la.fill() != linalg::TileFill::lower || lb.fill() != linalg::TileFill::lower ||
      la.rows() != lb.rows() || la.tile_size() != lb.tile_size() || l_in.dtype() != DType::f32 ||
      a_in.dtype() != DType::f32)
    throw InvalidInput(
        "cholesky_backward_error: expected two lower float32 tile matrices of one "
        "layout, found n = " +
        std::to_string(la.rows()) + " / " + std::to_string(lb.rows()) + ", tiles " +
        std::to_string(la.tile_size()) + " / " + std::to_string(lb.tile_size()));
  // Device factors are read on the host: the check is FP64 BLAS, and it runs once per case.
  const TileMatrix l_host = on_host(l_in), a_host = on_host(a_in);
  const TileMatrix& l = l_in.storage.on_device() ? l_host : l_in;
  const TileMatrix& a = a_in.storage.on_device() ? a_host : a_in;
  const std::int64_t nt = la.tile_rows();
  std::vector<std::pair<std::int64_t, std::int64_t>> diagonal, off;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j; i < nt; ++i) (i == j ? diagonal : off).emplace_back(i, j);
  BackwardError r;
  r.tiles_total = static_cast<std::int64_t>(diagonal.size() + off.size());
  // ||A||_F exactly, from every stored tile (in parallel: at n = 100k that is 5e9 entries).
  double a_norm2 = 0;
  const std::int64_t stored = r.tiles_total;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : a_norm2)
  for (std::int64_t t = 0; t < stored; ++t) {
    const auto& [ti, tj] = t < static_cast<std::int64_t>(diagonal.size())
                               ? diagonal[static_cast<std::size_t>(t)]
                               : off[static_cast<std::size_t>(t) - diagonal.size()];
    const float* p = a.storage.data_as<float>() + lb.tile_offset(ti, tj);
    const std::int64_t count = lb.tile_height(ti) * lb.tile_width(tj);
    double sum = 0;
    for (std::int64_t x = 0; x < count; ++x) sum += static_cast<double>(p[x]) * p[x];
    a_norm2 += (ti == tj ? 1.0 : 2.0) * sum;
  }
  const bool sample = max_tiles > 0 && max_tiles < r.tiles_total;
  if (sample) {
    std::mt19937_64 rng(0xC401E5C7ULL + static_cast<std::uint64_t>(la.rows()));
    std::shuffle(diagonal.begin(), diagonal.end(), rng);
    std::shuffle(off.begin(), off.end(), rng);
    // At least one tile per stratum, so that neither is left out of the estimate.
    const std::int64_t budget = std::max<std::int64_t>(max_tiles, 2);
    const auto sd = std::min<std::int64_t>(std::max<std::int64_t>(1, budget / 4),
                                           static_cast<std::int64_t>(diagonal.size()));
    const auto so = std::min<std::int64_t>(budget - sd, static_cast<std::int64_t>(off.size()));
    diagonal.resize(static_cast<std::size_t>(sd));
    off.resize(static_cast<std::size_t>(so));
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> tiles = diagonal;
  tiles.insert(tiles.end(), off.begin(), off.end());
  std::vector<std::pair<double, double>> errors(tiles.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t t = 0; t < tiles.size(); ++t)
    errors[t] = tile_error(l, a, tiles[t].first, tiles[t].second);
  double diag_sum = 0, off_sum = 0;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    (t < diagonal.size() ? diag_sum : off_sum) += errors[t].first;
    if (errors[t].second > 0)
      r.max_tile_relative =
          std::max(r.max_tile_relative, std::sqrt(errors[t].first / errors[t].second));
  }
  r.tiles_checked = static_cast<std::int64_t>(tiles.size());
  // Stratified estimate: each stratum's mean squared tile error times its population (the
  // off-diagonal tiles stand for their mirror too); exact when nothing was left out.
  const double nd = static_cast<double>(nt), no = nd * (nd - 1) / 2;
  const double e2 =
      (diagonal.empty() ? 0.0 : diag_sum * nd / static_cast<double>(diagonal.size())) +
      (off.empty() ? 0.0 : 2.0 * off_sum * no / static_cast<double>(off.size()));
  r.relative = a_norm2 > 0 ? std::sqrt(e2 / a_norm2) : 0.0;
  return r;
}

}  // namespace halfscope::bench
