// Internal (CUDA builds only): run-time knob of the cuBLAS baselines (cublas_cuda.cu), for tests.
#pragma once

#include <cstdint>

namespace halfscope::mfilter {

/// Device memory for one chunk of the explicit observation matrix plus its GEMM output (default
/// tuning::kCublasMatrixBudgetBytes). Tests lower it to force many chunks. Returns the old value.
std::int64_t set_cublas_matrix_budget_bytes(std::int64_t bytes);

}  // namespace halfscope::mfilter
