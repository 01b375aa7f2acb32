// CPU direct matched filtering: the FP64 reference and FP32 with OpenMP; the low-precision
// emulations live in direct_lowp_cpu.cpp. Shared loop and normalization: direct_cpu_common.hpp.
#include <algorithm>
#include <atomic>
#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/direct_cpu_common.hpp"

namespace halfscope::mfilter {

namespace {

// sum_k a[k] x[k] in Acc with kLanes interleaved partial sums (lane k mod kLanes), added pairwise
// at the end: the compiler vectorizes it without reassociating anything itself, and the error
// bound only improves on a single running sum's gamma_K (each lane sums K / kLanes terms).
template <class Acc, class T>
Acc lane_dot(const T* a, const T* x, std::int64_t K) {
  constexpr std::int64_t kLanes = 8;
  Acc lane[kLanes] = {};
  std::int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes)
    for (std::int64_t j = 0; j < kLanes; ++j) lane[j] += static_cast<Acc>(a[k + j]) * x[k + j];
  for (; k < K; ++k) lane[k % kLanes] += static_cast<Acc>(a[k]) * x[k];
  for (std::int64_t w = kLanes / 2; w > 0; w /= 2)
    for (std::int64_t j = 0; j < w; ++j) lane[j] += lane[j + w];
  return lane[0];
}

// FP64: numerators are plain FP64 dot products (error gamma_K(2^-53) relative to
// sqrt(E_T E_S), far below the float32 output rounding).
void direct_double(const HostProblem& p) {
  const Dims& d = p.dims;
  const double* tp = p.templates->data_as<double>();
  const double* xp = p.data->data_as<double>();
  cpu::correlate(p, tp, xp, [&](std::int64_t t, std::int64_t c, std::int64_t s) {
    return lane_dot<double>(tp + (t * d.channels + c) * d.length, xp + c * d.samples + s, d.length);
  });
}

// FP32: float products accumulated in float (within the gamma_K(2^-24) of the tests' bound);
// energies stay FP64 (backends.hpp).
void direct_single(const HostProblem& p) {
  const Dims& d = p.dims;
  const float* tp = p.templates->data_as<float>();
  const float* xp = p.data->data_as<float>();
  cpu::correlate(p, tp, xp, [&](std::int64_t t, std::int64_t c, std::int64_t s) {
    return static_cast<double>(
        lane_dot<float>(tp + (t * d.channels + c) * d.length, xp + c * d.samples + s, d.length));
  });
}

std::atomic<std::int64_t> g_norm_span_override{0};

}  // namespace

namespace cpu {

std::int64_t norm_span(const Dims& d, std::int64_t moveout_spread) {
  if (const std::int64_t forced = g_norm_span_override.load(); forced > 0) return forced;
  // Each span recomputes its windows from a restart up to kRecomputeEvery before its first and
  // the moveout spread beyond its last: a span at least that long at most doubles that work.
  const std::int64_t reach = (moveout_spread + kRecomputeEvery + d.step - 1) / d.step;
  return std::max(kNormSpan, (reach + kTimeBlock - 1) / kTimeBlock * kTimeBlock);
}

void set_norm_span_for_testing(std::int64_t corr) {
  g_norm_span_override.store(corr);
}

}  // namespace cpu

void direct_cpu(const HostProblem& problem, Precision precision) {
  switch (precision) {
    case Precision::Double:
      return direct_double(problem);
    case Precision::Single:
      return direct_single(problem);
    case Precision::Half:
    case Precision::Mixed:
    case Precision::BF16:
    case Precision::Split:
      return cpu::direct_lowp_cpu(problem, precision);
    case Precision::TF32:
      break;
  }
  throw Unsupported("matched filtering: the CPU direct method does not run precision " +
                    std::string(precision_name(precision)));
}

}  // namespace halfscope::mfilter
