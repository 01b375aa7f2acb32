// `halfscope bench covariance`: generation time and accuracy of the AO slope covariance matrices
// (issue 5) for the built-in systems, on the GPU and the CPU, in the one benchmark schema
// (report.hpp). The target: the E-ELT Cmm (n = 100,368, 60 layers) in at most 1 s on an H100 /
// H200, FP64-accurate.
//
// What is timed: the backend call (covariance_plan.hpp: covariance_cuda / covariance_cpu) writing
// into preallocated storage (lower tiles for Cmm and Ctt, full tiles for Ctm, or a dense matrix),
// with the plan made once beforehand (its host time is a parameter of the case). The first call is
// reported apart (it fits the von Karman table and warms the memory pool); then `repeats` calls,
// median / min / max. GPU rows also carry the CUDA-event split (uploads, offset tables, element
// kernel). Accuracy: `samples` entries drawn at random from the stored part (a tenth of them on
// or next to the diagonal), each against covariance_entry (the direct FP64 evaluation with the
// reference structure function): max relative error (entries with |C| > 0), max absolute error,
// and max error scaled by sqrt(C_ii C_jj) (the correlation scale; the far-apart entries are
// strong cancellations whose relative error says little). The target case (E-ELT Cmm, 60 layers,
// FP64 storage) counts as met when its median is <= 1 s and its max scaled error is <= 1e-12: a
// threshold 100x above the FP64 generators' measured 1e-14 and far below FP32 storage's 6e-8, so
// that a fast but FP32-accurate run cannot pass. Rates: MOAO's flop model per computed element
// (30 + 115 L for Cmm, 30 + 103 L for Ctm, 30 + 90 L for Ctt; L layers) over the elements
// computed (the lower triangle of Cmm / Ctt, all of Ctm), so rates compare with the study's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "halfscope/ao/covariance.hpp"
#include "halfscope/bench/report.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/dtype.hpp"

namespace halfscope::bench {

/// What to measure: every combination of system x layers x kind x device x dtype.
struct CovBenchOptions {
  std::vector<std::string> systems = {"check", "mid", "eelt"};  // ao_preset names
  std::vector<int> layers = {10, 60};
  std::vector<ao::CovarianceKind> kinds = {ao::CovarianceKind::cmm};
  std::vector<DeviceKind> devices = {DeviceKind::Cuda};  // Cpu and / or Cuda
  std::vector<DType> dtypes = {DType::f32, DType::f64};  // f32 and / or f64
  /// GPU structure-function table layouts to compare: "degree-major" (the default of the
  /// library) and / or "interval-major" (the first version; src/ao/kernels/vonkarman.cuh).
  std::vector<std::string> table_layouts = {"degree-major"};
  /// GPU element-kernel warp shapes to compare: elements a warp covers along the storage's
  /// contiguous direction, 8 (8 x 4) and / or 32 (32 x 1); 0: the library's default.
  std::vector<int> warp_fast_lanes = {0};
  /// GPU path of the sensor pairs without an offset table: "edge" (edge-point tables, the
  /// library's default) and / or "element" (the earlier per-element kernel).
  std::vector<std::string> direct_paths = {"edge"};
  std::int64_t tile = 1024;  // tile size of the tiled target; 0: a dense matrix
  int repeats = 5;           // timed calls after the first
  int samples = 2000;        // sampled entries checked against covariance_entry
  /// The CPU backend on the E-ELT system (n = 100,368) takes far too long: such cases are
  /// recorded as skipped unless this is set.
  bool cpu_eelt = false;
  std::function<void(const std::string&)> progress;
};

/// Runs the cases (GPU cases need CUDA: Unsupported otherwise). The report's device is the GPU
/// when a GPU case is requested, else the CPU; each case names its own device in params.
BenchReport run_covariance_bench(const CovBenchOptions& options);

}  // namespace halfscope::bench
