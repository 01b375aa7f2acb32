// Full normalization with 16-bit data operands: a window whose level sits far from its channel's
// mean rounds to that level, not to its own fluctuation, and its CC is then wrong by up to
// u * sqrt(raw energy / demeaned energy). This check finds such windows before any correlation
// and reports them as a NumericalError (the backends would return the garbage clamped to +-1).
#pragma once

#include <cstdint>

#include "halfscope/core/array.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mfilter {

/// The largest accepted bound u * sqrt(raw / demeaned energy) of a window's CC error from the
/// rounding of its data operands. Measured errors are 0.05-0.35 times the bound (steps of 3 to
/// 3e4 times the noise, K = 100, docs/mfilter.md), so an accepted window errs by at most ~0.035.
inline constexpr double kLevelErrorBound = 0.1;

/// The unit roundoff of the data operands where the check applies: 2^-11 for half and mixed (the
/// FP16 operands of every method of those precisions), 2^-8 for bf16; 0 (no check) for the other
/// precisions, whose operands keep 22 bits or more.
double level_rounding_unit(Precision precision);

/// Whether check_level_rounding checks p: full normalization and level_rounding_unit > 0.
bool level_check_applies(const Prepared& p);

/// Restart span of the check's running window sums: a window's sums carry FP64 drift of at most
/// ~2 kLevelCheckSpan u_64 times the largest energy of its span, far below the demeaned energies
/// that matter (u^2 / kLevelErrorBound^2 ~ 2.4e-5 times the raw energy in FP16); every window the
/// running sums flag is recomputed directly before it is reported.
inline constexpr std::int64_t kLevelCheckSpan = 1024;

/// Checks every window of `data` (host float32 (C, n), the prepared operands: each channel minus
/// its mean, as p.data holds them; sample j is sample first_sample + j of the caller's channel)
/// when level_check_applies(p). Windows that are flat
/// by the backends' rule (their CC is 0) and, for a network stack, channels whose weight is 0 for
/// every template are skipped. Throws NumericalError naming the lowest such channel, its first
/// window over kLevelErrorBound, the bound and what to do instead.
void check_level_rounding(const Prepared& p, const Array& data, std::int64_t first_sample = 0);

}  // namespace halfscope::mfilter
