// Internal (CUDA builds only): run-time knob of the FFT baseline (fft_cuda.cu), for tests.
#pragma once

#include <cstdint>

namespace halfscope::mfilter {

/// Device memory for one batch of overlap-save blocks (default tuning::kFftBatchBudgetBytes).
/// Tests lower it to force many batches (one block per batch at the least). Returns the old value.
std::int64_t set_fft_batch_budget_bytes(std::int64_t bytes);

/// The transform length fft_cuda uses for templates of K samples: the smallest power of two
/// >= max(2K, tuning::kFftMinLength).
std::int64_t fft_transform_length(std::int64_t k);

}  // namespace halfscope::mfilter
