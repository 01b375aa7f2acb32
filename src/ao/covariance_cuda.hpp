// Internal interface of the GPU covariance generator beyond covariance_plan.hpp: the von Karman
// table it evaluates (built on the host, plain C++, so it is also usable and testable in a build
// without CUDA) and a device evaluation of the structure function for the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "ao/covariance_plan.hpp"
#include "ao/kernels/vonkarman.cuh"

namespace halfscope::ao::detail {

/// The polynomial table of G(q) (kernels/vonkarman.cuh) and its scalars.
struct VonKarmanTable {
  std::vector<double> coefficients;  // VkLayout::interval_major: kVkIntervals x kVkStride
  std::vector<double> by_degree;     // VkLayout::degree_major: (kVkDegree + 1) x kVkIntervals
  VonKarmanScalars scalars;
  double k1 = 0;  // D_1(r; L0) = k1 L0^(5/3) G(2 pi r / L0)
};

/// Fits the table once per process (thread-safe static) from the reference functions of
/// turbulence.cpp: Chebyshev interpolation at kVkDegree + 1 nodes of every interval, in long
/// double, turned into monomial coefficients in the interval variable s.
[[nodiscard]] const VonKarmanTable& vonkarman_table();

/// The FP64 structure function D(r) (r0 = 1 m, outer scale L0) from the table, on the host:
/// the same arithmetic as the device (explicit FMA), for checks without a GPU.
[[nodiscard]] double vonkarman_structure_function_table(double r, double L0);

/// The same on the current CUDA device, for every r in `r` (tests). Throws Unsupported in a
/// build without CUDA (the stub is in covariance_cuda_table.cpp, with covariance_cuda's).
[[nodiscard]] std::vector<double> vonkarman_structure_function_cuda(const std::vector<double>& r,
                                                                    double L0);

/// What one covariance_cuda call did (for the benchmark): device times from CUDA events and the
/// split of the elements between the offset tables and the direct evaluation.
struct CovarianceCudaReport {
  double setup_ms = 0;             // uploads of the plan, the von Karman table and the slope maps
  double tables_ms = 0;            // building the offset tables
  double elements_ms = 0;          // the element kernel (writes the whole target)
  std::int64_t table_pairs = 0;    // unordered sensor pairs served by an offset table
  std::int64_t direct_pairs = 0;   // unordered sensor pairs evaluated directly
  std::int64_t edge_pairs = 0;     // of those, pairs served by edge-point tables
  double edge_ms = 0;              // the edge-point tables and their gathers (after the elements)
  std::int64_t scratch_bytes = 0;  // device scratch besides the target
};

/// How the direct pairs (sensors without a shared offset table) are computed: `element` evaluates
/// 4 structure functions per layer and element (covariance_terms.cuh); `edge` (the default) builds
/// layer-summed tables over the edge points of both sensors and gathers 4 entries per element
/// (kernels/covariance_edges.cuh), for the pairs whose lenslet arrays are both unrotated (the
/// others stay on `element`).
enum class DirectPath : std::uint8_t { element, edge };

/// A version of the element kernel (all kept reachable so the benchmark shows the ladder; the
/// defaults are what covariance_cuda runs, chosen by the measurements in covariance_tuning.hpp).
struct CovarianceCudaVariant {
  VkLayout layout = VkLayout::degree_major;  // the structure-function table's layout
  int warp_fast_lanes = kCovWarpFastLanes;   // 32 (a warp is 32 x 1 elements) or 8 (8 x 4)
  DirectPath direct = DirectPath::edge;      // the direct pairs' path
};

/// covariance_cuda, filling `report` when not null, with the element kernel `variant`. Throws
/// Unsupported without CUDA, InvalidInput for a variant that does not exist.
void covariance_cuda_report(const CovariancePlan& plan, const CovarianceTarget& target,
                            CovarianceCudaReport* report,
                            const CovarianceCudaVariant& variant = {});

}  // namespace halfscope::ao::detail
