// Matched-filtering dispatch: names, the method x precision table, the Auto choices, and the
// entry point (validation and conversion in prepare.cpp, GPU streaming in dispatch_cuda.cpp).
#include "halfscope/mfilter.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "core/name_table.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/devices.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope {

namespace {

using detail::name_of;
using detail::parse_name;

constexpr std::array<std::pair<std::string_view, MfNormalize>, 2> kNormalizations{
    {{"short", MfNormalize::Short}, {"full", MfNormalize::Full}}};
constexpr std::array<std::pair<std::string_view, MfMethod>, 9> kMethods{
    {{"auto", MfMethod::Auto},
     {"direct", MfMethod::Direct},
     {"naive", MfMethod::Naive},
     {"cublas1", MfMethod::Cublas1},
     {"cublas2", MfMethod::Cublas2},
     {"cublas3", MfMethod::Cublas3},
     {"cublas4", MfMethod::Cublas4},
     {"tensor", MfMethod::Tensor},
     {"fft", MfMethod::FFT}}};
constexpr std::array<std::pair<std::string_view, ThresholdType>, 2> kThresholds{
    {{"abs", ThresholdType::Absolute}, {"mad", ThresholdType::Mad}}};

}  // namespace

std::string_view mf_normalize_name(MfNormalize n) noexcept {
  return name_of(n, kNormalizations);
}
std::string_view mf_method_name(MfMethod m) noexcept {
  return name_of(m, kMethods);
}
MfNormalize parse_mf_normalize(std::string_view text) {
  return parse_name(text, kNormalizations, "normalization");
}
MfMethod parse_mf_method(std::string_view text) {
  return parse_name(text, kMethods, "matched-filter method");
}
std::string_view threshold_type_name(ThresholdType t) noexcept {
  return name_of(t, kThresholds);
}
ThresholdType parse_threshold_type(std::string_view text) {
  if (text == "MAD") return ThresholdType::Mad;  // EQcorrscan's spellings
  if (text == "absolute") return ThresholdType::Absolute;
  return parse_name(text, kThresholds, "threshold type");
}

std::int64_t mf_correlation_count(std::int64_t data_length, std::int64_t template_length,
                                  std::int64_t step) {
  if (template_length < 1)
    throw InvalidInput("matched_filter: templates need at least 1 sample, found " +
                       std::to_string(template_length));
  if (step < 1)
    throw InvalidInput("matched_filter: step must be >= 1, found " + std::to_string(step));
  if (template_length > data_length)
    throw InvalidInput("matched_filter: templates (" + std::to_string(template_length) +
                       " samples) are longer than the data (" + std::to_string(data_length) +
                       " samples)");
  return (data_length - template_length) / step + 1;
}

Precision mf_default_precision(MfMethod method) {
  switch (method) {
    case MfMethod::Cublas2:
    case MfMethod::Cublas3:
      return Precision::Mixed;
    case MfMethod::Cublas4:
      return Precision::Half;
    case MfMethod::Auto:  // Auto on the GPU resolves to tensor (the CPU path picks single)
    case MfMethod::Tensor:
      return Precision::Split;
    default:
      return Precision::Single;
  }
}

std::vector<Precision> mf_supported_precisions(MfMethod method, DeviceKind device) {
  using P = Precision;
  const bool gpu = device == DeviceKind::Cuda;
  const std::vector<P> none;
  switch (method) {
    // Auto can reach every precision (double through direct); Direct always runs on the CPU (a
    // call with device data copies to the host and back).
    case MfMethod::Auto:
    case MfMethod::Direct:
      return {P::Double, P::Single, P::Half, P::Mixed, P::BF16, P::Split};
    case MfMethod::Naive:
    case MfMethod::Cublas1:
    case MfMethod::FFT:
      return gpu ? std::vector<P>{P::Single} : none;
    case MfMethod::Cublas2:
    case MfMethod::Cublas3:
      return gpu ? std::vector<P>{P::Mixed} : none;
    case MfMethod::Cublas4:
      return gpu ? std::vector<P>{P::Half} : none;
    case MfMethod::Tensor:
      return gpu ? std::vector<P>{P::Mixed, P::BF16, P::Split} : none;
  }
  return none;
}

MfMethod mf_resolve_method(const MfOptions& options, std::int64_t template_length) {
  if (options.method != MfMethod::Auto) return options.method;
  if (resolve_device(options.device) != DeviceKind::Cuda) return MfMethod::Direct;
  switch (options.precision.value_or(Precision::Split)) {
    case Precision::Mixed:
    case Precision::BF16:
    case Precision::Split:
      return MfMethod::Tensor;
    case Precision::Half:
      return MfMethod::Cublas4;
    case Precision::Single:
      return template_length >= mfilter::kFftMinTemplateLength ? MfMethod::FFT : MfMethod::Naive;
    case Precision::Double:
    case Precision::TF32:
      return MfMethod::Direct;  // TF32 is then refused by the table
  }
  return MfMethod::Direct;
}

namespace mfilter {

Array run_cpu(const Prepared& p) {
  Array out(DType::f32, p.out_shape);
  HostProblem hp;
  hp.dims = p.dims;
  hp.templates = &p.templates;
  hp.data = &p.data;
  hp.moveouts = p.moveouts.data();
  hp.weights = p.weights.data();
  hp.out = out.data_as<float>();
  hp.channel_offsets = p.channel_offsets.empty() ? nullptr : p.channel_offsets.data();
  direct_cpu(hp, p.precision);
  return out;
}

}  // namespace mfilter

Array matched_filter(const Array& templates, const Array& data, const MfOptions& options,
                     const MfNetwork& network) {
  const mfilter::Prepared p = mfilter::prepare(templates, data, options, network);
  mfilter::validate_devices(options.devices, p);
#if HALFSCOPE_WITH_CUDA
  if (p.on_gpu && !options.devices.empty()) {
    Array out = mfilter::run_cuda_devices(p, options.devices);
    return p.data_on_device ? out.to(Memory::device) : out;
  }
  if (p.on_gpu) return mfilter::run_cuda(p);
#endif
  Array out = mfilter::run_cpu(p);
  return p.data_on_device ? out.to(Memory::device) : out;
}

}  // namespace halfscope
