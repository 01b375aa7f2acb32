// register_cuda, FP16 storage and packed FP16 arithmetic (HFMA2): this family's kernel
// instantiations in a translation unit of their own (compile time and the __constant__ tap buffer
// are per file).
#include "conv/register_launch.cuh"

namespace halfscope::conv::detail {

void register_run_half(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s) {
  register_run<kernels::PrecHalf>(g, p, a, s);
}

bool separable_stream_half(const Geometry& g, Precision p, kernels::ConvArgs a,
                           const kernels::SepTaps& taps, cudaStream_t s) {
  return separable_stream_run<kernels::PrecHalf>(g, p, a, taps, s);
}

}  // namespace halfscope::conv::detail
