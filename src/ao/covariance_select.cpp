// Parts of a covariance generated on the CPU (src/ao/covariance_select.hpp): a CovarianceTarget
// with a selection (covariance_plan.hpp) handed to the CPU backend, which skips the work units of
// the tiles / rows left out and evaluates the others exactly as for the whole matrix.
#include "ao/covariance_select.hpp"

#include <string>

#include "ao/covariance_plan.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {

void covariance_tiles_selected(const AoSystem& system, CovarianceKind kind,
                               const linalg::TileLayout& layout, const std::vector<float*>& tiles,
                               bool noise) {
  const auto expected = layout.tile_rows() * layout.tile_cols();
  if (static_cast<std::int64_t>(tiles.size()) != expected)
    throw InvalidInput("covariance_tiles_selected: tiles: expected one pointer per tile (" +
                       std::to_string(layout.tile_rows()) + " x " +
                       std::to_string(layout.tile_cols()) + " = " + std::to_string(expected) +
                       "), found " + std::to_string(tiles.size()));
  const CovariancePlan plan = make_covariance_plan(system, noise);
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = layout.rows();
  target.cols = layout.cols();
  target.tiles = &layout;
  // float* -> void*: the backend writes through the pointer typed by target.dtype.
  const std::vector<void*> data(tiles.begin(), tiles.end());
  target.tile_data = data.data();
  covariance_cpu(plan, target);  // checks the layout against the system and the kind
}

void covariance_rows_selected(const AoSystem& system, CovarianceKind kind, std::int64_t row_begin,
                              std::int64_t row_end, float* out, bool noise) {
  const CovariancePlan plan = make_covariance_plan(system, noise);
  CovarianceTarget target;
  target.kind = kind;
  target.dtype = DType::f32;
  target.rows = covariance_rows(system, kind);
  target.cols = covariance_cols(system, kind);
  target.data = out;
  target.row_begin = row_begin;
  target.row_end = row_end;
  covariance_cpu(plan, target);  // checks the kind (ctm) and the range
}

}  // namespace halfscope::ao::detail
