// The split instantiations of the tensor-core convolution (Q = 2..5 band chunks); see
// tensor_cuda.cuh.
#include "conv/tensor_cuda.cuh"

namespace halfscope::conv::kernels {

template <>
void launch_tensor_conv<TensorPrecision::Split>(const TensorParams& p, int nq, std::int64_t blocks,
                                                cudaStream_t stream) {
  launch_tensor_conv_impl<TensorPrecision::Split>(p, nq, blocks, stream);
}

}  // namespace halfscope::conv::kernels
