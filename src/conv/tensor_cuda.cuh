// Host launch glue of the tensor-core convolution: one kernel instantiation per (precision, band
// chunk count Q). Each precision's four instantiations live in their own file
// (tensor_cuda_mixed.cu, tensor_cuda_bf16.cu, tensor_cuda_split.cu) so they compile in parallel
// and tensor_cuda.cu, which only declares them, stays quick to rebuild.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "conv/kernels/tensor.cuh"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv::kernels {

/// Launches tensor_conv_kernel<P, Q> on `blocks` tiles (one per block).
template <TensorPrecision P, int Q>
void launch_tensor_conv_q(const TensorParams& p, std::int64_t blocks, cudaStream_t stream) {
  constexpr int bytes = TensorTile<P, Q>::kSmemBytes;
  HS_CUDA_CHECK(cudaFuncSetAttribute(tensor_conv_kernel<P, Q>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  tensor_conv_kernel<P, Q><<<static_cast<unsigned int>(blocks), kTensorThreads, bytes, stream>>>(p);
  HS_CHECK_LAUNCH();
}

/// Launches the instantiation for nq band chunks (kMinBandChunks..kMaxBandChunks). Defined in
/// tensor_cuda_{mixed,bf16,split}.cu, one precision per file to keep compile times apart.
template <TensorPrecision P>
void launch_tensor_conv(const TensorParams& p, int nq, std::int64_t blocks, cudaStream_t stream);

template <>
void launch_tensor_conv<TensorPrecision::Mixed>(const TensorParams&, int, std::int64_t,
                                                cudaStream_t);
template <>
void launch_tensor_conv<TensorPrecision::BF16>(const TensorParams&, int, std::int64_t,
                                               cudaStream_t);
template <>
void launch_tensor_conv<TensorPrecision::Split>(const TensorParams&, int, std::int64_t,
                                                cudaStream_t);

/// The body of the three instantiation files.
template <TensorPrecision P>
void launch_tensor_conv_impl(const TensorParams& p, int nq, std::int64_t blocks,
                             cudaStream_t stream) {
  static_assert(kMinBandChunks == 2 && kMaxBandChunks == 5, "update the switch below");
  switch (nq) {
    case 2:
      launch_tensor_conv_q<P, 2>(p, blocks, stream);
      break;
    case 3:
      launch_tensor_conv_q<P, 3>(p, blocks, stream);
      break;
    case 4:
      launch_tensor_conv_q<P, 4>(p, blocks, stream);
      break;
    case 5:
      launch_tensor_conv_q<P, 5>(p, blocks, stream);
      break;
    default:
      throw InvalidInput("tensor convolution: band chunk count " + std::to_string(nq) +
                         " outside 2..5");
  }
}

}  // namespace halfscope::conv::kernels
