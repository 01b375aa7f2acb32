// `halfscope bench covariance` (include/halfscope/bench/covariance_bench.hpp).
#include "halfscope/bench/covariance_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ao/covariance_cuda.hpp"
#include "ao/covariance_plan.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/tiles.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void say(const CovBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

/// The storage of one case: tiles (lower for Cmm / Ctt, full for Ctm) or a dense matrix.
struct CaseStorage {
  linalg::TileMatrix tiles;
  Array dense;
  bool tiled = false;
  ao::detail::CovarianceTarget target;

  CaseStorage(ao::CovarianceKind kind, std::int64_t rows, std::int64_t cols, std::int64_t nb,
              DType dtype, Memory memory) {
    target.kind = kind;
    target.dtype = dtype;
    target.rows = rows;
    target.cols = cols;
    tiled = nb > 0;
    if (tiled) {
      const auto fill =
          kind == ao::CovarianceKind::ctm ? linalg::TileFill::full : linalg::TileFill::lower;
      tiles = linalg::TileMatrix(linalg::TileLayout(rows, cols, nb, fill), dtype, memory);
      target.data = tiles.storage.data();
      target.tiles = &tiles.layout;
    } else {
      dense = Array(dtype, {rows, cols}, memory);
      target.data = dense.data();
    }
  }
  [[nodiscard]] bool stored(std::int64_t i, std::int64_t j) const {
    return !tiled ||
           tiles.layout.stored(i / tiles.layout.tile_size(), j / tiles.layout.tile_size());
  }
  [[nodiscard]] std::int64_t offset(std::int64_t i, std::int64_t j) const {
    return tiled ? tiles.layout.element_offset(i, j) : i * target.cols + j;
  }
  [[nodiscard]] std::int64_t bytes() const {
    const std::int64_t n = tiled ? tiles.layout.element_count() : target.rows * target.cols;
    return n * static_cast<std::int64_t>(target.dtype == DType::f64 ? 8 : 4);
  }
  /// Element (i, j) as a double, from host or device memory.
  [[nodiscard]] double at(std::int64_t i, std::int64_t j, bool device) const {
    const std::int64_t off = offset(i, j);
    const std::size_t size = target.dtype == DType::f64 ? 8 : 4;
    const auto* src = static_cast<const char*>(target.data) + off * static_cast<std::int64_t>(size);
    double d = 0;
    float f = 0;
    void* dst = target.dtype == DType::f64 ? static_cast<void*>(&d) : static_cast<void*>(&f);
    if (device) {
#if HALFSCOPE_WITH_CUDA
      HS_CUDA_CHECK(cudaMemcpy(dst, src, size, cudaMemcpyDeviceToHost));
#endif
    } else {
      std::copy(src, src + size, static_cast<char*>(dst));
    }
    return target.dtype == DType::f64 ? d : static_cast<double>(f);
  }
};

/// Accuracy on sampled stored entries against the direct FP64 evaluation (covariance_entry on the
/// plan made once: rebuilding the plan per entry would dominate). The diagonal entries that scale
/// the errors are cached: each reference entry costs 4 L evaluations of the reference structure
/// function (~5 ms at 60 layers).
std::map<std::string, double> sampled_errors(const ao::detail::CovariancePlan& plan,
                                             ao::CovarianceKind kind, const CaseStorage& s,
                                             bool device, int samples) {
  using ao::CovarianceKind;
  std::mt19937_64 rng(0xC0FA + static_cast<std::uint64_t>(s.target.rows));
  std::uniform_int_distribution<std::int64_t> ri(0, s.target.rows - 1), cj(0, s.target.cols - 1);
  std::uniform_int_distribution<std::int64_t> near(-3, 3);
  const bool symmetric = kind != CovarianceKind::ctm;
  // Diagonal of the row side (Cmm, or Ctt for truth rows) and of the column side.
  const CovarianceKind row_diag = kind == CovarianceKind::cmm ? kind : CovarianceKind::ctt;
  const CovarianceKind col_diag = kind == CovarianceKind::ctt ? kind : CovarianceKind::cmm;
  std::map<std::pair<int, std::int64_t>, double> diagonal;
  const auto diag = [&](CovarianceKind k, std::int64_t i) {
    const auto key = std::make_pair(static_cast<int>(k), i);
    const auto it = diagonal.find(key);
    if (it != diagonal.end()) return it->second;
    return diagonal[key] = ao::detail::covariance_entry(plan, k, i, i);
  };
  double max_rel = 0, max_abs = 0, max_scaled = 0;
  for (int k = 0; k < samples; ++k) {
    std::int64_t i = ri(rng), j = cj(rng);
    if (k % 10 == 0) j = std::clamp<std::int64_t>(i + near(rng), 0, s.target.cols - 1);
    if (symmetric && !s.stored(i, j)) std::swap(i, j);
    if (!s.stored(i, j)) continue;
    const double got = s.at(i, j, device);
    const double ref = ao::detail::covariance_entry(plan, kind, i, j);
    const double e = std::fabs(got - ref);
    max_abs = std::max(max_abs, e);
    if (ref != 0) max_rel = std::max(max_rel, e / std::fabs(ref));
    max_scaled =
        std::max(max_scaled, e / std::sqrt(std::fabs(diag(row_diag, i) * diag(col_diag, j))));
  }
  return {{"max_rel", max_rel}, {"max_abs", max_abs}, {"max_scaled", max_scaled}};
}

std::string kind_text(ao::CovarianceKind k) {
  return std::string(ao::covariance_kind_name(k));
}

#if HALFSCOPE_WITH_CUDA
std::int64_t device_used_bytes() {
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(total - free);
}
#endif

BenchCase run_case(const CovBenchOptions& o, const std::string& name, int layers,
                   ao::CovarianceKind kind, DeviceKind device, DType dtype,
                   const std::string& table_layout, int lanes, const std::string& direct) {
  BenchCase c;
  c.implementation = "halfscope";
  c.method = device == DeviceKind::Cuda ? "cuda" : "cpu";
  c.precision = dtype == DType::f64 ? "double" : "single";  // storage; computed in FP64
  c.params["system"] = name;
  c.params["layers"] = static_cast<std::int64_t>(layers);
  c.params["kind"] = kind_text(kind);
  c.params["device"] = c.method;
  c.params["compute"] = std::string("fp64");
  ao::detail::CovarianceCudaVariant variant;
  variant.layout = table_layout == "interval-major" ? ao::detail::VkLayout::interval_major
                                                    : ao::detail::VkLayout::degree_major;
  if (lanes != 0) variant.warp_fast_lanes = lanes;
  variant.direct =
      direct == "element" ? ao::detail::DirectPath::element : ao::detail::DirectPath::edge;
  if (device == DeviceKind::Cuda) {
    c.params["direct_path"] = direct;
    c.params["table_layout"] = table_layout;
    c.params["warp_shape"] = std::to_string(variant.warp_fast_lanes) + "x" +
                             std::to_string(32 / variant.warp_fast_lanes);
  }
  const ao::AoSystem system = ao::ao_preset(name, layers);
  const std::int64_t rows = ao::covariance_rows(system, kind);
  const std::int64_t cols = ao::covariance_cols(system, kind);
  c.params["rows"] = rows;
  c.params["cols"] = cols;
  c.params["tile"] = o.tile;
  c.params["layout"] = std::string(o.tile <= 0                       ? "dense"
                                   : kind == ao::CovarianceKind::ctm ? "full-tiles"
                                                                     : "lower-tiles");
  const bool target_case =
      name == "eelt" && layers == 60 && kind == ao::CovarianceKind::cmm && dtype == DType::f64;
  c.params["target"] = target_case;
  if (device == DeviceKind::Cpu && name == "eelt" && !o.cpu_eelt) {
    c.params["skipped"] = std::string(
        "CPU backend on the E-ELT system takes far too long (pass --cpu-eelt to run it)");
    return c;
  }
  const auto t_plan = Clock::now();
  const ao::detail::CovariancePlan plan = ao::detail::make_covariance_plan(system, true);
  c.params["plan_ms"] = ms_since(t_plan);

  const bool gpu = device == DeviceKind::Cuda;
#if HALFSCOPE_WITH_CUDA
  const std::int64_t used_before = gpu ? device_used_bytes() : 0;
#else
  if (gpu) throw Unsupported("bench covariance: --device cuda needs CUDA; this build has none");
#endif
  CaseStorage storage(kind, rows, cols, o.tile, dtype, gpu ? Memory::device : Memory::host);
  c.params["output_bytes"] = storage.bytes();
  std::vector<double> wall, setup, tables, elements, edge;
  ao::detail::CovarianceCudaReport rep;
  for (int r = 0; r <= o.repeats; ++r) {
    const auto t0 = Clock::now();
    if (gpu)
      ao::detail::covariance_cuda_report(plan, storage.target, &rep, variant);
    else
      ao::detail::covariance_cpu(plan, storage.target);
    const double ms = ms_since(t0);
    if (r == 0) {
      c.params["first_call_ms"] = ms;
#if HALFSCOPE_WITH_CUDA
      if (gpu) c.params["peak_device_bytes"] = device_used_bytes() - used_before;
#endif
      continue;
    }
    wall.push_back(ms);
    setup.push_back(rep.setup_ms);
    tables.push_back(rep.tables_ms);
    elements.push_back(rep.elements_ms);
    edge.push_back(rep.edge_ms);
  }
  c.stats = compute_stats(wall);
  c.GBps = gbps(static_cast<double>(storage.bytes()), c.stats.median_ms);
  if (gpu) {
    c.params["setup_ms"] = compute_stats(setup).median_ms;
    c.params["tables_ms"] = compute_stats(tables).median_ms;
    c.params["elements_ms"] = compute_stats(elements).median_ms;
    c.params["table_pairs"] = rep.table_pairs;
    c.params["direct_pairs"] = rep.direct_pairs;
    c.params["edge_pairs"] = rep.edge_pairs;
    c.params["edge_ms"] = compute_stats(edge).median_ms;
    c.params["scratch_bytes"] = rep.scratch_bytes;
  }
  // MOAO's flop model per computed element (covariance_bench.hpp), for rates like the study's.
  const double per_element = kind == ao::CovarianceKind::cmm   ? 30.0 + 115.0 * layers
                             : kind == ao::CovarianceKind::ctm ? 30.0 + 103.0 * layers
                                                               : 30.0 + 90.0 * layers;
  const double computed = kind == ao::CovarianceKind::ctm
                              ? static_cast<double>(rows) * static_cast<double>(cols)
                              : static_cast<double>(rows) * static_cast<double>(rows + 1) / 2.0;
  c.params["model_flops"] = per_element * computed;
  c.TFLOPs = per_element * computed / (c.stats.median_ms * 1e-3) / 1e12;
  say(o, name + " " + std::to_string(layers) + " layers " + kind_text(kind) + " " + c.method + " " +
             c.precision + ": median " + std::to_string(c.stats.median_ms) + " ms; checking " +
             std::to_string(o.samples) + " sampled entries");
  c.params["samples"] = static_cast<std::int64_t>(o.samples);
  c.error = sampled_errors(plan, kind, storage, gpu, o.samples);
  if (target_case) {
    const auto scaled = c.error.find("max_scaled");
    c.params["met_1s"] = c.stats.median_ms <= 1000.0 && o.samples > 0 && scaled != c.error.end() &&
                         scaled->second <= 1e-12;
  }
  return c;
}

}  // namespace

BenchReport run_covariance_bench(const CovBenchOptions& o) {
  if (o.repeats < 1) throw InvalidInput("bench covariance: repeats must be >= 1");
  if (o.samples < 0) throw InvalidInput("bench covariance: samples must be >= 0");
  for (const std::string& l : o.table_layouts)
    if (l != "degree-major" && l != "interval-major")
      throw InvalidInput(
          "bench covariance: table layout must be degree-major or interval-major, "
          "found '" +
          l + "'");
  if (o.table_layouts.empty() || o.warp_fast_lanes.empty())
    throw InvalidInput("bench covariance: at least one table layout and warp shape are needed");
  for (const int l : o.warp_fast_lanes)
    if (l != 0 && l != 8 && l != 32)
      throw InvalidInput("bench covariance: warp shape must be 8 (8x4) or 32 (32x1), found " +
                         std::to_string(l));
  for (const DType d : o.dtypes)
    if (d != DType::f32 && d != DType::f64)
      throw InvalidInput("bench covariance: dtype must be f32 or f64, found " +
                         std::string(dtype_name(d)));
  for (const std::string& d : o.direct_paths)
    if (d != "edge" && d != "element")
      throw InvalidInput("bench covariance: direct path must be edge or element, found '" + d +
                         "'");
  if (o.direct_paths.empty())
    throw InvalidInput("bench covariance: at least one direct path is needed");
  const std::vector<std::string>& paths = o.direct_paths;
  const bool any_gpu =
      std::find(o.devices.begin(), o.devices.end(), DeviceKind::Cuda) != o.devices.end();
  BenchReport report =
      BenchReport::start("covariance", any_gpu ? describe_cuda_device(0) : describe_cpu());
  for (const std::string& name : o.systems)
    for (const int layers : o.layers)
      for (const ao::CovarianceKind kind : o.kinds)
        for (const DeviceKind device : o.devices)
          for (const DType dtype : o.dtypes)
            for (const std::string& layout : o.table_layouts)
              for (const int lanes : o.warp_fast_lanes)
                for (const std::string& direct : paths) {
                  // The CPU backend has no GPU variants: one case.
                  if (device == DeviceKind::Cpu &&
                      (layout != o.table_layouts.front() || lanes != o.warp_fast_lanes.front() ||
                       direct != paths.front()))
                    continue;
                  say(o, "covariance: " + name + ", " + std::to_string(layers) + " layers, " +
                             kind_text(kind) + ", " +
                             (device == DeviceKind::Cuda ? "cuda" : "cpu") + ", " +
                             std::string(dtype_name(dtype)) + ", " + layout + ", lanes " +
                             std::to_string(lanes) + ", direct path " + direct);
                  report.cases.push_back(
                      run_case(o, name, layers, kind, device, dtype, layout, lanes, direct));
                }
  return report;
}

}  // namespace halfscope::bench
