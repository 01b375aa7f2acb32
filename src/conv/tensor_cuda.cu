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
#include "conv/direct_cuda_common.hpp"
#include "conv/tensor_cuda.cuh"
#include "halfscope/conv.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv {
namespace {

using kernels::TensorFrag;
using kernels::TensorPrecision;

/// Stream-ordered device scratch, freed on the same stream even when a launch throws.
class StreamScratch {
 public:
  StreamScratch(std::int64_t bytes, cudaStream_t stream) : stream_(stream) {
    HS_CUDA_CHECK(cudaMallocAsync(&ptr_, static_cast<std::size_t>(bytes), stream));
  }
  ~StreamScratch() {
    if (cudaFreeAsync(ptr_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  [[nodiscard]] void* get() const noexcept { return ptr_; }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

void check_operand(const Array& a, DType dtype, std::int64_t rows, std::int64_t cols,
                   const char* what) {
  const std::string where = std::string("tensor (GPU) convolution: ") + what;
  if (!a.on_device()) throw InvalidInput(where + " must be a device array, found " + a.describe());
  if (a.dtype() != dtype)
    throw InvalidInput(where + " must be " + std::string(dtype_name(dtype)) + ", found " +
                       a.describe());
  if (a.ndim() != 2 || a.dim(0) != rows || a.dim(1) != cols || !a.is_c_contiguous())
    throw InvalidInput(where + " must be a C-contiguous [" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "] array, found " + a.describe());
}

/// Builds the table, then runs the convolution; mixed / bf16 then check the overflow count
/// (one stream synchronisation, as every narrow-storage GPU backend does).
template <TensorPrecision P>
void run(const Geometry& g, Precision p, const Array& kernel, const kernels::TensorPlan& plan,
         kernels::TensorParams params, std::int64_t blocks, TensorFrag* hi, TensorFrag* lo,
         float* inv_scale, unsigned int* kernel_nonfinite, cudaStream_t stream) {
  constexpr bool narrow = P != TensorPrecision::Split;
  std::optional<detail::OverflowCounter> overflow;
  if constexpr (narrow) {
    overflow.emplace(stream);
    params.overflow = overflow->get();
    params.kernel_nonfinite = kernel_nonfinite;
    HS_CUDA_CHECK(cudaMemsetAsync(kernel_nonfinite, 0, sizeof(unsigned int), stream));
  }
  kernels::tensor_table_kernel<P><<<static_cast<unsigned int>(params.krows), 128, 0, stream>>>(
      kernel.data(), params.krows, params.kcols, plan.nchunks, plan.chunk_width, plan.nq, hi, lo,
      inv_scale, kernel_nonfinite);
  HS_CHECK_LAUNCH();
  kernels::launch_tensor_conv<P>(params, plan.nq, blocks, stream);
  if constexpr (narrow) overflow->check("tensor (GPU) convolution", p, g.out_rows * g.out_cols);
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
  if (g.rows < 1 || g.cols < 1 || g.krows < 1 || g.kcols < 1)
    throw InvalidInput("tensor (GPU) convolution: empty image (" + std::to_string(g.rows) + "x" +
                       std::to_string(g.cols) + ") or kernel (" + std::to_string(g.krows) + "x" +
                       std::to_string(g.kcols) + ")");
  const DType dtype = storage_dtype(p);
  check_operand(image, dtype, g.rows, g.cols, "image");
  check_operand(kernel, dtype, g.krows, g.kcols, "kernel");
  check_operand(out, dtype, g.out_rows, g.out_cols, "output");
  if (g.out_rows == 0 || g.out_cols == 0) return;
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
  StreamScratch scratch(tables * 16 + 4 * static_cast<std::int64_t>(krows) + 4, stream);
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
