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
  // On the host already: factoring reads no device memory. Which of the two a call uses depends
  // on the method it resolves to (and Auto's on the device); both are cheap for the kernels that
  // have them (width-limited, rank at most kSeparableMaxRank).
  if (o.method == ConvMethod::Auto)
    auto_factors_ = conv::auto_factors(host_.dim(0), host_.dim(1), host_, o.precision);
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

Array ConvPlan::operator()(const Array& image) const {
  require_kernel(kernel_);
  return conv::convolve(image, kernel_->host(), kernel_.get(), options_);
}

}  // namespace halfscope
