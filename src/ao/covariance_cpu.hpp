// Internal pieces of the CPU covariance backend (covariance_cpu.cpp, covariance_cpu_points.cpp)
// beyond the covariance_cpu declared in covariance_plan.hpp; the tests switch the tables off to
// compare the evaluation paths.
#pragma once

#include <cstdint>

#include "ao/covariance_plan.hpp"
#include "ao/vonkarman_fast.hpp"

namespace halfscope::ao::detail {

/// covariance_cpu with the tables enabled (the default: offset tables, edge-point tables) or not
/// (every element by the direct sum over layers).
void covariance_cpu_with(const CovariancePlan& plan, const CovarianceTarget& target, bool tables);

/// Whether two plan sensors qualify for the offset table: same grid, pitch and lenslet rotation,
/// and the same scale on every layer (then the layer term of two subapertures depends only on
/// their grid offset).
[[nodiscard]] bool offset_table_applies(const CovariancePlan& plan, std::int64_t a, std::int64_t b);

/// Whether the edge-point tables apply to the block of row sensor a and column sensor b: two
/// different sensors (no noise in the block) whose lenslet arrays are both unrotated (so that
/// neighbouring subapertures share their edge points).
[[nodiscard]] bool point_table_applies(const CovariancePlan& plan, std::int64_t a, std::int64_t b);

/// Writes the block of row sensor a and column sensor b (turbulence only, a != b) into `target`
/// with the edge-point tables (covariance_cpu_points.cpp), OpenMP over chunks of a's
/// subapertures. Returns false when an element is not finite.
bool covariance_block_points(const CovariancePlan& plan, const CovarianceTarget& target,
                             std::int64_t a, std::int64_t b, const LayerStructure& d);

/// Writes element (i, j) of a dense or tiled target, rounded once to its dtype.
void store_element(const CovarianceTarget& target, std::int64_t i, std::int64_t j, double v);

}  // namespace halfscope::ao::detail
