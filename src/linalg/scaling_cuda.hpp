// Device loops of the Cholesky's power-of-two scaling (src/linalg/scaling.hpp; internal header,
// CUDA builds only). Tile column j of a lower tile storage starts at start[j] with its w x w
// diagonal tile (w = width[j]) and ends at end[j]. Both run on the device holding `base`, on a
// stream of their own that first waits for the legacy default stream, and synchronise it.
#pragma once

#include <cstdint>
#include <vector>

namespace halfscope::linalg::detail {

/// The largest diagonal entry (NaN skipped; -inf when there is none).
double max_diagonal_cuda(const float* base, const std::vector<std::int64_t>& start,
                         const std::vector<std::int64_t>& width);

/// Multiplies every entry on and below the diagonal by 2^e in place.
void scale_lower_cuda(float* base, const std::vector<std::int64_t>& start,
                      const std::vector<std::int64_t>& width, const std::vector<std::int64_t>& end,
                      int e);

}  // namespace halfscope::linalg::detail
