// Internal: a convolution kernel prepared once for many calls (ConvPlan, conv_plan.cpp), and the
// entry points of conv.cpp that take one.
#pragma once

#include <mutex>
#include <optional>

#include "conv/separable.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/array.hpp"

namespace halfscope::conv {

/// The kernel in the plan's storage type (flipped for correlation), its copy on the device the
/// calls run on, and the low-rank factors a GPU call would otherwise read back and compute.
class KernelPrep {
 public:
  KernelPrep(const Array& kernel, const ConvOptions& o);

  /// The kernel in the storage type, on the host.
  [[nodiscard]] const Array& host() const noexcept { return host_; }
  /// Whether the plan's kernel came from device memory (a call with a host image then runs on the
  /// GPU under DeviceKind::Auto and returns a device result, as with the array itself).
  [[nodiscard]] bool from_device() const noexcept { return from_device_; }
  /// The kernel in host or device memory. The device copy is made on first use, and again when
  /// the current device has changed since (a multi-GPU caller); thread-safe.
  [[nodiscard]] Array in(Memory memory) const;
  /// What method Auto considers on the GPU (null: the kernel is not worth running as separable).
  [[nodiscard]] const SeparableFactors* auto_factors() const noexcept {
    return auto_factors_ ? &*auto_factors_ : nullptr;
  }
  /// What method Separable runs (null: not separable; the call then reports it as it would).
  [[nodiscard]] const SeparableFactors* separable_factors() const noexcept {
    return separable_factors_ ? &*separable_factors_ : nullptr;
  }

 private:
  Array host_;
  bool from_device_ = false;
  std::optional<SeparableFactors> auto_factors_, separable_factors_;
  mutable std::mutex mutex_;
  mutable Array device_;
  mutable int device_index_ = -1;
};

/// The kernel as calls with options `o` run it: in the storage type on the host, C-contiguous,
/// flipped for correlation; InvalidInput for an empty or non-2-D kernel, NumericalError for a
/// value the storage type cannot hold.
Array host_storage_kernel(const Array& kernel, const ConvOptions& o);

/// Auto's factors for a (krows x kcols) kernel in storage-typed `kernel` at precision `p`: the
/// low-rank factors when it is at least `min_width` wide, of a rank worth running, and a precision
/// of the separable method serves `p`, else none. A device kernel is read back (a
/// synchronisation, which is why calls without a plan start at kSeparableMinWidth).
std::optional<SeparableFactors> auto_factors(std::int64_t krows, std::int64_t kcols,
                                             const Array& kernel, Precision p,
                                             std::int64_t min_width = kSeparableMinWidth);

/// convolve2d_into / convolve2d with the kernel as an array (`prep` null), or prepared (from a
/// ConvPlan with options `o`: `kernel` is then prep->host()).
void convolve_into(const Array& image, const Array& kernel, const KernelPrep* prep, Array& out,
                   const ConvOptions& o);
Array convolve(const Array& image, const Array& kernel, const KernelPrep* prep,
               const ConvOptions& o);
ConvMethod resolve_method(const Array& image, const Array& kernel, const KernelPrep* prep,
                          const ConvOptions& o);

}  // namespace halfscope::conv
