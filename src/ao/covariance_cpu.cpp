// CPU covariance backend (covariance_plan.hpp): OpenMP over output blocks, every element in FP64,
// rounded once to the target dtype.
//
// Work. Cmm and Ctt are symmetric: only the lower triangle is computed (tiles on and below the
// diagonal, the lower half of diagonal tiles), then copied onto the upper one (the whole upper
// triangle of a dense target, the upper halves of the diagonal tiles of a lower layout). The
// parallel work units are chunks of at most 64 rows of one tile (64 x 64 blocks for a dense
// target), written straight into the target, so no unit needs a buffer of the tile's size.
//
// Offset tables. For two sensors a, b with the same grid, pitch and lenslet rotation and the same
// scale (1 - h / H) on every layer (two NGS, or two LGS at the same altitude), the footprints of
// subapertures p (of a) and q (of b) on layer l are s = pitch * scale apart by
//   du = scale * (R d (c_p - c_q, r_p - r_q) + pupil_shift_a - pupil_shift_b) + h (alpha_a -
//   alpha_b)
// (R the rotation, (c, r) the grid indices), a function of the grid offset (c_p - c_q, r_p - r_q)
// only; and with equal footprints yx = xy (slope_model.hpp). So the sum over layers of the xx, yy
// and xy terms is tabulated once per sensor pair over the (2 Nssp - 1)^2 offsets, and each element
// of the pair's block is a lookup: for the mid system (29 across) a table costs 3,249 x 12 x L
// structure-function calls instead of 4 x L per element of a 1,280 x 1,280 block. The table's du
// differs from the direct one (scale x_p + shift - (scale x_q + shift)) by rounding only; the two
// paths agree to ~1e-15 of the magnitude of the terms (tests/ao/test_covariance.cpp).
// Other pairs of different sensors with unrotated lenslet arrays (NGS x LGS, LGS at different
// altitudes) use the edge-point tables (covariance_cpu_points.cpp); the rest (a rotated array)
// the direct sum. All use the fast FP64 structure function (vonkarman_fast.hpp).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ao/covariance_cpu.hpp"
#include "ao/plan_element.hpp"
#include "ao/vonkarman_fast.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

constexpr std::int64_t kDenseBlock = 64;  // block edge for dense targets (two 32 KiB buffers)

/// Sum over layers of the xx, yy and xy terms (cn2 and the unit factor included) per grid offset.
struct OffsetTable {
  std::int64_t span = 0;  // 2 Nssp - 1
  std::int64_t half = 0;  // Nssp - 1
  std::vector<double> xx, yy, xy;
  [[nodiscard]] std::size_t index(std::int64_t dc, std::int64_t dr) const noexcept {
    return static_cast<std::size_t>((dr + half) * span + (dc + half));
  }
};

OffsetTable make_offset_table(const CovariancePlan& plan, std::int64_t a, std::int64_t b,
                              const LayerStructure& d) {
  const PlanSensor& sa = plan.sensors[static_cast<std::size_t>(a)];
  const PlanSensor& sb = plan.sensors[static_cast<std::size_t>(b)];
  const auto layers = static_cast<std::int64_t>(plan.layers.size());
  OffsetTable t;
  t.half = sa.grid - 1;
  t.span = 2 * t.half + 1;
  const auto size = static_cast<std::size_t>(t.span * t.span);
  t.xx.assign(size, 0.0);
  t.yy.assign(size, 0.0);
  t.xy.assign(size, 0.0);
  const double c = std::cos(sa.rotation_rad), s = std::sin(sa.rotation_rad);
  const double factor = kSlopeUnit2 / (sa.pitch_m * sb.pitch_m);
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t k = 0; k < t.span * t.span; ++k) {
    const double dc = static_cast<double>(k % t.span - t.half);
    const double dr = static_cast<double>(k / t.span - t.half);
    // Pupil-plane offset of the two centres, as valid_subapertures builds them.
    const double px = sa.pitch_m * (dc * c - dr * s) + (sa.pupil_shift_x_m - sb.pupil_shift_x_m);
    const double py = sa.pitch_m * (dc * s + dr * c) + (sa.pupil_shift_y_m - sb.pupil_shift_y_m);
    double xx = 0, yy = 0, xy = 0;
    for (std::int64_t l = 0; l < layers; ++l) {
      const PlanSensorLayer& ga = plan.sensor_layer[static_cast<std::size_t>(a * layers + l)];
      const PlanSensorLayer& gb = plan.sensor_layer[static_cast<std::size_t>(b * layers + l)];
      if (!(ga.size > 0.0)) continue;  // equal scales: not seen by either
      const double du = ga.scale * px + (ga.shift_x - gb.shift_x);
      const double dv = ga.scale * py + (ga.shift_y - gb.shift_y);
      const double cn2 = plan.layers[static_cast<std::size_t>(l)].cn2;
      xx += cn2 * slope_xx(du, dv, ga.size, gb.size, l, d).value;
      yy += cn2 * slope_yy(du, dv, ga.size, gb.size, l, d).value;
      xy += cn2 * slope_xy(du, dv, ga.size, gb.size, l, d).value;
    }
    const auto i = static_cast<std::size_t>(k);
    t.xx[i] = xx * factor;
    t.yy[i] = yy * factor;
    t.xy[i] = xy * factor;
  }
  return t;
}

/// Per-slope references of one matrix side, computed once.
std::vector<SlopeRef> side_refs(const CovariancePlan& plan, bool truth_side, std::int64_t count) {
  std::vector<SlopeRef> refs(static_cast<std::size_t>(count));
  for (std::int64_t k = 0; k < count; ++k)
    refs[static_cast<std::size_t>(k)] = locate_slope(plan, truth_side, k);
  return refs;
}

/// Tile (ti, tj) of the t-th stored tile, tiles counted column by column (top to bottom; from
/// the diagonal down in a lower layout of T x T tiles, where column tj starts at
/// tj T - tj (tj - 1) / 2).
std::pair<std::int64_t, std::int64_t> nth_tile(std::int64_t t, std::int64_t tile_rows, bool lower) {
  if (!lower) return {t % tile_rows, t / tile_rows};
  const auto start = [&](std::int64_t j) { return j * tile_rows - j * (j - 1) / 2; };
  const double b = 2.0 * static_cast<double>(tile_rows) + 1.0;
  auto tj = static_cast<std::int64_t>((b - std::sqrt(b * b - 8.0 * static_cast<double>(t))) / 2.0);
  tj = std::clamp<std::int64_t>(tj, 0, tile_rows - 1);
  while (tj > 0 && start(tj) > t) --tj;  // the square root may be off by one either way
  while (tj + 1 < tile_rows && start(tj + 1) <= t) ++tj;
  return {tj + (t - start(tj)), tj};
}

/// Copies the lower triangle onto the upper one: the whole dense matrix, or the diagonal tiles
/// of a lower tiled layout (the only tiles holding both triangles).
template <class T>
void mirror_lower(const CovarianceTarget& target) {
  T* out = static_cast<T*>(target.data);
  if (target.tiles != nullptr) {
    const linalg::TileLayout& layout = *target.tiles;
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t t = 0; t < layout.tile_rows(); ++t) {
      T* tile = target_tile<T>(target, t, t);
      if (tile == nullptr) continue;  // not generated here (a selection)
      const std::int64_t h = layout.tile_height(t);
      for (std::int64_t c = 1; c < h; ++c)
        for (std::int64_t r = 0; r < c; ++r) tile[c * h + r] = tile[r * h + c];
    }
    return;
  }
  const std::int64_t n = target.rows, blocks = (n + kDenseBlock - 1) / kDenseBlock;
  // Block (bi, bj), bi < bj, of the upper triangle from block (bj, bi): 64 x 64 transposes keep
  // both the reads and the writes in cache.
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t bi = 0; bi < blocks; ++bi)
    for (std::int64_t bj = bi; bj < blocks; ++bj)
      for (std::int64_t i = bi * kDenseBlock; i < std::min(n, (bi + 1) * kDenseBlock); ++i)
        for (std::int64_t j = std::max(i + 1, bj * kDenseBlock);
             j < std::min(n, (bj + 1) * kDenseBlock); ++j)
          out[i * n + j] = out[j * n + i];
}

/// Writes every element of the target (the lower triangle only for Cmm / Ctt) from value(i, j),
/// except those skip(i, j) names, then mirrors the lower triangle; work units are row chunks of at
/// most kDenseBlock rows of one tile.
template <class T, class Value, class Skip>
bool fill_target(const CovarianceTarget& target, bool symmetric, const Value& value,
                 const Skip& skip) {
  T* out = static_cast<T*>(target.data);
  const linalg::TileLayout* layout = target.tiles;
  const std::int64_t nb = layout != nullptr ? layout->tile_size() : kDenseBlock;
  const std::int64_t tile_rows = (target.rows + nb - 1) / nb;
  const std::int64_t tile_cols = (target.cols + nb - 1) / nb;
  const std::int64_t tiles = symmetric ? tile_rows * (tile_rows + 1) / 2 : tile_rows * tile_cols;
  const std::int64_t chunks = (nb + kDenseBlock - 1) / kDenseBlock;  // row chunks per tile
  const std::int64_t row_end = target_row_end(target);
  bool finite = true;
#pragma omp parallel for schedule(dynamic) reduction(&& : finite)
  for (std::int64_t unit = 0; unit < tiles * chunks; ++unit) {
    const auto [ti, tj] = nth_tile(unit / chunks, tile_rows, symmetric);
    const std::int64_t h = std::min(nb, target.rows - ti * nb);
    const std::int64_t w = std::min(nb, target.cols - tj * nb);
    const std::int64_t r0 = (unit % chunks) * kDenseBlock, r1 = std::min(h, r0 + kDenseBlock);
    if (layout == nullptr && (ti * nb + r1 <= target.row_begin || ti * nb + r0 >= row_end))
      continue;  // a dense block outside the row range
    T* tile = layout != nullptr ? target_tile<T>(target, ti, tj) : nullptr;
    if (layout != nullptr && tile == nullptr) continue;  // a tile the selection leaves out
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t i = ti * nb + r;
      if (layout == nullptr && (i < target.row_begin || i >= row_end)) continue;
      const std::int64_t c_end = symmetric && ti == tj ? r + 1 : w;
      for (std::int64_t c = 0; c < c_end; ++c) {
        if (skip(i, tj * nb + c)) continue;  // written by the edge-point tables
        const double v = value(i, tj * nb + c);
        finite = finite && std::isfinite(v);
        if (tile != nullptr)
          tile[c * h + r] = static_cast<T>(v);  // column-major tile, leading dimension h
        else
          out[(i - target.row_begin) * target.cols + tj * nb + c] = static_cast<T>(v);
      }
    }
  }
  if (symmetric) mirror_lower<T>(target);
  return finite;
}

}  // namespace

bool offset_table_applies(const CovariancePlan& plan, std::int64_t a, std::int64_t b) {
  const PlanSensor& sa = plan.sensors[static_cast<std::size_t>(a)];
  const PlanSensor& sb = plan.sensors[static_cast<std::size_t>(b)];
  if (sa.grid != sb.grid || sa.pitch_m != sb.pitch_m || sa.rotation_rad != sb.rotation_rad)
    return false;
  const auto layers = static_cast<std::int64_t>(plan.layers.size());
  for (std::int64_t l = 0; l < layers; ++l)
    if (plan.sensor_layer[static_cast<std::size_t>(a * layers + l)].scale !=
        plan.sensor_layer[static_cast<std::size_t>(b * layers + l)].scale)
      return false;
  return true;
}

void covariance_cpu_with(const CovariancePlan& plan, const CovarianceTarget& target,
                         bool tables_on) {
  check_covariance_target(plan, target, "covariance_cpu");
  const bool symmetric = target.kind != CovarianceKind::ctm;
  const std::vector<SlopeRef> rows =
      side_refs(plan, target.kind != CovarianceKind::cmm, target.rows);
  const std::vector<SlopeRef> cols =
      side_refs(plan, target.kind == CovarianceKind::ctt, target.cols);
  std::vector<double> L0;
  for (const PlanLayer& l : plan.layers) L0.push_back(l.outer_scale_m);
  const LayerStructure d(L0);

  // Tables for the sensor pairs this matrix needs (row sensor a, column sensor b; a >= b when
  // symmetric, since then only the lower triangle is computed).
  const auto sensors = static_cast<std::int64_t>(plan.sensors.size());
  std::vector<std::unique_ptr<OffsetTable>> tables(static_cast<std::size_t>(sensors * sensors));
  std::vector<char> by_points(tables.size(), 0);
  bool finite = true;
  if (tables_on) {
    for (std::int64_t a = 0; a < sensors; ++a) {
      const bool row_side =
          target.kind == CovarianceKind::cmm ? a < plan.truth() : a == plan.truth();
      for (std::int64_t b = 0; b < sensors && row_side; ++b) {
        const bool col_side =
            target.kind == CovarianceKind::ctt ? b == plan.truth() : b < plan.truth();
        if (!col_side || (symmetric && b > a)) continue;
        const auto pair = static_cast<std::size_t>(a * sensors + b);
        if (offset_table_applies(plan, a, b)) {
          tables[pair] = std::make_unique<OffsetTable>(make_offset_table(plan, a, b, d));
        } else if (point_table_applies(plan, a, b)) {
          // a != b, so the block lies strictly below the diagonal of a symmetric matrix.
          by_points[pair] = 1;
          finite = covariance_block_points(plan, target, a, b, d) && finite;
        }
      }
    }
  }

  const auto value = [&](std::int64_t i, std::int64_t j) {
    const SlopeRef& si = rows[static_cast<std::size_t>(i)];
    const SlopeRef& sj = cols[static_cast<std::size_t>(j)];
    const OffsetTable* table =
        tables[static_cast<std::size_t>(si.sensor * sensors + sj.sensor)].get();
    double v = 0;
    if (table != nullptr) {
      const auto p = static_cast<std::size_t>(
          plan.sensors[static_cast<std::size_t>(si.sensor)].subaperture_offset + si.subaperture);
      const auto q = static_cast<std::size_t>(
          plan.sensors[static_cast<std::size_t>(sj.sensor)].subaperture_offset + sj.subaperture);
      const std::size_t at =
          table->index(plan.column[p] - plan.column[q], plan.row[p] - plan.row[q]);
      v = si.axis != sj.axis ? table->xy[at] : (si.axis == 0 ? table->xx[at] : table->yy[at]);
    } else {
      v = plan_turbulence(plan, si, sj, d).value;
    }
    return v + plan_noise(plan, si, sj);
  };
  const auto skip = [&](std::int64_t i, std::int64_t j) {
    return by_points[static_cast<std::size_t>(rows[static_cast<std::size_t>(i)].sensor * sensors +
                                              cols[static_cast<std::size_t>(j)].sensor)] != 0;
  };
  finite = (target.dtype == DType::f64 ? fill_target<double>(target, symmetric, value, skip)
                                       : fill_target<float>(target, symmetric, value, skip)) &&
           finite;
  if (!finite)
    throw NumericalError("covariance " + std::string(covariance_kind_name(target.kind)) +
                         ": an element is not finite (extreme r0 / L0 / geometry)");
}

void covariance_cpu(const CovariancePlan& plan, const CovarianceTarget& target) {
  covariance_cpu_with(plan, target, /*tables_on=*/true);
}

}  // namespace halfscope::ao::detail
