// GPU GEMM convolution (backends.hpp: gemm_cuda), the study's cuBLAS method: im2col writes the
// explicit patch matrix of a chunk of output pixels (pixels x krows*kcols), then cublasGemmEx
// multiplies it by the kernel (as a vector) straight into the output. One output channel makes
// the product GEMV-shaped (n = 1), so this is a rung of the ladder for the benchmark, bound by
// writing and reading the patches, not a fast method (kernels/im2col.cuh has the floors).
//
// Variants by precision (cublasGemmEx types / compute type):
//   double  FP64 / CUBLAS_COMPUTE_64F          single FP32 / CUBLAS_COMPUTE_32F (no TF32)
//   tf32    FP32 / CUBLAS_COMPUTE_32F_FAST_TF32 half   FP16 / CUBLAS_COMPUTE_16F (FP16 accumulate)
//   mixed   FP16 in and out / CUBLAS_COMPUTE_32F   bf16  BF16 in and out / CUBLAS_COMPUTE_32F
//
// Chunks of whole output rows (or of part of one row when a single row's patches exceed the
// budget) keep the patch matrix within gemm_patch_budget_bytes(). Outputs that are not finite
// (FP16 overflow) are counted and reported as a NumericalError.
//
// Floors, 4096x4096 output, 65x65 kernel, single, H100: the patches are 16.8M x 4225 floats =
// 283 GB, written by im2col and read by the GEMV: ~566 GB -> ~170 ms at 3.35 TB/s; the products are
// 2 * 16.8M * 4225 = 142 GFLOP -> ~2.8 ms at ~50 TFLOP/s. Bound by bytes 60 to 1, as the study
// found: this is why cuBLAS (and cuDNN's GEMM algorithms) trail every direct method here.
#include "conv/gemm_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "conv/backends.hpp"
#include "conv/cuda_backend_util.hpp"
#include "conv/kernels/gemm_tuning.hpp"
#include "conv/kernels/im2col.cuh"
#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {

namespace {

std::atomic<std::int64_t> g_patch_budget{tuning::kGemmPatchBudgetBytes};

/// cublasGemmEx's types for one precision; alpha = 1 and beta = 0 in the scalar type the compute
/// type wants (FP16 for CUBLAS_COMPUTE_16F, FP64 for 64F, FP32 otherwise).
struct GemmTypes {
  cudaDataType data;
  cublasComputeType_t compute;
  double one_d = 1.0, zero_d = 0.0;
  float one_f = 1.0f, zero_f = 0.0f;
  __half one_h = __float2half_rn(1.0f), zero_h = __float2half_rn(0.0f);
  [[nodiscard]] const void* alpha() const {
    return compute == CUBLAS_COMPUTE_64F   ? static_cast<const void*>(&one_d)
           : compute == CUBLAS_COMPUTE_16F ? static_cast<const void*>(&one_h)
                                           : static_cast<const void*>(&one_f);
  }
  [[nodiscard]] const void* beta() const {
    return compute == CUBLAS_COMPUTE_64F   ? static_cast<const void*>(&zero_d)
           : compute == CUBLAS_COMPUTE_16F ? static_cast<const void*>(&zero_h)
                                           : static_cast<const void*>(&zero_f);
  }
};

GemmTypes gemm_types(Precision p) {
  switch (p) {
    case Precision::Double:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case Precision::Single:
      return {CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case Precision::TF32:
      return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case Precision::Half:
      return {CUDA_R_16F, CUBLAS_COMPUTE_16F};
    case Precision::Mixed:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case Precision::BF16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    default:
      break;
  }
  throw Unsupported(
      "gemm (cuda) supports precisions double, single, tf32, half, mixed, bf16; not " +
      std::string(precision_name(p)));
}

template <class T>
void run_gemm(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
              cudaStream_t s) {
  const GemmTypes types = gemm_types(p);
  const std::int64_t taps = g.krows * g.kcols;
  const std::int64_t align = std::max<std::int64_t>(1, tuning::kGemmRowAlignBytes / sizeof(T));
  const std::int64_t ld = (taps + align - 1) / align * align;
  const std::int64_t row_bytes = ld * static_cast<std::int64_t>(sizeof(T));
  constexpr std::int64_t kIndexLimit = std::int64_t{1} << 31;  // 32-bit index math in im2col
  if (row_bytes > tuning::kGemmPatchBudgetBytes || ld >= kIndexLimit || g.out_cols >= kIndexLimit)
    throw Unsupported("gemm (cuda): a " + std::to_string(g.krows) + "x" + std::to_string(g.kcols) +
                      " kernel on " + std::to_string(g.out_cols) +
                      " output columns is beyond the im2col method's limits (one patch row of " +
                      std::to_string(row_bytes) + " bytes); use method fft");

  const std::int64_t total = g.out_rows * g.out_cols;
  std::int64_t chunk = std::max<std::int64_t>(1, gemm_patch_budget_bytes() / row_bytes);
  chunk = std::min({chunk, total, kIndexLimit / ld});
  if (chunk >= g.out_cols) chunk -= chunk % g.out_cols;  // whole output rows when they fit

  cuda::CublasLease handle(s);  // pooled; default math (TF32 only where the compute type asks)
  cuda::StreamScratch patches(chunk * row_bytes, s);
  cuda::StreamScratch bad(sizeof(unsigned long long), s);
  HS_CUDA_CHECK(cudaMemsetAsync(bad.as<void>(), 0, sizeof(unsigned long long), s));
  const auto* dimage = static_cast<const T*>(image.data());
  T* dout = static_cast<T*>(out.data());

  for (std::int64_t p0 = 0; p0 < total; p0 += chunk) {
    const std::int64_t pixels = std::min(chunk, total - p0);
    kernels::gemmk::Im2colArgs a{g.rows,
                                 g.cols,
                                 g.kcols,
                                 g.out_cols,
                                 g.row0,
                                 g.col0,
                                 p0 / g.out_cols,
                                 p0 % g.out_cols,
                                 static_cast<unsigned int>(pixels),
                                 static_cast<unsigned int>(taps),
                                 static_cast<unsigned int>(ld),
                                 g.boundary == Boundary::Circular};
    kernels::gemmk::im2col_kernel<T>
        <<<cuda::grid_blocks(pixels * taps, tuning::kGemmThreads, tuning::kGemmBlocksPerSm),
           tuning::kGemmThreads, 0, s>>>(dimage, patches.as<T>(), a);
    HS_CHECK_LAUNCH();
    HS_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(pixels),
                                 1, static_cast<int>(taps), types.alpha(), patches.as<T>(),
                                 types.data, static_cast<int>(ld), kernel.data(), types.data,
                                 static_cast<int>(taps), types.beta(), dout + p0, types.data,
                                 static_cast<int>(pixels), types.compute, CUBLAS_GEMM_DEFAULT));
  }

  kernels::gemmk::count_nonfinite_kernel<T>
      <<<cuda::grid_blocks(total, tuning::kGemmThreads, tuning::kGemmBlocksPerSm),
         tuning::kGemmThreads, 0, s>>>(dout, total, bad.as<unsigned long long>());
  HS_CHECK_LAUNCH();
  auto* host = static_cast<unsigned long long*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(
      cudaMemcpyAsync(host, bad.as<void>(), sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  if (*host != 0)
    throw NumericalError("gemm (cuda) in precision " + std::string(precision_name(p)) + ": " +
                         std::to_string(*host) + " of " + std::to_string(total) +
                         " outputs are not finite (beyond the range of " +
                         std::string(dtype_name(storage_dtype(p))) +
                         (p == Precision::Half ? ", or an FP16 partial sum overflowed" : "") +
                         "); a precision with more range keeps it");
}

}  // namespace

std::int64_t gemm_patch_budget_bytes() {
  return g_patch_budget.load();
}

std::int64_t set_gemm_patch_budget_bytes(std::int64_t bytes) {
  return g_patch_budget.exchange(std::max<std::int64_t>(bytes, 1));
}

void gemm_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
               cudaStream_t stream) {
  (void)gemm_types(p);  // Unsupported before anything else for precisions gemm does not have
  check_gpu_call("gemm (cuda)", g, p, image, kernel, out);
  switch (storage_dtype(p)) {
    case DType::f64:
      return run_gemm<double>(g, p, image, kernel, out, stream);
    case DType::f16:
      return run_gemm<__half>(g, p, image, kernel, out, stream);
    case DType::bf16:
      return run_gemm<__nv_bfloat16>(g, p, image, kernel, out, stream);
    default:
      return run_gemm<float>(g, p, image, kernel, out, stream);
  }
}

}  // namespace halfscope::conv
