// Tuning constants of the cuDNN convolution method (src/conv/cudnn_cuda.cu).
#pragma once

#include <cstdint>

namespace halfscope::conv::tuning {

/// Largest workspace an algorithm of the cudnn method may use. cuDNN's implicit-GEMM algorithms
/// for one channel need none or a few MB; the cap only keeps the algorithm search
/// (cudnnFindConvolutionForwardAlgorithmEx, which allocates the largest candidate's workspace)
/// from taking a large share of the device for a slower algorithm.
inline constexpr std::int64_t kCudnnWorkspaceCapBytes = std::int64_t{256} << 20;

/// Threads per block and blocks per SM of the extension and non-finite count kernels: copy-like
/// grid-stride kernels, sized as the FFT method's (kernels/fft_tuning.hpp says why).
inline constexpr int kCudnnThreads = 256;
inline constexpr int kCudnnBlocksPerSm = 8;

}  // namespace halfscope::conv::tuning
