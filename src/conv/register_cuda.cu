// register_cuda (backends.hpp): the register-blocked PRCF convolution. Checks the call and hands
// it to the precision family's translation unit (register_cuda_<family>.cu); the kernels are in
// kernels/register*.cuh, the launch logic in register_launch.cuh, the constants in
// kernels/register_tuning.hpp.
#include "conv/backends.hpp"
#include "conv/direct_cuda_common.hpp"

namespace halfscope::conv {

void register_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                   Array& out, cudaStream_t stream) {
  static constexpr Precision kSupported[] = {Precision::Double, Precision::Single, Precision::Half,
                                             Precision::Mixed, Precision::BF16};
  detail::check_direct_call("register_cuda", g, p, image, kernel, out, kSupported);
  const kernels::ConvArgs a = detail::make_conv_args(g, image, kernel, out);
  switch (p) {
    case Precision::Double:
      detail::register_run_double(g, p, a, stream);
      break;
    case Precision::Single:
      detail::register_run_single(g, p, a, stream);
      break;
    case Precision::Half:
      detail::register_run_half(g, p, a, stream);
      break;
    case Precision::Mixed:
      detail::register_run_mixed(g, p, a, stream);
      break;
    case Precision::BF16:
      detail::register_run_bf16(g, p, a, stream);
      break;
    default:
      break;  // rejected by check_direct_call
  }
}

}  // namespace halfscope::conv
