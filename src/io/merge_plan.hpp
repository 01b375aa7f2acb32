// Internal: merge_traces (halfscope/io/waveform.hpp) as a plan over the segments' metadata alone,
// so that a reader that has not decoded the samples (MiniSEED by windows, seismic_windows.cpp)
// places every sample exactly where merge_traces places it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/core/dtype.hpp"
#include "halfscope/io/waveform.hpp"

namespace halfscope::io::detail {

/// What merging needs of one segment.
struct TraceMeta {
  std::string id;
  std::int64_t start_ns = 0;
  double sample_rate = 0.0;
  DType dtype = DType::f32;
  std::int64_t size = 0;
};

/// Samples [begin, end) of input segment `input`, or (input < 0) a run of end - begin zeros.
struct PlanPiece {
  std::int64_t input = -1;
  std::int64_t begin = 0, end = 0;
};

/// One output trace: the metadata of input `head` (its first segment) and its pieces in order.
struct PlannedTrace {
  std::int64_t head = 0;
  std::int64_t count = 0;
  std::vector<PlanPiece> pieces;
};

struct MergePlan {
  std::vector<PlannedTrace> traces;
  std::vector<Gap> gaps;
};

/// merge_traces' joining, gaps and overlaps over metadata (segments of size 0 skipped; rates are
/// not checked here). InvalidInput as merge_traces for zero-filling beyond 2^28 samples.
MergePlan plan_merge(const std::vector<TraceMeta>& in, bool fill_gaps_with_zero);

}  // namespace halfscope::io::detail
