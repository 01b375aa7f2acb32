// GPU backend `tensor`: single-channel 2D convolution as banded Toeplitz matrix products on the
// tensor cores (mma.sync m16n8k16, FP32 accumulation), in mixed (FP16), bf16 and split (FP32 in
// and out, hi + lo FP16 operands, FP32-grade result). Design and error analysis:
// docs/conv-tensor.md; device code: kernels/tensor_block.hpp and kernels/tensor.cuh.
//
// One call = a table kernel (krows blocks) that turns the kernel into Toeplitz A fragments in
// MMA register order, then the convolution kernel (one 128 x 64 output tile per block). Both run
// on `stream`; the table lives in a stream-ordered allocation freed on the same stream.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "conv/backends.hpp"
#include "conv/cuda_backend_util.hpp"
#include "conv/direct_cuda_common.hpp"
#include "conv/overflow_check.hpp"
#include "conv/tensor_cuda.cuh"
#include "halfscope/conv.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {
namespace {

using kernels::TensorFrag;
using kernels::TensorPrecision;

/// Builds the table, then runs the convolution; mixed / bf16 then check the overflow count
/// (overflow_check.hpp: immediate, or deferred for device outputs).
template <TensorPrecision P>
void run(const Geometry& g, Precision p, const Array& kernel, const kernels::TensorPlan& plan,
         kernels::TensorParams params, std::int64_t blocks, TensorFrag* hi, TensorFrag* lo,
         float* inv_scale, unsigned int* kernel_nonfinite, cudaStream_t stream) {
  constexpr bool narrow = P != TensorPrecision::Split;
  std::optional<OverflowCheck> overflow;  // overflow_check.hpp
  if constexpr (narrow) {
    overflow.emplace(stream, "tensor (GPU) convolution", p, g.out_rows * g.out_cols);
    params.overflow = overflow->counter();
    params.kernel_nonfinite = kernel_nonfinite;
    HS_CUDA_CHECK(cudaMemsetAsync(kernel_nonfinite, 0, sizeof(unsigned int), stream));
  }
  kernels::tensor_table_kernel<P><<<static_cast<unsigned int>(params.krows), 128, 0, stream>>>(
      kernel.data(), params.krows, params.kcols, plan.nchunks, plan.chunk_width, plan.nq, hi, lo,
      inv_scale, kernel_nonfinite);
  HS_CHECK_LAUNCH();
  kernels::launch_tensor_conv<P>(params, plan.nq, blocks, stream);
  if constexpr (narrow) overflow->finish();
}

}  // namespace

void tensor_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                 Array& out, cudaStream_t stream) {
  TensorPrecision tp = TensorPrecision::Mixed;
  switch (p) {
    case Precision::Mixed:
      tp = TensorPrecision::Mixed;
      break;
    case Precision::BF16:
      tp = TensorPrecision::BF16;
      break;
    case Precision::Split:
      tp = TensorPrecision::Split;
      break;
    default:
      throw Unsupported("tensor (GPU) convolution: precision " + std::string(precision_name(p)) +
                        " is not supported; supported: mixed, bf16, split");
  }
  check_gpu_call("tensor (GPU) convolution", g, p, image, kernel, out);
  // Tile column indices are 32-bit; the table holds krows * ~kcols / 13 fragments of 512 bytes.
  if (g.cols >= INT_MAX || g.kcols > (1 << 20) || g.krows > (1 << 20))
    throw Unsupported("tensor (GPU) convolution: image with " + std::to_string(g.cols) +
                      " columns or kernel " + std::to_string(g.krows) + "x" +
                      std::to_string(g.kcols) + " beyond the supported 2^31 - 1 columns and " +
                      "2^20 x 2^20 kernel");

  const int krows = static_cast<int>(g.krows), kcols = static_cast<int>(g.kcols);
  const kernels::TensorPlan plan = kernels::plan_tensor_columns(kcols);
  // Tiles: at most 2^31 - 1 blocks (a 1-D grid); rows and columns of 2^31 give far fewer.
  if (g.out_rows / kernels::tensor_block_rows(tp == TensorPrecision::Split) + 1 >
      INT_MAX / (g.out_cols / kernels::kBlockCols + 1))
    throw Unsupported("tensor (GPU) convolution: output " + std::to_string(g.out_rows) + "x" +
                      std::to_string(g.out_cols) + " needs more than 2^31 - 1 tiles");
  const std::int64_t frags = static_cast<std::int64_t>(plan.nchunks) * krows * plan.nq * 32;
  const bool split = tp == TensorPrecision::Split;
  // Scratch: hi fragments, lo fragments (split), 2^-e(u) per kernel row (split), one flag.
  const std::int64_t tables = (split ? 2 : 1) * frags;
  cuda::StreamScratch scratch(tables * 16 + 4 * static_cast<std::int64_t>(krows) + 4, stream);
  auto* hi = static_cast<TensorFrag*>(scratch.get());
  TensorFrag* lo = split ? hi + frags : nullptr;
  auto* inv_scale = reinterpret_cast<float*>(hi + tables);
  auto* kernel_nonfinite = reinterpret_cast<unsigned int*>(inv_scale + krows);

  std::int64_t blocks = 0;
  kernels::TensorParams params = kernels::tensor_params(g, split, plan, blocks);
  params.image = image.data();
  params.out = out.data();
  params.table_hi = hi;
  params.table_lo = lo;
  params.kernel_inv_scale = inv_scale;
  switch (tp) {
    case TensorPrecision::Mixed:
      run<TensorPrecision::Mixed>(g, p, kernel, plan, params, blocks, hi, lo, inv_scale,
                                  kernel_nonfinite, stream);
      break;
    case TensorPrecision::BF16:
      run<TensorPrecision::BF16>(g, p, kernel, plan, params, blocks, hi, lo, inv_scale,
                                 kernel_nonfinite, stream);
      break;
    case TensorPrecision::Split:
      run<TensorPrecision::Split>(g, p, kernel, plan, params, blocks, hi, lo, inv_scale,
                                  kernel_nonfinite, stream);
      break;
  }
}

}  // namespace halfscope::conv
