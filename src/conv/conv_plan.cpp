// ConvPlan (halfscope/conv.hpp): the kernel converted, flipped and factored once, then handed to
// the calls of conv.cpp instead of an array (kernel_prep.hpp).
#include <utility>

#include "conv/kernel_prep.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope {
namespace conv {

KernelPrep::KernelPrep(const Array& kernel, const ConvOptions& o)
    : host_(host_storage_kernel(kernel, o)), from_device_(kernel.on_device()) {
  // On the host already: factoring reads no device memory, so Auto considers the separable method
  // for every kernel of a rank worth running (rank one from 5x5), not only from
  // kSeparableMinWidth as a call that would read a device kernel back does. (H200, 8192^2, FP16
  // storage, 5x5 Gaussian: separable 0.089-0.091 ms per call against register's 0.107-0.127.)
  if (o.method == ConvMethod::Auto)
    auto_factors_ = conv::auto_factors(host_.dim(0), host_.dim(1), host_, o.precision, 1);
  if (o.method == ConvMethod::Separable)
    separable_factors_ =
        factor_separable(host_, separable_tolerance(o.precision), kSeparableMaxRank);
}

Array KernelPrep::in(Memory memory) const {
  if (memory == Memory::host) return host_;
#if HALFSCOPE_WITH_CUDA
  const std::scoped_lock lock(mutex_);
  const int device = cuda::current_device();
  if (device_.empty() || device_index_ != device) {
    device_ = host_.to(Memory::device);
    device_index_ = device;
  }
  return device_;
#else
  return host_.to(memory);  // throws: a CPU-only build has no device memory
#endif
}

}  // namespace conv

ConvPlan::ConvPlan(const Array& kernel, const ConvOptions& options)
    : options_(options), kernel_(std::make_unique<const conv::KernelPrep>(kernel, options)) {}
ConvPlan::~ConvPlan() = default;
ConvPlan::ConvPlan(ConvPlan&&) noexcept = default;
ConvPlan& ConvPlan::operator=(ConvPlan&&) noexcept = default;

namespace {
void require_kernel(const std::unique_ptr<const conv::KernelPrep>& k) {
  if (!k) throw InvalidInput("ConvPlan: this plan was moved from; it has no kernel");
}
}  // namespace

void ConvPlan::run(const Array& image, Array& out) const {
  require_kernel(kernel_);
  conv::convolve_into(image, kernel_->host(), kernel_.get(), out, options_);
}

ConvMethod ConvPlan::resolve_method(const Array& image) const {
  require_kernel(kernel_);
  return conv::resolve_method(image, kernel_->host(), kernel_.get(), options_);
}

Array ConvPlan::operator()(const Array& image) const {
  require_kernel(kernel_);
  return conv::convolve(image, kernel_->host(), kernel_.get(), options_);
}

}  // namespace halfscope
