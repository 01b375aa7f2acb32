// Tuning constants of the GPU matched-filter baselines (window statistics, naive, cuBLAS, FFT,
// detection), apart from the algorithms (CUB's habit). These methods are rungs of the study's
// ladder, not the fast path (that is the tensor kernel), so the constants bound memory and keep
// every SM busy rather than chase the last percent. None was tuned by measurement yet.
#pragma once

#include <cstdint>

namespace halfscope::mfilter::tuning {

/// Threads per block and resident blocks per SM for the grid-stride helper kernels (statistics,
/// Hankel build, normalization, detection): one full wave of 2048 threads per SM.
inline constexpr int kThreads = 256;
inline constexpr int kBlocksPerSm = 8;

/// Consecutive window starts owned by one thread of window_stats: one direct (compensated) K-sum,
/// then O(1) FP64 updates. 64 keeps the direct sums at K/64 reads per window while a 4.32e6-
/// sample channel still has 67k runs (a quarter wave of an H100 per channel is enough: the
/// kernel is a small part of every method).
inline constexpr std::int64_t kWindowRun = 64;

/// Naive kernel: threads per block (consecutive correlation times of one template), template
/// samples staged in shared memory per pass, and the shared data tile's cap in floats (32 KiB
/// with the template slice: two blocks per SM fit in the default 48 KiB per block). Steps whose
/// tile ((threads - 1) * step + pass) exceeds the cap read the data from global memory instead:
/// neighbours then share no samples anyway.
inline constexpr int kNaiveThreads = 128;
inline constexpr std::int64_t kNaivePass = 256;
inline constexpr std::int64_t kNaiveTileCap = 8192;

/// Default device memory for one chunk of the explicit observation (Hankel) matrix plus its GEMM
/// output. The study's case (4.32e6 x 256 FP32 = 4.4 GB) then takes 5 chunks of ~1e6 rows, each
/// far beyond what cuBLAS needs to fill the GPU. Adjustable at run time for tests
/// (cublas_cuda.hpp).
inline constexpr std::int64_t kCublasMatrixBudgetBytes = std::int64_t{1} << 30;

/// FFT overlap-save: the smallest transform length (a power of two, >= 2K is also enforced) so
/// short templates do not pay a launch per few hundred outputs, and the device memory for one
/// batch of blocks (data blocks, spectra, products and inverse transforms of every template).
inline constexpr std::int64_t kFftMinLength = 4096;
inline constexpr std::int64_t kFftBatchBudgetBytes = std::int64_t{512} << 20;
/// Idle cuFFT plans kept per process (least recently used destroyed first).
inline constexpr std::size_t kFftMaxIdlePlans = 16;

/// Detection: capacity of the first candidate buffer; a larger one is allocated and the search
/// rerun when more candidates are found (the count is exact either way).
inline constexpr std::int64_t kCandidateCapacity = std::int64_t{1} << 16;

}  // namespace halfscope::mfilter::tuning
