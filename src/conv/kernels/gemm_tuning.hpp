// Tuning constants of the GPU GEMM (im2col + cuBLAS) convolution, src/conv/gemm_cuda.cu. This
// method is a rung of the study's ladder, not a fast path, so the constants bound memory rather
// than chase speed. None was measured on a GPU yet.
#pragma once

#include <cstdint>

namespace halfscope::conv::tuning {

/// Default device memory for one chunk's patch matrix (output pixels x kernel taps). 1 GiB keeps
/// a 4096x4096 image with a 65x65 FP32 kernel (283 GB of patches in all) to ~270 chunks of
/// ~15 output rows, each large enough (~62k pixels) to fill the GPU, while leaving the rest of
/// an 80 GB card to the caller. Adjustable at run time (gemm_cuda.hpp) for tests.
inline constexpr std::int64_t kGemmPatchBudgetBytes = std::int64_t{1} << 30;

/// Threads per block of the im2col and finiteness kernels, and resident blocks per SM of their
/// grid-stride grids: one full wave of 2048 threads per SM (as in fft_tuning.hpp).
inline constexpr int kGemmThreads = 256;
inline constexpr int kGemmBlocksPerSm = 8;

/// Patch rows are padded to a multiple of 16 bytes (the leading dimension) so every row starts
/// aligned: cuBLAS picks its vectorised and tensor-core kernels only for aligned leading
/// dimensions. The padding is never read (k = taps).
inline constexpr std::int64_t kGemmRowAlignBytes = 16;

}  // namespace halfscope::conv::tuning
