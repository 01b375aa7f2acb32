// Edge-point tables of the CPU covariance backend (covariance_cpu.hpp): the block of two different
// sensors whose lenslet arrays are unrotated, when the offset tables do not apply (an NGS and an
// LGS, or LGS at different altitudes).
//
// Every structure-function value of an element is D between two slope end points: a slope of
// subaperture p along x runs from its left edge point (x_p - d/2, y_p) to its right one
// (x_p + d/2, y_p), along y from (x_p, y_p - d/2) to (x_p, y_p + d/2), each seen on layer l at
// scale * point + h alpha. With a, b the ends of slope i and c, d those of slope j, the element
// is [D(a - d) + D(b - c) - D(a - c) - D(b - d)] / 2 (slope_model.hpp written in end points). On an
// unrotated grid neighbouring subapertures share their edge points, so a sensor of K valid
// subapertures has only ~K + Nssp distinct x-edge points (and as many y-edge points), against 2K
// slope ends. Tabulating D over pairs of points (x-edge x x-edge for xx, y x y for yy, x x y for
// xy, y x x for yx) costs 4 (K + Nssp)^2 evaluations per layer instead of 16 K^2 for the direct
// sum: ~3.6x fewer for the mid system (29 across, K = 640). The rows are processed in chunks of
// subapertures so that the tables stay small (4 x chunk points x the other sensor's points).
// The points are the plan's centres +- d/2, so the values agree with the direct sum to rounding
// (tests/ao/test_covariance.cpp compares the two paths).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ao/covariance_cpu.hpp"
#include "ao/slope_model.hpp"

namespace halfscope::ao::detail {
namespace {

constexpr std::int64_t kChunk = 32;  // subapertures of the row sensor per work unit

/// The distinct x-edge and y-edge points of subapertures [p0, p1) of one sensor.
struct EdgePoints {
  std::vector<double> xe_x, xe_y, ye_x, ye_y;          // x-edge / y-edge point positions (pupil)
  std::vector<std::int64_t> left, right, bottom, top;  // per subaperture: its points' indices
};

EdgePoints edge_points(const CovariancePlan& plan, std::int64_t sensor, std::int64_t p0,
                       std::int64_t p1) {
  const PlanSensor& s = plan.sensors[static_cast<std::size_t>(sensor)];
  const std::int64_t n = s.grid;
  const double half = 0.5 * s.pitch_m;
  EdgePoints e;
  // Key of an x-edge point: row r, edge column c (0..n); of a y-edge point: edge row r, column c.
  std::vector<std::int64_t> xe_id(static_cast<std::size_t>(n * (n + 1)), -1);
  std::vector<std::int64_t> ye_id(static_cast<std::size_t>((n + 1) * n), -1);
  const auto point = [](std::vector<std::int64_t>& ids, std::int64_t key, std::vector<double>& px,
                        std::vector<double>& py, double x, double y) {
    auto& id = ids[static_cast<std::size_t>(key)];
    if (id < 0) {
      id = static_cast<std::int64_t>(px.size());
      px.push_back(x);
      py.push_back(y);
    }
    return id;
  };
  for (std::int64_t p = p0; p < p1; ++p) {
    const auto k = static_cast<std::size_t>(s.subaperture_offset + p);
    const std::int64_t c = plan.column[k], r = plan.row[k];
    const double x = plan.x[k], y = plan.y[k];
    e.left.push_back(point(xe_id, r * (n + 1) + c, e.xe_x, e.xe_y, x - half, y));
    e.right.push_back(point(xe_id, r * (n + 1) + c + 1, e.xe_x, e.xe_y, x + half, y));
    e.bottom.push_back(point(ye_id, r * n + c, e.ye_x, e.ye_y, x, y - half));
    e.top.push_back(point(ye_id, (r + 1) * n + c, e.ye_x, e.ye_y, x, y + half));
  }
  return e;
}

/// table[i * nb + j] = D(|P_a(i) - P_b(j)|) on layer l, P = scale * point + shift.
void point_table(std::vector<double>& table, const std::vector<double>& ax,
                 const std::vector<double>& ay, const PlanSensorLayer& ga,
                 const std::vector<double>& bx, const std::vector<double>& by,
                 const PlanSensorLayer& gb, std::int64_t layer, const LayerStructure& d) {
  const std::size_t na = ax.size(), nb = bx.size();
  table.resize(na * nb);
  for (std::size_t i = 0; i < na; ++i) {
    const double u = ga.scale * ax[i] + ga.shift_x, v = ga.scale * ay[i] + ga.shift_y;
    for (std::size_t j = 0; j < nb; ++j)
      table[i * nb + j] = structure_at(u - (gb.scale * bx[j] + gb.shift_x),
                                       v - (gb.scale * by[j] + gb.shift_y), layer, d);
  }
}

}  // namespace

bool point_table_applies(const CovariancePlan& plan, std::int64_t a, std::int64_t b) {
  return a != b && plan.sensors[static_cast<std::size_t>(a)].rotation_rad == 0.0 &&
         plan.sensors[static_cast<std::size_t>(b)].rotation_rad == 0.0;
}

bool covariance_block_points(const CovariancePlan& plan, const CovarianceTarget& target,
                             std::int64_t a, std::int64_t b, const LayerStructure& d) {
  const PlanSensor& sa = plan.sensors[static_cast<std::size_t>(a)];
  const PlanSensor& sb = plan.sensors[static_cast<std::size_t>(b)];
  const auto layers = static_cast<std::int64_t>(plan.layers.size());
  const std::int64_t na = sa.subapertures, nb = sb.subapertures;
  const double factor = kSlopeUnit2 / (sa.pitch_m * sb.pitch_m);
  // Work units: chunks of a's subapertures by chunks of b's. The b side is cut only for a target
  // that keeps some tiles (an MPI rank's, 2D block-cyclic), so that a unit without an owned tile
  // is skipped; a whole matrix keeps b whole (fewer repeated edge points). An element's value does
  // not depend on the cut: the same points, the same table values, the same sums over layers.
  const std::int64_t chunks = (na + kChunk - 1) / kChunk;
  const std::int64_t b_chunk = target.tile_data != nullptr ? kChunk : nb;
  const std::int64_t b_chunks = (nb + b_chunk - 1) / b_chunk;
  bool finite = true;
#pragma omp parallel for schedule(dynamic) reduction(&& : finite)
  for (std::int64_t unit = 0; unit < chunks * b_chunks; ++unit) {
    const std::int64_t p0 = (unit / b_chunks) * kChunk, p1 = std::min(na, p0 + kChunk);
    const std::int64_t q0 = (unit % b_chunks) * b_chunk, q1 = std::min(nb, q0 + b_chunk);
    const std::int64_t m = p1 - p0, mb = q1 - q0;
    // Rows of a's x and y slopes by columns of b's: the four quadrants xx, xy, yx, yy of the unit,
    // each computed from its own table only when the target keeps one of its elements (another
    // rank's tiles or rows are skipped).
    const std::int64_t ix0 = sa.slope_offset + p0, iy0 = ix0 + na;
    const std::int64_t jx0 = sb.slope_offset + q0, jy0 = jx0 + nb;
    const bool want_xx = target_wants(target, ix0, ix0 + m, jx0, jx0 + mb);
    const bool want_xy = target_wants(target, ix0, ix0 + m, jy0, jy0 + mb);
    const bool want_yx = target_wants(target, iy0, iy0 + m, jx0, jx0 + mb);
    const bool want_yy = target_wants(target, iy0, iy0 + m, jy0, jy0 + mb);
    if (!want_xx && !want_xy && !want_yx && !want_yy) continue;
    const EdgePoints pa = edge_points(plan, a, p0, p1);
    const EdgePoints pb = edge_points(plan, b, q0, q1);
    // Accumulators: rows (x of p, y of p), columns (x of q, y of q), layer sums.
    std::vector<double> xx(static_cast<std::size_t>(m * mb)), yy(xx.size()), xy(xx.size()),
        yx(xx.size());
    std::vector<double> t_xx, t_yy, t_xy, t_yx;
    for (std::int64_t l = 0; l < layers; ++l) {
      const PlanSensorLayer& ga = plan.sensor_layer[static_cast<std::size_t>(a * layers + l)];
      const PlanSensorLayer& gb = plan.sensor_layer[static_cast<std::size_t>(b * layers + l)];
      if (!(ga.size > 0.0) || !(gb.size > 0.0)) continue;  // a layer above an LGS: no term
      if (want_xx) point_table(t_xx, pa.xe_x, pa.xe_y, ga, pb.xe_x, pb.xe_y, gb, l, d);
      if (want_yy) point_table(t_yy, pa.ye_x, pa.ye_y, ga, pb.ye_x, pb.ye_y, gb, l, d);
      if (want_xy) point_table(t_xy, pa.xe_x, pa.xe_y, ga, pb.ye_x, pb.ye_y, gb, l, d);
      if (want_yx) point_table(t_yx, pa.ye_x, pa.ye_y, ga, pb.xe_x, pb.xe_y, gb, l, d);
      const auto kx = static_cast<std::int64_t>(pb.xe_x.size());
      const auto ky = static_cast<std::int64_t>(pb.ye_x.size());
      const double w = 0.5 * plan.layers[static_cast<std::size_t>(l)].cn2;
      for (std::int64_t p = 0; p < m; ++p) {
        const auto up = static_cast<std::size_t>(p);
        const std::int64_t R = pa.right[up] * kx, L = pa.left[up] * kx;  // rows into x-edge tables
        const std::int64_t T = pa.top[up] * ky, B = pa.bottom[up] * ky;
        const std::int64_t Rxy = pa.right[up] * ky, Lxy = pa.left[up] * ky;
        const std::int64_t Tyx = pa.top[up] * kx, Byx = pa.bottom[up] * kx;
        for (std::int64_t q = 0; q < mb; ++q) {
          const auto uq = static_cast<std::size_t>(q);
          const std::int64_t lq = pb.left[uq], rq = pb.right[uq], bq = pb.bottom[uq],
                             tq = pb.top[uq];
          const auto at = static_cast<std::size_t>(p * mb + q);
          const auto T_ = [](const std::vector<double>& t, std::int64_t k) {
            return t[static_cast<std::size_t>(k)];
          };
          // [D(a - d) + D(b - c) - D(a - c) - D(b - d)] / 2 with (a, b) = ends of the row slope
          // (right / top first) and (c, d) = ends of the column slope.
          if (want_xx)
            xx[at] +=
                w * ((T_(t_xx, R + lq) + T_(t_xx, L + rq)) - (T_(t_xx, R + rq) + T_(t_xx, L + lq)));
          if (want_yy)
            yy[at] +=
                w * ((T_(t_yy, T + bq) + T_(t_yy, B + tq)) - (T_(t_yy, T + tq) + T_(t_yy, B + bq)));
          if (want_xy)
            xy[at] += w * ((T_(t_xy, Rxy + bq) + T_(t_xy, Lxy + tq)) -
                           (T_(t_xy, Rxy + tq) + T_(t_xy, Lxy + bq)));
          if (want_yx)
            yx[at] += w * ((T_(t_yx, Tyx + lq) + T_(t_yx, Byx + rq)) -
                           (T_(t_yx, Tyx + rq) + T_(t_yx, Byx + lq)));
        }
      }
    }
    for (std::int64_t p = 0; p < m; ++p)
      for (std::int64_t q = 0; q < mb; ++q) {
        const auto at = static_cast<std::size_t>(p * mb + q);
        const std::int64_t ix = ix0 + p, iy = iy0 + p, jx = jx0 + q, jy = jy0 + q;
        const double v[4] = {xx[at] * factor, xy[at] * factor, yx[at] * factor, yy[at] * factor};
        finite = finite && std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[2]) &&
                 std::isfinite(v[3]);
        if (want_xx) store_element(target, ix, jx, v[0]);
        if (want_xy) store_element(target, ix, jy, v[1]);
        if (want_yx) store_element(target, iy, jx, v[2]);
        if (want_yy) store_element(target, iy, jy, v[3]);
      }
  }
  return finite;
}

void store_element(const CovarianceTarget& target, std::int64_t i, std::int64_t j, double v) {
  void* base = target.data;
  std::int64_t at = 0;
  if (target.tiles == nullptr) {
    if (i < target.row_begin || i >= target_row_end(target)) return;
    at = (i - target.row_begin) * target.cols + j;
  } else if (target.tile_data == nullptr) {
    at = target.tiles->element_offset(i, j);
  } else {
    const std::int64_t nb = target.tiles->tile_size(), ti = i / nb, tj = j / nb;
    base = target.tile_data[ti * target.tiles->tile_cols() + tj];
    if (base == nullptr) return;
    at = (j - tj * nb) * target.tiles->tile_height(ti) + (i - ti * nb);
  }
  if (target.dtype == DType::f64)
    static_cast<double*>(base)[at] = v;
  else
    static_cast<float*>(base)[at] = static_cast<float>(v);
}

bool target_wants(const CovarianceTarget& target, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                  std::int64_t j1) {
  if (i1 <= i0 || j1 <= j0) return false;
  if (target.tiles == nullptr) return i0 < target_row_end(target) && i1 > target.row_begin;
  if (target.tile_data == nullptr) return true;
  const linalg::TileLayout& layout = *target.tiles;
  const std::int64_t nb = layout.tile_size();
  for (std::int64_t ti = i0 / nb; ti <= (i1 - 1) / nb; ++ti)
    for (std::int64_t tj = j0 / nb; tj <= (j1 - 1) / nb; ++tj)
      if (layout.stored(ti, tj) && target.tile_data[ti * layout.tile_cols() + tj] != nullptr)
        return true;
  return false;
}

}  // namespace halfscope::ao::detail
