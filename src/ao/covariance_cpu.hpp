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

/// Writes element (i, j) of a dense or tiled target, rounded once to its dtype; nothing when the
/// target's selection (tile_data, row range) leaves it out.
void store_element(const CovarianceTarget& target, std::int64_t i, std::int64_t j, double v);

/// Where stored tile (ti, tj) of a tiled target is written, or null when its tile_data leaves the
/// tile out.
template <class T>
T* target_tile(const CovarianceTarget& target, std::int64_t ti, std::int64_t tj) {
  if (target.tile_data != nullptr)
    return static_cast<T*>(target.tile_data[ti * target.tiles->tile_cols() + tj]);
  return static_cast<T*>(target.data) + target.tiles->tile_offset(ti, tj);
}

/// The end of the target's row range (its rows when it has none).
inline std::int64_t target_row_end(const CovarianceTarget& target) noexcept {
  return target.row_end < 0 ? target.rows : target.row_end;
}

/// Whether the target generates any element of rows [i0, i1) x columns [j0, j1).
[[nodiscard]] bool target_wants(const CovarianceTarget& target, std::int64_t i0, std::int64_t i1,
                                std::int64_t j0, std::int64_t j1);

}  // namespace halfscope::ao::detail
