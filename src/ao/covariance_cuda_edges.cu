// Host side of the edge-point path of the GPU covariance generator (covariance_cuda_edges.hpp;
// the formulas and floors are at the top of kernels/covariance_edges.cuh) and the target checks.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ao/covariance_cuda_edges.hpp"
#include "ao/kernels/covariance_edges.cuh"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {

void check_covariance_target(const CovariancePlan& plan, const CovarianceTarget& t,
                             std::int64_t rows, std::int64_t cols) {
  const std::string fn = "covariance_cuda: ";
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    throw InvalidInput(fn + "target dtype must be float32 or float64, found " +
                       std::string(dtype_name(t.dtype)));
  const char* kind = t.kind == CovarianceKind::cmm   ? "cmm"
                     : t.kind == CovarianceKind::ctm ? "ctm"
                                                     : "ctt";
  if (t.rows != rows || t.cols != cols)
    throw InvalidInput(fn + "target of " + kind + " must be " + std::to_string(rows) + " x " +
                       std::to_string(cols) + ", found " + std::to_string(t.rows) + " x " +
                       std::to_string(t.cols));
  if (t.tiles && (t.tiles->rows() != rows || t.tiles->cols() != cols))
    throw InvalidInput(fn + "tile layout is " + std::to_string(t.tiles->rows()) + " x " +
                       std::to_string(t.tiles->cols()) + ", expected " + std::to_string(rows) +
                       " x " + std::to_string(cols));
  if (rows >= (std::int64_t{1} << 31) || cols >= (std::int64_t{1} << 31) ||
      plan.x.size() >= (std::size_t{1} << 23) || plan.sensors.size() > 127)
    throw InvalidInput(fn +
                       "system too large for the GPU slope maps (expected < 2^23 "
                       "subapertures and < 128 sensors)");
  if (t.data == nullptr) throw InvalidInput(fn + "target data is null (expected device memory)");
  cudaPointerAttributes attr{};
  HS_CUDA_CHECK(cudaPointerGetAttributes(&attr, t.data));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    throw InvalidInput(fn + "target data must be device memory, found host memory");
}

EdgeSensors edge_sensors(const CovariancePlan& plan) {
  const std::size_t ns = plan.sensors.size();
  EdgeSensors e;
  e.ok.assign(ns, 0);
  e.x_begin.assign(ns, 0);
  e.x_count.assign(ns, 0);
  e.y_begin.assign(ns, 0);
  e.y_count.assign(ns, 0);
  e.edges.assign(plan.x.size(), make_int4(0, 0, 0, 0));
  const bool has_grid = plan.column.size() == plan.x.size() && plan.row.size() == plan.x.size();
  if (!has_grid) return e;
  for (std::size_t s = 0; s < ns; ++s) {
    const PlanSensor& ps = plan.sensors[s];
    const std::int64_t n = ps.grid, o = ps.subaperture_offset;
    if (ps.rotation_rad != 0.0 || n <= 0 || ps.subapertures <= 0) continue;
    bool inside = true;
    for (std::int64_t k = o; k < o + ps.subapertures && inside; ++k) {
      const auto u = static_cast<std::size_t>(k);
      inside = plan.column[u] >= 0 && plan.column[u] < n && plan.row[u] >= 0 && plan.row[u] < n;
    }
    if (!inside) continue;
    e.ok[s] = 1;
    e.x_begin[s] = static_cast<std::int64_t>(e.xe_x.size());
    e.y_begin[s] = static_cast<std::int64_t>(e.ye_x.size());
    // Key of an x-edge point: row r, edge column c (0..n); of a y-edge point: edge row r (0..n),
    // column c. The first subaperture touching a point fixes its position (the neighbour's
    // centre +- d/2 differs by rounding only).
    std::vector<int> xe_id(static_cast<std::size_t>(n * (n + 1)), -1);
    std::vector<int> ye_id(static_cast<std::size_t>((n + 1) * n), -1);
    const double half = 0.5 * ps.pitch_m;
    const auto point = [](std::vector<int>& ids, std::int64_t key, std::vector<double>& px,
                          std::vector<double>& py, std::int64_t begin, double x, double y) {
      int& id = ids[static_cast<std::size_t>(key)];
      if (id < 0) {
        id = static_cast<int>(static_cast<std::int64_t>(px.size()) - begin);
        px.push_back(x);
        py.push_back(y);
      }
      return id;
    };
    for (std::int64_t k = o; k < o + ps.subapertures; ++k) {
      const auto u = static_cast<std::size_t>(k);
      const std::int64_t c = plan.column[u], r = plan.row[u];
      const double x = plan.x[u], y = plan.y[u];
      const std::int64_t xb = e.x_begin[s], yb = e.y_begin[s];
      e.edges[u].x = point(xe_id, r * (n + 1) + c, e.xe_x, e.xe_y, xb, x - half, y);
      e.edges[u].y = point(xe_id, r * (n + 1) + c + 1, e.xe_x, e.xe_y, xb, x + half, y);
      e.edges[u].z = point(ye_id, r * n + c, e.ye_x, e.ye_y, yb, x, y - half);
      e.edges[u].w = point(ye_id, (r + 1) * n + c, e.ye_x, e.ye_y, yb, x, y + half);
    }
    e.x_count[s] = static_cast<std::int64_t>(e.xe_x.size()) - e.x_begin[s];
    e.y_count[s] = static_cast<std::int64_t>(e.ye_x.size()) - e.y_begin[s];
  }
  return e;
}

namespace {

/// First row / column of every plan sensor along one side of the target (-1: not on it).
std::vector<std::int64_t> side_starts(const CovariancePlan& plan, const std::vector<int>& side) {
  std::vector<std::int64_t> at(plan.sensors.size(), -1);
  std::int64_t next = 0;
  for (const int s : side) {
    at[static_cast<std::size_t>(s)] = next;
    next += 2 * plan.sensors[static_cast<std::size_t>(s)].subapertures;
  }
  return at;
}

template <class T>
void launch_gather(const CovKernelArgs& args, const CovOutput& out, const DevEdgeTables& e,
                   const DevEdgeBlock& blk, const int4* edges, cudaStream_t st) {
  const std::int64_t blocks =
      ((blk.rows + kCovBlock - 1) / kCovBlock) * ((blk.cols + kCovBlock - 1) / kCovBlock);
  if (blocks >= (std::int64_t{1} << 31))
    throw InvalidInput("covariance_cuda: sensor block too large for one launch");
  const auto grid = static_cast<unsigned>(blocks);
  if (out.tiled)
    covariance_edge_gather_kernel<T, true><<<grid, kCovThreads, 0, st>>>(args, out, e, blk, edges);
  else
    covariance_edge_gather_kernel<T, false><<<grid, kCovThreads, 0, st>>>(args, out, e, blk, edges);
  HS_CHECK_LAUNCH();
}

}  // namespace

std::int64_t covariance_edge_pairs(const CovariancePlan& plan, const EdgeSensors& es,
                                   const std::vector<int2>& pairs,
                                   const std::vector<int>& row_sensors,
                                   const std::vector<int>& col_sensors, const CovKernelArgs& args,
                                   const CovOutput& out, bool f64, cudaStream_t st) {
  if (pairs.empty()) return 0;
  const DeviceCopy<double> xe_x(es.xe_x, st), xe_y(es.xe_y, st), ye_x(es.ye_x, st),
      ye_y(es.ye_y, st);
  const DeviceCopy<int4> edges(es.edges, st);
  const std::vector<std::int64_t> row_at = side_starts(plan, row_sensors);
  const std::vector<std::int64_t> col_at = side_starts(plan, col_sensors);
  std::vector<DevEdgeTables> tables;
  std::int64_t widest = 0;
  for (const int2 pr : pairs) {
    const auto a = static_cast<std::size_t>(pr.x), b = static_cast<std::size_t>(pr.y);
    DevEdgeTables e;
    e.a = pr.x;
    e.b = pr.y;
    e.nxa = es.x_count[a];
    e.nya = es.y_count[a];
    e.nxb = es.x_count[b];
    e.nyb = es.y_count[b];
    e.xa = xe_x.get() + es.x_begin[a];
    e.xa_y = xe_y.get() + es.x_begin[a];
    e.ya = ye_x.get() + es.y_begin[a];
    e.ya_y = ye_y.get() + es.y_begin[a];
    e.xb = xe_x.get() + es.x_begin[b];
    e.xb_y = xe_y.get() + es.x_begin[b];
    e.yb = ye_x.get() + es.y_begin[b];
    e.yb_y = ye_y.get() + es.y_begin[b];
    e.factor = 0.5 * kSlopeUnit2 / (plan.sensors[a].pitch_m * plan.sensors[b].pitch_m);
    widest = std::max(widest, e.total());
    tables.push_back(e);
  }
  // One buffer for the largest pair's tables, reused pair by pair (stream order keeps a pair's
  // gathers before the next pair's tables overwrite it). E-ELT: ~1 GB.
  const cuda::StreamScratch scratch(widest * static_cast<std::int64_t>(sizeof(double)), st);
  for (DevEdgeTables& e : tables) {
    e.t = scratch.as<double>();
    covariance_edge_table_kernel<<<cuda::grid_blocks(e.total(), kCovTableThreads, 8),
                                   kCovTableThreads, 0, st>>>(args, e);
    HS_CHECK_LAUNCH();
    for (const bool swap : {false, true}) {
      const int r = swap ? e.b : e.a, c = swap ? e.a : e.b;
      const std::int64_t r0 = row_at[static_cast<std::size_t>(r)];
      const std::int64_t c0 = col_at[static_cast<std::size_t>(c)];
      if (r0 < 0 || c0 < 0) continue;  // this order is not a block of the target
      DevEdgeBlock blk{r0, 2 * plan.sensors[static_cast<std::size_t>(r)].subapertures, c0,
                       2 * plan.sensors[static_cast<std::size_t>(c)].subapertures, swap};
      if (!out.tiled) {  // only the generated rows of a dense target
        const std::int64_t first = std::max(blk.row0, out.row_begin);
        const std::int64_t last = std::min(blk.row0 + blk.rows, out.row_end);
        if (first >= last) continue;
        blk.row0 = first;
        blk.rows = last - first;
      }
      f64 ? launch_gather<double>(args, out, e, blk, edges.get(), st)
          : launch_gather<float>(args, out, e, blk, edges.get(), st);
    }
  }
  return widest * static_cast<std::int64_t>(sizeof(double)) +
         static_cast<std::int64_t>((es.xe_x.size() + es.ye_x.size()) * 16 + es.edges.size() * 16);
}

}  // namespace halfscope::ao::detail
