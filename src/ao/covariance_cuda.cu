// GPU backend of the covariance generator (covariance_plan.hpp): every element in FP64 with the
// table structure function (kernels/vonkarman.cuh), written once, rounded to the target dtype.
//
// Two paths per sensor pair, chosen exactly from the plan:
//  - offset tables: when two sensors see every layer with the same scale and subaperture size
//    (two NGS, two LGS at one altitude), have the same pitch and the same lattice orientation, the
//    layer-summed xx / yy / xy covariance of subapertures p, q depends only on their lattice offset
//    (c_p - c_q, r_p - r_q): one (2R + 1)^2 table per unordered pair and component, built on the
//    GPU, and the matrix elements are gathers (memory-bound: the 4 / 8 ms write floor of the E-ELT
//    Cmm). The table's separations are rebuilt from the lattice (origin + pitch (dc e1 + dr e2)),
//    which matches the plan's centres to rounding (checked to 16 ulp of the pupil size, else the
//    sensor falls back to the direct path): the same order as the rounding of u_i - u_j itself.
//  - direct evaluation (LGS x NGS, truth x LGS): 4 structure functions per layer and element,
//    or, when both lenslet arrays are unrotated, the edge-point tables of covariance_edges.cuh
//    (CovarianceCudaVariant::direct, default edge): ~4x fewer structure functions, then gathers.
// The noise and LGS tip-tilt terms are added as covariance_plan.hpp says.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "ao/covariance_cuda.hpp"
#include "ao/covariance_cuda_edges.hpp"
#include "ao/kernels/covariance_elements.cuh"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {
namespace {

/// The plan sensors along one side of the matrix, in slope order.
std::vector<int> side_sensors(const CovariancePlan& plan, CovarianceKind kind, bool rows) {
  const bool truth = rows ? kind != CovarianceKind::cmm : kind == CovarianceKind::ctt;
  if (truth) return {static_cast<int>(plan.truth())};
  std::vector<int> s(static_cast<std::size_t>(plan.truth()));
  for (std::size_t k = 0; k < s.size(); ++k) s[k] = static_cast<int>(k);
  return s;
}

/// (global subaperture << 8) | (sensor << 1) | axis for every slope of one side.
std::vector<std::int32_t> side_info(const CovariancePlan& plan, const std::vector<int>& sensors) {
  std::vector<std::int32_t> info;
  for (const int s : sensors) {
    const PlanSensor& ps = plan.sensors[static_cast<std::size_t>(s)];
    for (int axis = 0; axis < 2; ++axis)
      for (std::int64_t k = 0; k < ps.subapertures; ++k)
        info.push_back(
            static_cast<std::int32_t>(((ps.subaperture_offset + k) << 8) | (s << 1) | axis));
  }
  return info;
}

/// A sensor's subapertures as a lattice: centre(k) = origin + pitch (c_k e1 + r_k e2).
struct Lattice {
  bool ok = false;
  double ox = 0, oy = 0, e1x = 1, e1y = 0;
  int cmin = 0, cmax = 0, rmin = 0, rmax = 0;
};

Lattice detect_lattice(const CovariancePlan& plan, int s, std::vector<int2>& coords) {
  const PlanSensor& ps = plan.sensors[static_cast<std::size_t>(s)];
  Lattice L;
  const std::int64_t n = ps.subapertures, o = ps.subaperture_offset;
  const double d = ps.pitch_m;
  if (n < 2 || !(d > 0)) return L;
  L.ox = plan.x[static_cast<std::size_t>(o)];
  L.oy = plan.y[static_cast<std::size_t>(o)];
  // Positions are pupil-sized; the centres of one plan differ from the lattice by rounding only.
  double extent = 0;
  for (std::int64_t k = 0; k < n; ++k)
    extent = std::max({extent, std::fabs(plan.x[static_cast<std::size_t>(o + k)]),
                       std::fabs(plan.y[static_cast<std::size_t>(o + k)])});
  const double tol = 16.0 * std::numeric_limits<double>::epsilon() * (extent + d);
  // The lattice direction: from the plan's grid (rotation and indices) when it has one, else from
  // the first subaperture one pitch away from subaperture 0. Either way every centre is checked.
  const bool has_grid = plan.column.size() == plan.x.size() && plan.row.size() == plan.x.size();
  bool found = false;
  if (has_grid) {
    L.e1x = std::cos(ps.rotation_rad);
    L.e1y = std::sin(ps.rotation_rad);
    found = true;
  }
  for (std::int64_t k = 1; k < n && !found; ++k) {
    const double vx = plan.x[static_cast<std::size_t>(o + k)] - L.ox;
    const double vy = plan.y[static_cast<std::size_t>(o + k)] - L.oy;
    const double len = std::hypot(vx, vy);
    if (std::fabs(len - d) <= tol) {
      L.e1x = vx / len;
      L.e1y = vy / len;
      found = true;
    }
  }
  if (!found) return L;
  for (std::int64_t k = 0; k < n; ++k) {
    const double vx = plan.x[static_cast<std::size_t>(o + k)] - L.ox;
    const double vy = plan.y[static_cast<std::size_t>(o + k)] - L.oy;
    const auto at = static_cast<std::size_t>(o + k), first = static_cast<std::size_t>(o);
    const double cf = has_grid ? static_cast<double>(plan.column[at] - plan.column[first])
                               : std::nearbyint((vx * L.e1x + vy * L.e1y) / d);
    const double rf = has_grid ? static_cast<double>(plan.row[at] - plan.row[first])
                               : std::nearbyint((vy * L.e1x - vx * L.e1y) / d);
    if (std::fabs(cf) > 1e6 || std::fabs(rf) > 1e6) return L;
    const double px = L.ox + d * (cf * L.e1x - rf * L.e1y);
    const double py = L.oy + d * (cf * L.e1y + rf * L.e1x);
    if (std::fabs(px - (L.ox + vx)) > tol || std::fabs(py - (L.oy + vy)) > tol) return L;
    const int c = static_cast<int>(cf), r = static_cast<int>(rf);
    coords[static_cast<std::size_t>(o + k)] = make_int2(c, r);
    L.cmin = std::min(L.cmin, c);
    L.cmax = std::max(L.cmax, c);
    L.rmin = std::min(L.rmin, r);
    L.rmax = std::max(L.rmax, r);
  }
  L.ok = true;
  return L;
}

/// Whether sensors a and b can share an offset table (see the top of the file).
bool same_geometry(const CovariancePlan& plan, int a, int b, const Lattice& la, const Lattice& lb) {
  if (!la.ok || !lb.ok) return false;
  const PlanSensor& sa = plan.sensors[static_cast<std::size_t>(a)];
  const PlanSensor& sb = plan.sensors[static_cast<std::size_t>(b)];
  if (sa.pitch_m != sb.pitch_m) return false;
  const double tol = 4.0 * std::numeric_limits<double>::epsilon();
  if (std::fabs(la.e1x - lb.e1x) > tol || std::fabs(la.e1y - lb.e1y) > tol) return false;
  const std::size_t nl = plan.layers.size();
  for (std::size_t l = 0; l < nl; ++l) {
    const PlanSensorLayer& ga = plan.sensor_layer[static_cast<std::size_t>(a) * nl + l];
    const PlanSensorLayer& gb = plan.sensor_layer[static_cast<std::size_t>(b) * nl + l];
    if (ga.scale != gb.scale || ga.size != gb.size) return false;
  }
  return true;
}

template <class T, VkLayout L, int FastLanes>
void launch_elements(const CovKernelArgs& args, CovOutput out, cudaStream_t stream) {
  const std::int64_t blocks = out.block_rows * out.block_cols;
  if (blocks >= (std::int64_t{1} << 31))
    throw InvalidInput("covariance_cuda: too many blocks for one launch (tile size too small)");
  const auto grid = static_cast<unsigned>(blocks);
  if (out.tiled)
    covariance_element_kernel<T, true, L, FastLanes><<<grid, kCovThreads, 0, stream>>>(args, out);
  else
    covariance_element_kernel<T, false, L, FastLanes><<<grid, kCovThreads, 0, stream>>>(args, out);
  HS_CHECK_LAUNCH();
}

/// The element kernel of one variant (the runtime choice made a type once, here).
void launch_variant(bool f64, const CovarianceCudaVariant& v, const CovKernelArgs& args,
                    const CovOutput& out, cudaStream_t st) {
  constexpr VkLayout kDeg = VkLayout::degree_major, kInt = VkLayout::interval_major;
  const bool deg = v.layout == kDeg;
  if (v.warp_fast_lanes == 8) {
    if (deg)
      f64 ? launch_elements<double, kDeg, 8>(args, out, st)
          : launch_elements<float, kDeg, 8>(args, out, st);
    else
      f64 ? launch_elements<double, kInt, 8>(args, out, st)
          : launch_elements<float, kInt, 8>(args, out, st);
  } else if (v.warp_fast_lanes == 32) {
    if (deg)
      f64 ? launch_elements<double, kDeg, 32>(args, out, st)
          : launch_elements<float, kDeg, 32>(args, out, st);
    else
      f64 ? launch_elements<double, kInt, 32>(args, out, st)
          : launch_elements<float, kInt, 32>(args, out, st);
  } else {
    throw InvalidInput("covariance_cuda: warp_fast_lanes must be 8 or 32, found " +
                       std::to_string(v.warp_fast_lanes));
  }
}

}  // namespace

void covariance_cuda_report(const CovariancePlan& plan, const CovarianceTarget& target,
                            CovarianceCudaReport* report, const CovarianceCudaVariant& variant) {
  const std::vector<int> row_sensors = side_sensors(plan, target.kind, true);
  const std::vector<int> col_sensors = side_sensors(plan, target.kind, false);
  const std::vector<std::int32_t> row_info = side_info(plan, row_sensors);
  const std::vector<std::int32_t> col_info = side_info(plan, col_sensors);
  const auto rows = static_cast<std::int64_t>(row_info.size());
  const auto cols = static_cast<std::int64_t>(col_info.size());
  check_covariance_target(plan, target, rows, cols);
  // A selection (row range, tile pointers) checked as the CPU backend checks it; the tile
  // pointers must lie in the device buffer `data` starts.
  check_covariance_target(plan, target, "covariance_cuda");
  if (rows == 0 || cols == 0) return;

  const int ns = static_cast<int>(plan.sensors.size());
  const int nl = static_cast<int>(plan.layers.size());
  for (int l = 0; l < nl; ++l) {
    const double L0 = plan.layers[static_cast<std::size_t>(l)].outer_scale_m;
    if (!(std::isfinite(L0) && L0 > 0))
      throw InvalidInput("covariance_cuda: layer " + std::to_string(l) +
                         " outer scale must be finite and > 0, found " + std::to_string(L0));
  }
  const VonKarmanTable& vk = vonkarman_table();
  std::vector<DevLayer> layers(static_cast<std::size_t>(nl));
  for (int l = 0; l < nl; ++l) {
    const PlanLayer& pl = plan.layers[static_cast<std::size_t>(l)];
    const double k = 2.0 * std::numbers::pi / pl.outer_scale_m;
    layers[static_cast<std::size_t>(l)] = {
        pl.cn2 *
            static_cast<double>(static_cast<long double>(vk.k1) *
                                std::pow(static_cast<long double>(pl.outer_scale_m), 5.0L / 3.0L)),
        k * k};
  }
  std::vector<DevSensor> sensors(static_cast<std::size_t>(ns));
  for (int s = 0; s < ns; ++s)
    sensors[static_cast<std::size_t>(s)] = {1.0 / plan.sensors[static_cast<std::size_t>(s)].pitch_m,
                                            plan.sensors[static_cast<std::size_t>(s)].lgs_tiptilt};

  // Offset tables for the unordered pairs that meet (row sensor x column sensor).
  std::vector<int2> coords(plan.x.size(), make_int2(0, 0));
  std::vector<Lattice> lattice(static_cast<std::size_t>(ns));
  for (int s = 0; s < ns; ++s)
    lattice[static_cast<std::size_t>(s)] = detect_lattice(plan, s, coords);
  std::vector<DevPair> pairs(static_cast<std::size_t>(ns) * static_cast<std::size_t>(ns));
  std::vector<DevTableJob> jobs;
  std::int64_t table_doubles = 0;
  const bool edge_path = variant.direct == DirectPath::edge;
  const EdgeSensors edges = edge_path ? edge_sensors(plan) : EdgeSensors{};
  std::vector<int2> edge_pairs;  // unordered direct pairs (a < b) served by edge-point tables
  std::vector<char> met(pairs.size(), 0);  // unordered pairs (a <= b) that meet
  std::int64_t meeting = 0;
  for (const int ra : row_sensors)
    for (const int cb : col_sensors) {
      const int a = std::min(ra, cb), b = std::max(ra, cb);
      if (met[static_cast<std::size_t>(a * ns + b)]) continue;  // met before (as (b, a))
      met[static_cast<std::size_t>(a * ns + b)] = 1;
      ++meeting;
      DevPair& pab = pairs[static_cast<std::size_t>(a * ns + b)];
      const Lattice& la = lattice[static_cast<std::size_t>(a)];
      const Lattice& lb = lattice[static_cast<std::size_t>(b)];
      if (!same_geometry(plan, a, b, la, lb)) {
        if (edge_path && a != b && edges.ok[static_cast<std::size_t>(a)] &&
            edges.ok[static_cast<std::size_t>(b)]) {
          pab.edge = 1;
          pairs[static_cast<std::size_t>(b * ns + a)].edge = 1;
          edge_pairs.push_back(make_int2(a, b));
        }
        continue;
      }
      DevTableJob job;
      job.a = a;
      job.b = b;
      job.radius =
          std::max({la.cmax - lb.cmin, lb.cmax - la.cmin, la.rmax - lb.rmin, lb.rmax - la.rmin});
      job.offset = table_doubles;
      job.base_x = la.ox - lb.ox;
      job.base_y = la.oy - lb.oy;
      job.e1x = la.e1x;
      job.e1y = la.e1y;
      job.pitch = plan.sensors[static_cast<std::size_t>(a)].pitch_m;
      job.factor = 0.5 * kSlopeUnit2 / (job.pitch * job.pitch);
      const std::int64_t width = 2 * static_cast<std::int64_t>(job.radius) + 1;
      table_doubles += 3 * width * width;
      jobs.push_back(job);
      pab = {job.offset, job.radius, 1};
      pairs[static_cast<std::size_t>(b * ns + a)] = {job.offset, job.radius, -1};
    }
  if (report) {
    report->table_pairs = static_cast<std::int64_t>(jobs.size());
    report->direct_pairs = meeting - report->table_pairs;
    report->edge_pairs = static_cast<std::int64_t>(edge_pairs.size());
  }

  cuda::Stream stream;
  const cudaStream_t st = stream.get();
  cuda::Event t0, t1, t2, t3, t4;
  t0.record(st);
  const DeviceCopy<double> d_vk_deg(vk.by_degree, st);
  const DeviceCopy<double> d_vk_int(vk.coefficients, st);
  const DeviceCopy<DevLayer> d_layers(layers, st);
  const DeviceCopy<DevSensor> d_sensors(sensors, st);
  const DeviceCopy<PlanSensorLayer> d_geom(plan.sensor_layer, st);
  const DeviceCopy<double> d_x(plan.x, st), d_y(plan.y, st);
  const DeviceCopy<double> d_nxx(plan.noise_xx, st), d_nyy(plan.noise_yy, st),
      d_nxy(plan.noise_xy, st);
  const DeviceCopy<int2> d_coords(coords, st);
  const DeviceCopy<std::int32_t> d_rows(row_info, st), d_cols(col_info, st);
  const DeviceCopy<DevPair> d_pairs(pairs, st);
  const DeviceCopy<DevTableJob> d_jobs(jobs, st);
  std::vector<std::int64_t> col_start;
  if (target.tiles)
    for (std::int64_t tj = 0; tj < target.tiles->tile_cols(); ++tj)
      col_start.push_back(
          target.tiles->tile_offset(target.tiles->fill() == linalg::TileFill::lower ? tj : 0, tj));
  const DeviceCopy<std::int64_t> d_col_start(col_start, st);
  // A selection of tiles (an MPI rank's, issue 9): each tile's start in target.data's buffer.
  std::vector<std::int64_t> tile_offset;
  if (target.tile_data != nullptr) {
    const linalg::TileLayout& tl = *target.tiles;
    const std::int64_t size = target.dtype == DType::f64 ? 8 : 4;
    tile_offset.assign(static_cast<std::size_t>(tl.tile_rows() * tl.tile_cols()), -1);
    for (std::size_t t = 0; t < tile_offset.size(); ++t)
      if (target.tile_data[t] != nullptr)
        tile_offset[t] = (static_cast<const std::byte*>(target.tile_data[t]) -
                          static_cast<const std::byte*>(target.data)) /
                         size;
  }
  const DeviceCopy<std::int64_t> d_tile_offset(tile_offset, st);
  cuda::StreamScratch tables(table_doubles * static_cast<std::int64_t>(sizeof(double)), st);
  t1.record(st);

  CovKernelArgs args;
  args.sensors = d_sensors.get();
  args.nsensors = ns;
  args.geom = d_geom.get();
  args.layers = d_layers.get();
  args.nlayers = nl;
  args.x = d_x.get();
  args.y = d_y.get();
  args.lattice = d_coords.get();
  args.noise_xx = d_nxx.get();
  args.noise_yy = d_nyy.get();
  args.noise_xy = d_nxy.get();
  args.noise = plan.noise;
  args.row_info = d_rows.get();
  args.col_info = d_cols.get();
  args.pairs = d_pairs.get();
  args.tables = tables.as<double>();
  args.vk = variant.layout == VkLayout::degree_major ? d_vk_deg.get() : d_vk_int.get();
  args.vk_deg = d_vk_deg.get();
  args.vks = vk.scalars;
  args.rows = rows;
  args.cols = cols;
  args.any_edge = !edge_pairs.empty();
  if (!jobs.empty()) {
    std::int64_t widest = 0;
    for (const DevTableJob& j : jobs) widest = std::max<std::int64_t>(widest, 2 * j.radius + 1);
    const int grid = cuda::grid_blocks(widest * widest, kCovTableThreads, 8);
    covariance_table_kernel<<<grid, kCovTableThreads, 0, st>>>(
        args, d_jobs.get(), static_cast<int>(jobs.size()), tables.as<double>());
    HS_CHECK_LAUNCH();
  }
  t2.record(st);

  CovOutput out;
  out.data = target.data;
  if (target.tiles) {
    const linalg::TileLayout& tl = *target.tiles;
    out.tiled = true;
    out.lower = tl.fill() == linalg::TileFill::lower;
    out.nb = tl.tile_size();
    out.tile_rows = tl.tile_rows();
    out.tile_cols = tl.tile_cols();
    out.col_start = d_col_start.get();
    out.tile_offset = target.tile_data != nullptr ? d_tile_offset.get() : nullptr;
    out.blocks_per_tile = (out.nb + kCovBlock - 1) / kCovBlock;
    out.block_rows = tl.tile_rows() * out.blocks_per_tile;
    out.block_cols = tl.tile_cols() * out.blocks_per_tile;
  } else {
    out.row_begin = target.row_begin;
    out.row_end = target.row_end < 0 ? rows : target.row_end;
    out.block_rows = (out.row_end - out.row_begin + kCovBlock - 1) / kCovBlock;
    out.block_cols = (cols + kCovBlock - 1) / kCovBlock;
  }
  launch_variant(target.dtype == DType::f64, variant, args, out, st);
  t3.record(st);
  const std::int64_t edge_scratch = covariance_edge_pairs(
      plan, edges, edge_pairs, row_sensors, col_sensors, args, out, target.dtype == DType::f64, st);
  t4.record(st);
  stream.synchronize();
  if (report) {
    float ms = 0;
    HS_CUDA_CHECK(cudaEventElapsedTime(&ms, t0.get(), t1.get()));
    report->setup_ms = ms;
    HS_CUDA_CHECK(cudaEventElapsedTime(&ms, t1.get(), t2.get()));
    report->tables_ms = ms;
    HS_CUDA_CHECK(cudaEventElapsedTime(&ms, t2.get(), t3.get()));
    report->elements_ms = ms;
    HS_CUDA_CHECK(cudaEventElapsedTime(&ms, t3.get(), t4.get()));
    report->edge_ms = ms;
    report->scratch_bytes =
        table_doubles * 8 + edge_scratch +
        static_cast<std::int64_t>(2 * vk.coefficients.size() * 8 + plan.x.size() * (5 * 8 + 8) +
                                  (row_info.size() + col_info.size()) * 4);
  }
}

void covariance_cuda(const CovariancePlan& plan, const CovarianceTarget& target) {
  covariance_cuda_report(plan, target, nullptr);
}

std::vector<double> vonkarman_structure_function_cuda(const std::vector<double>& r, double L0) {
  const VonKarmanTable& vk = vonkarman_table();
  const double k = 2.0 * std::numbers::pi / L0;
  const double weight = static_cast<double>(static_cast<long double>(vk.k1) *
                                            std::pow(static_cast<long double>(L0), 5.0L / 3.0L));
  cuda::Stream stream;
  const DeviceCopy<double> d_vk(vk.by_degree, stream.get());
  const DeviceCopy<double> d_r(r, stream.get());
  cuda::StreamScratch d_out(static_cast<std::int64_t>(r.size() * sizeof(double)), stream.get());
  const auto n = static_cast<std::int64_t>(r.size());
  if (n > 0) {
    vonkarman_probe_kernel<<<cuda::grid_blocks(n, 256, 4), 256, 0, stream.get()>>>(
        d_r.get(), n, weight, k * k, d_vk.get(), vk.scalars, d_out.as<double>());
    HS_CHECK_LAUNCH();
  }
  std::vector<double> out(r.size());
  if (n > 0)
    HS_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out.get(), r.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return out;
}

}  // namespace halfscope::ao::detail
