// Internal (CUDA builds only): run-time knobs of the GPU GEMM convolution (gemm_cuda.cu).
#pragma once

#include <cstdint>

namespace halfscope::conv {

/// Device bytes one chunk's patch matrix may take (default tuning::kGemmPatchBudgetBytes). Tests
/// lower it to force many chunks, including chunks shorter than one output row.
std::int64_t gemm_patch_budget_bytes();
/// Sets the budget (at least one patch row is always allowed); returns the previous value.
std::int64_t set_gemm_patch_budget_bytes(std::int64_t bytes);

}  // namespace halfscope::conv
