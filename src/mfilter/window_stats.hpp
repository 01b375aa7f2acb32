// FP64 window energies of the CPU backends: one inverse norm per window start, 0 for a flat
// window (backends.hpp's rule), computed with compensated running sums restarted every
// kRecomputeEvery windows.
#pragma once

#include <cstdint>

#include "halfscope/mfilter.hpp"

namespace halfscope::mfilter {

/// Windows between fresh (direct) sums of the running window energy. The running sums are
/// Neumaier-compensated: over one restart span they add and remove at most n = 2 R + K terms, so
/// the computed sum of squares errs by at most 2u |sum| + O(n u^2) sum|terms| (u = 2^-53), i.e.
/// a window energy E errs by about 2u (1 + n u) times the energy of the span it was derived
/// from. With R = 4096 and stationary data this is below 1e-15 E * (1 + R/K), far below the
/// float32 output's 6e-8; after a loud transient the restart bounds how long it can matter.
inline constexpr std::int64_t kRecomputeEvery = 4096;

/// inv_norm[s] = 1 / sqrt(E_S(s)) for s = 0 .. L - K (FP64), or 0 when the window is flat:
/// short normalization: every sample zero (tracked exactly by a count of non-zero samples);
/// full normalization: every sample equal (tracked exactly by run lengths), or the demeaned
/// energy <= kFlatRelative times the raw sum of squares. Full normalization shifts each restart
/// span by its first sample before summing, which removes the cancellation a large offset would
/// otherwise cause in sum y^2 - (sum y)^2 / K. Requires K <= L.
/// `offset` is what dispatch subtracted from the channel before rounding (its FP64 mean in full
/// normalization, in the channel's scaled units; 0 otherwise): the flat rule's raw sum of squares
/// is taken over x + offset, the caller's samples, so removing the mean changes no flat
/// decision (sum (x + c)^2 = sum x^2 + 2 c sum x + K c^2 with the caller's window).
void window_inv_norms(const float* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double* inv_norm, double offset = 0.0);
void window_inv_norms(const double* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double* inv_norm, double offset = 0.0);

/// The same for windows [first, first + count) only, into inv_norm[0 .. count): each value equals
/// the whole range's bit for bit (the running sums restart at `first` as they do over every
/// window, and the exact flatness trackers start from their values there), so a caller can hold
/// the windows of one stretch of time at a time. Error unless `first` is a multiple of
/// kRecomputeEvery and the range lies within the L - K + 1 windows.
void window_inv_norms(const float* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double offset, std::int64_t first, std::int64_t count, double* inv_norm);
void window_inv_norms(const double* x, std::int64_t L, std::int64_t K, MfNormalize normalize,
                      double offset, std::int64_t first, std::int64_t count, double* inv_norm);

/// 1 / sqrt(sum_k t[k]^2) of one template channel in FP64 (dispatch has already demeaned it in
/// full normalization and zeroed it when flat), 0 for an all-zero template.
double template_inv_norm(const float* t, std::int64_t K);
double template_inv_norm(const double* t, std::int64_t K);

}  // namespace halfscope::mfilter
