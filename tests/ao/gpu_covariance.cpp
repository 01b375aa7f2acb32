// The GPU covariance backend (src/ao/covariance_cuda.cu) on a hand-built plan: every element of
// Cmm, Ctm and Ctt against the host reference of gpu_covariance_reference.hpp (the formula of
// covariance_plan.hpp with the reference structure function) within its derived per-element
// bound; dense and tiled (lower / full, a tile size that does not divide the matrix) targets hold
// the same numbers; f32 is the f64 result rounded once; the offset tables and the edge-point
// tables are used exactly where the geometry allows, and both direct paths (edge, element) meet
// the same bound; bad targets are refused.
//
// The edge-point path needs no wider bound: each of its table entries T(P, Q) = sum_l w_l D_l is a
// sum of the same per-layer structure functions the bound already charges (3e-14 + 8 eps of each
// D_l, plus the argument rounding), evaluated at the same arguments up to rounding (edge point
// scale (x +- d/2) + shift against (scale x + shift) +- size/2: both within the 32 eps
// (|u_i| + |u_j| + |v_i| + |v_j| + s1 + s2) the bound allows); summing the layers first adds at
// most (layers - 1) eps of sum_l w_l D_l per entry (positive terms), 2 eps here and 1.3e-14 for 60
// layers, inside the 3e-14 per D_l that the bound reserves for the table fit (measured 1e-15).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "ao/covariance_cuda.hpp"
#include "gpu_covariance_reference.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "test_support.hpp"

namespace halfscope::ao {
namespace {

using detail::CovariancePlan;

struct HandSensor {
  bool lgs;
  double rotation, lgs_altitude, x_arcsec, y_arcsec, shift_x;
};

/// Five measuring sensors and a truth sensor, 8 subapertures across a 4 m pupil, three layers:
/// NGS1 and NGS2 share grid and rotation (one offset table), LGS1 and LGS2 share an altitude (one
/// table), NGS3 is rotated differently (its own table; direct with the others), the truth sensor
/// is an NGS. `unrotated`: every sensor but NGS3 has rotation 0, so the LGS x NGS1 / NGS2 pairs
/// (and truth x LGS) can use the edge-point tables while NGS3's direct pairs cannot.
CovariancePlan hand_plan(bool noise, bool unrotated = false) {
  const double rot = unrotated ? 0.0 : 0.3;
  const std::vector<HandSensor> hs = {{false, rot, 0, 10, -5, 0.0},   {false, rot, 0, -20, 8, 0.01},
                                      {true, rot, 9e4, 30, 0, 0.0},   {true, rot, 9e4, 0, -30, 0.0},
                                      {false, 0.45, 0, 5, 25, -0.02}, {false, rot, 0, 0, 0, 0.0}};
  const struct {
    double h, cn2, L0;
  } layers[] = {{0, 0.5 * std::pow(0.15, -5.0 / 3), 25},
                {4000, 0.3 * std::pow(0.15, -5.0 / 3), 20},
                {12000, 0.2 * std::pow(0.15, -5.0 / 3), 40}};
  constexpr int n = 8;
  constexpr double D = 4.0, d = D / n;
  CovariancePlan plan;
  plan.noise = noise;
  for (const auto& l : layers) plan.layers.push_back({l.cn2, l.L0, 0});
  std::int64_t slope_offset = 0, sub_offset = 0;
  for (std::size_t k = 0; k < hs.size(); ++k) {
    const bool truth = k + 1 == hs.size();
    detail::PlanSensor ps;
    ps.slope_offset = truth ? 0 : slope_offset;
    ps.subaperture_offset = sub_offset;
    ps.pitch_m = d;
    ps.lgs = hs[k].lgs;
    ps.lgs_tiptilt = hs[k].lgs ? 0.01 * static_cast<double>(k) : 0.0;
    ps.grid = n;
    ps.rotation_rad = hs[k].rotation;
    std::int64_t count = 0;
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) {
        const double gx = (c - 0.5 * (n - 1)) * d, gy = (r - 0.5 * (n - 1)) * d;
        if (gx * gx + gy * gy >= 0.25 * D * D || gx * gx + gy * gy < 0.04 * D * D) continue;
        const double cr = std::cos(hs[k].rotation), sr = std::sin(hs[k].rotation);
        plan.x.push_back(cr * gx - sr * gy + hs[k].shift_x);
        plan.y.push_back(sr * gx + cr * gy);
        plan.column.push_back(c);
        plan.row.push_back(r);
        const double v =
            1e-3 * static_cast<double>(1 + (count * 7 + static_cast<std::int64_t>(k)) % 11);
        plan.noise_xx.push_back(noise ? v : 0.0);
        plan.noise_yy.push_back(noise ? 1.3 * v : 0.0);
        plan.noise_xy.push_back(noise && hs[k].lgs ? -0.4 * v : 0.0);
        ++count;
      }
    ps.subapertures = count;
    plan.sensors.push_back(ps);
    sub_offset += count;
    if (!truth) slope_offset += 2 * count;
  }
  for (const auto& s : hs)
    for (const auto& l : layers) {
      detail::PlanSensorLayer g;
      g.scale = s.lgs ? 1.0 - l.h / s.lgs_altitude : 1.0;
      g.shift_x = l.h * s.x_arcsec / 206264.80624709636;
      g.shift_y = l.h * s.y_arcsec / 206264.80624709636;
      g.size = g.scale > 0 ? d * g.scale : 0.0;
      plan.sensor_layer.push_back(g);
    }
  plan.outer_scales = {25, 20, 40};
  return plan;
}

std::int64_t side(const CovariancePlan& plan, bool truth) {
  if (truth) return 2 * plan.sensors.back().subapertures;
  std::int64_t n = 0;
  for (std::int64_t s = 0; s < plan.truth(); ++s)
    n += 2 * plan.sensors[static_cast<std::size_t>(s)].subapertures;
  return n;
}

/// Every element-kernel variant (table layout x warp shape x direct path): variants of one direct
/// path must give the same bits.
std::vector<detail::CovarianceCudaVariant> variants() {
  std::vector<detail::CovarianceCudaVariant> v;
  for (const auto direct : {detail::DirectPath::edge, detail::DirectPath::element})
    for (const auto layout : {detail::VkLayout::degree_major, detail::VkLayout::interval_major})
      for (const int lanes : {8, 32}) v.push_back({layout, lanes, direct});
  return v;
}

/// Runs the backend into a dense device array of `dtype` and returns it on the host.
Array run_dense(const CovariancePlan& plan, CovarianceKind kind, DType dtype,
                detail::CovarianceCudaReport* report = nullptr,
                const detail::CovarianceCudaVariant& variant = {}) {
  const std::int64_t rows = side(plan, kind != CovarianceKind::cmm);
  const std::int64_t cols = side(plan, kind == CovarianceKind::ctt);
  Array out(dtype, {rows, cols}, Memory::device);
  detail::CovarianceTarget t{kind, dtype, out.data(), rows, cols, nullptr};
  detail::covariance_cuda_report(plan, t, report, variant);
  return out.to(Memory::host);
}

TEST(AoCovarianceGpu, HandPlanEveryElementWithinBound) {
  HS_REQUIRE_GPU();
  for (const bool unrotated : {false, true})
    for (const bool noise : {true, false}) {
      const CovariancePlan plan = hand_plan(noise, unrotated);
      for (const CovarianceKind kind :
           {CovarianceKind::cmm, CovarianceKind::ctm, CovarianceKind::ctt}) {
        const std::int64_t rows = side(plan, kind != CovarianceKind::cmm);
        const std::int64_t cols = side(plan, kind == CovarianceKind::ctt);
        std::vector<test::RefElement> ref;
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j)
            ref.push_back(test::reference_element(plan, kind, i, j));
        for (const auto& variant : variants()) {
          detail::CovarianceCudaReport report;
          const Array g = run_dense(plan, kind, DType::f64, &report, variant);
          if (kind == CovarianceKind::cmm) {
            // Tables: (N1,N1) (N1,N2) (N2,N2) (L1,L1) (L1,L2) (L2,L2) (N3,N3); direct: the other 8.
            EXPECT_EQ(report.table_pairs, 7);
            EXPECT_EQ(report.direct_pairs, 8);
          }
          // Edge-point pairs: the 4 unrotated LGS x NGS pairs of Cmm, the 2 truth x LGS of Ctm.
          const bool edge = unrotated && variant.direct == detail::DirectPath::edge;
          const std::int64_t edges = kind == CovarianceKind::cmm   ? 4
                                     : kind == CovarianceKind::ctm ? 2
                                                                   : 0;
          EXPECT_EQ(report.edge_pairs, edge ? edges : 0);
          const double* v = g.data_as<double>();
          double worst = 0;  // |GPU - reference| / bound
          for (std::int64_t k = 0; k < rows * cols; ++k) {
            const double e = std::fabs(v[k] - ref[static_cast<std::size_t>(k)].value);
            ASSERT_LE(e, ref[static_cast<std::size_t>(k)].bound)
                << "element (" << k / cols << ", " << k % cols << "), noise " << noise << ", lanes "
                << variant.warp_fast_lanes << ", unrotated " << unrotated << ", direct path "
                << static_cast<int>(variant.direct);
            worst = std::max(worst, e / ref[static_cast<std::size_t>(k)].bound);
          }
          std::printf(
              "hand plan, unrotated %d, kind %d, noise %d, layout %d, lanes %d, direct %d: "
              "max |error| / bound = %.3f\n",
              unrotated ? 1 : 0, static_cast<int>(kind), noise ? 1 : 0,
              static_cast<int>(variant.layout), variant.warp_fast_lanes,
              static_cast<int>(variant.direct), worst);
        }
      }
    }
}

TEST(AoCovarianceGpu, TiledLayoutsAndFloat32MatchDense) {
  HS_REQUIRE_GPU();
  for (const bool unrotated : {false, true}) {
    const CovariancePlan plan = hand_plan(true, unrotated);
    for (const CovarianceKind kind :
         {CovarianceKind::cmm, CovarianceKind::ctm, CovarianceKind::ctt}) {
      const Array dense = run_dense(plan, kind, DType::f64);
      const Array dense32 = run_dense(plan, kind, DType::f32);
      const std::int64_t rows = dense.shape()[0], cols = dense.shape()[1];
      const float* f = dense32.data_as<float>();
      for (std::int64_t k = 0; k < rows * cols; ++k)
        ASSERT_EQ(f[k], static_cast<float>(dense.data_as<double>()[k])) << "f32 element " << k;
      const bool symmetric = kind != CovarianceKind::ctm;
      for (const auto& variant : variants()) {
        // Dense, every variant against the first of its direct path (same arithmetic, same bits).
        detail::CovarianceCudaVariant first;
        first.direct = variant.direct;
        const Array want64 = run_dense(plan, kind, DType::f64, nullptr, first);
        const Array want32 = run_dense(plan, kind, DType::f32, nullptr, first);
        const double* d = want64.data_as<double>();
        const Array dv = run_dense(plan, kind, DType::f64, nullptr, variant);
        for (std::int64_t k = 0; k < rows * cols; ++k)
          ASSERT_EQ(dv.data_as<double>()[k], d[k]) << "dense element " << k;
        for (const std::int64_t nb : {std::int64_t{37}, std::int64_t{64}, std::int64_t{1000}})
          for (const DType dtype : {DType::f64, DType::f32}) {
            const linalg::TileLayout layout(
                rows, cols, nb, symmetric ? linalg::TileFill::lower : linalg::TileFill::full);
            linalg::TileMatrix tm(layout, dtype, Memory::device);
            detail::CovarianceTarget t{kind, dtype, tm.storage.data(), rows, cols, &tm.layout};
            detail::covariance_cuda_report(plan, t, nullptr, variant);
            linalg::TileMatrix host{layout, dtype, Memory::host};
            host.storage = tm.storage.to(Memory::host);
            // Every stored element, diagonal tiles whole (both triangles), equals the dense one.
            for (std::int64_t i = 0; i < rows; ++i)
              for (std::int64_t j = 0; j < cols; ++j) {
                if (!layout.stored(i / nb, j / nb)) continue;
                const std::int64_t off = layout.element_offset(i, j);
                const double want =
                    dtype == DType::f64
                        ? d[i * cols + j]
                        : static_cast<double>(want32.data_as<float>()[i * cols + j]);
                const double got = dtype == DType::f64 ? host.storage.data_as<double>()[off]
                                                       : host.storage.data_as<float>()[off];
                ASSERT_EQ(got, want)
                    << "nb " << nb << ", element (" << i << ", " << j << "), unrotated "
                    << unrotated << ", direct path " << static_cast<int>(variant.direct);
              }
          }
      }
    }
  }
}

TEST(AoCovarianceGpu, RefusesBadTargets) {
  HS_REQUIRE_GPU();
  const CovariancePlan plan = hand_plan(true);
  const std::int64_t n = side(plan, false);
  Array dev(DType::f64, {n, n}, Memory::device);
  Array host(DType::f64, {n, n}, Memory::host);
  detail::CovarianceTarget t{CovarianceKind::cmm, DType::f64, dev.data(), n, n, nullptr};
  detail::CovarianceTarget wrong_size = t;
  wrong_size.rows = n - 1;
  EXPECT_THROW(detail::covariance_cuda(plan, wrong_size), InvalidInput);
  detail::CovarianceTarget wrong_dtype = t;
  wrong_dtype.dtype = DType::f16;
  EXPECT_THROW(detail::covariance_cuda(plan, wrong_dtype), InvalidInput);
  detail::CovarianceTarget on_host = t;
  on_host.data = host.data();
  EXPECT_THROW(detail::covariance_cuda(plan, on_host), InvalidInput);
  detail::CovarianceTarget null = t;
  null.data = nullptr;
  EXPECT_THROW(detail::covariance_cuda(plan, null), InvalidInput);
}

}  // namespace
}  // namespace halfscope::ao
