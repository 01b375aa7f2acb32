// Internal: the backends dispatch calls. Every function takes arrays already in the precision's
// storage dtype (storage_dtype(p): f64, f32, f16 as Half, bf16 as BFloat16), C-contiguous, the
// image (rows x cols) and the kernel (krows x kcols, flipped for correlation) and writes `out`
// (out_rows x out_cols, same dtype, allocated by the caller) as geometry.hpp defines.
// Which precisions each method takes is one table in conv.cpp (conv_supported_precisions);
// dispatch checks it before calling, and a backend handed another precision throws Unsupported.
#pragma once

#include "conv/geometry.hpp"
#include "conv/separable.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/precision.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope::conv {

// CPU (host arrays). Direct: OpenMP over output rows, vectorizable inner loops; `Half` arithmetic
// is emulated with every operation rounded. FFT: FFTW (double, single; half/mixed/bf16 as below).
void direct_cpu(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                Array& out);
void fft_cpu(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out);

#if HALFSCOPE_WITH_CUDA
// GPU (device arrays), enqueued on `stream`; each checks every CUDA call and launch.
void naive_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
                cudaStream_t stream);
void register_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                   Array& out, cudaStream_t stream);
void fft_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
              cudaStream_t stream);
void gemm_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
               cudaStream_t stream);
void tensor_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                 Array& out, cudaStream_t stream);
// Low-rank kernels as 1-D passes (separable.hpp): double, single, mixed, bf16. `factors` as
// factor_separable gave them for this kernel, or null to factor it here (a device kernel is read
// back); a kernel that needs more than kSeparableMaxRank terms is Unsupported.
void separable_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                    Array& out, cudaStream_t stream, const SeparableFactors* factors);
#if HALFSCOPE_WITH_CUDNN
// cuDNN (cudnn_cuda.cu): single, half, mixed; builds with cuDNN found at configure time only.
void cudnn_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
                cudaStream_t stream);
#endif
#endif

}  // namespace halfscope::conv
