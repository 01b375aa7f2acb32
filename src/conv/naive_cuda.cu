// naive_cuda (backends.hpp): the study's naive convolution, one thread per output pixel, the
// kernel in __constant__ memory (kernels/naive.cuh). Every precision the storage types allow.
#include <cuda_runtime.h>

#include <climits>
#include <optional>
#include <string>

#include "conv/backends.hpp"
#include "conv/direct_cuda_common.hpp"
#include "conv/kernels/naive.cuh"
#include "conv/overflow_check.hpp"

namespace halfscope::conv {

namespace {

template <class Prec>
void naive_run(const Geometry& g, Precision p, kernels::ConvArgs a, cudaStream_t s) {
  using R = typename Prec::R;
  std::optional<OverflowCheck> overflow;  // narrow storage (overflow_check.hpp)
  if constexpr (Prec::kNarrow) {
    overflow.emplace(s, "naive_cuda", p, g.out_rows * g.out_cols);
    a.overflow = overflow->counter();
  }
  const dim3 block(kernels::kNaiveBlockX, kernels::kNaiveBlockY);
  const dim3 grid(detail::grid_x((g.out_cols + block.x - 1) / block.x, "naive_cuda"),
                  detail::grid_y((g.out_rows + block.y - 1) / block.y));
  const std::int64_t kernel_bytes = g.krows * g.kcols * static_cast<std::int64_t>(sizeof(R));
  if (kernel_bytes <= kernels::kNaiveConstantBytes) {
    detail::ConstantMemoryLock lock(s);
    HS_CUDA_CHECK(cudaMemcpyToSymbolAsync(kernels::c_naive_kernel, a.kernel,
                                          static_cast<std::size_t>(kernel_bytes), 0,
                                          cudaMemcpyDeviceToDevice, s));
    kernels::naive_conv_kernel<Prec, true><<<grid, block, 0, s>>>(a);
    HS_CHECK_LAUNCH();
    lock.release();
  } else {
    // Too large for constant memory: taps through the read-only cache (naive.cuh).
    kernels::naive_conv_kernel<Prec, false><<<grid, block, 0, s>>>(a);
    HS_CHECK_LAUNCH();
  }
  if (overflow) overflow->finish();
}

}  // namespace

void naive_cuda(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out,
                cudaStream_t stream) {
  static constexpr Precision kSupported[] = {Precision::Double, Precision::Single, Precision::Half,
                                             Precision::Mixed, Precision::BF16};
  detail::check_direct_call("naive_cuda", g, p, image, kernel, out, kSupported);
  if (g.cols > INT_MAX)
    throw Unsupported("naive_cuda: image rows of " + std::to_string(g.cols) +
                      " pixels (more than 2^31 - 1); use method register or fft");
  const kernels::ConvArgs a = detail::make_conv_args(g, image, kernel, out);
  switch (p) {
    case Precision::Double:
      naive_run<kernels::PrecDouble>(g, p, a, stream);
      break;
    case Precision::Single:
      naive_run<kernels::PrecSingle>(g, p, a, stream);
      break;
    case Precision::Half:
      naive_run<kernels::PrecHalf>(g, p, a, stream);
      break;
    case Precision::Mixed:
      naive_run<kernels::PrecMixed>(g, p, a, stream);
      break;
    case Precision::BF16:
      naive_run<kernels::PrecBF16>(g, p, a, stream);
      break;
    default:
      break;  // rejected by check_direct_call
  }
}

}  // namespace halfscope::conv
