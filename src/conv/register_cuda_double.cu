// register_cuda, FP64 storage and arithmetic; the generic kernel only (FP64 is optional for this
// method): this family's kernel instantiations in a translation unit of their own (compile time and
// the __constant__ tap buffer are per file).
#include "conv/register_launch.cuh"

namespace halfscope::conv::detail {

void register_run_double(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s) {
  register_run<kernels::PrecDouble>(g, p, a, s);
}

}  // namespace halfscope::conv::detail
