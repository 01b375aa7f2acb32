// register_cuda, FP32 storage and arithmetic: this family's kernel instantiations in a
// translation unit of their own (compile time and the __constant__ tap buffer are per file).
#include "conv/register_launch.cuh"

namespace halfscope::conv::detail {

void register_run_single(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s) {
  register_run<kernels::PrecSingle>(g, p, a, s);
}

bool separable_stream_single(const Geometry& g, Precision p, kernels::ConvArgs a,
                             const kernels::SepTaps& taps, cudaStream_t s) {
  return separable_stream_run<kernels::PrecSingle>(g, p, a, taps, s);
}

}  // namespace halfscope::conv::detail
