// Detection on a whole call: matched_filter_detect (stack then peaks, chunk by chunk on the GPU)
// and the count of channels that contributed to each detection.
#include <algorithm>
#include <cmath>
#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/devices.hpp"
#include "mfilter/dispatch.hpp"
#include "mfilter/window_stats.hpp"

namespace halfscope {

namespace mfilter {

namespace {

// The channels of one detection that contributed: weight != 0, window inside the data, template
// channel not zero (prepare zeroed the flat ones) and window not flat. The flat decision is the
// CPU backends' own (window_inv_norms over exactly this window, with the channel's removed mean
// for the raw sum), so the count agrees with the CC the stack summed.
template <class V>
std::int64_t channels_used(const Detection& det, const Prepared& p, const V* tp, const V* xp) {
  const Dims& d = p.dims;
  std::int64_t used = 0;
  for (std::int64_t c = 0; c < d.channels; ++c) {
    const std::int64_t tc = det.template_index * d.channels + c;
    const std::int64_t s =
        det.correlation_index * d.step + p.moveouts[static_cast<std::size_t>(tc)];
    if (p.weights[static_cast<std::size_t>(tc)] == 0.0f || s < 0 || s + d.length > d.samples)
      continue;
    const V* t = tp + tc * d.length;
    if (std::all_of(t, t + d.length, [](V v) { return v == V{0}; })) continue;
    double inv = 0;
    window_inv_norms(xp + c * d.samples + s, d.length, d.length, d.normalize, &inv,
                     p.channel_offsets[static_cast<std::size_t>(c)]);
    if (inv != 0) ++used;
  }
  return used;
}

}  // namespace

void count_channels_used(std::vector<Detection>& detections, const Prepared& p) {
  if (detections.empty()) return;
  const Dims& d = p.dims;
  const Array x = p.data.on_device() ? p.data.to(Memory::host) : p.data;
  for (const Detection& det : detections)
    if (det.template_index < 0 || det.template_index >= d.templates || det.correlation_index < 0 ||
        det.correlation_index >= d.n_corr)
      throw InvalidInput("mf_count_channels_used: detection at template " +
                         std::to_string(det.template_index) + ", correlation " +
                         std::to_string(det.correlation_index) + " lies outside the (" +
                         std::to_string(d.templates) + ", " + std::to_string(d.n_corr) +
                         ") stack of these inputs");
  // Detections are independent (a network of 1000 detections x 30 channels took tens of ms
  // serially, after a GPU stack of a quarter of a second on four devices).
  const auto n = static_cast<std::int64_t>(detections.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t i = 0; i < n; ++i) {
    Detection& det = detections[static_cast<std::size_t>(i)];
    det.channels_used =
        x.dtype() == DType::f64
            ? channels_used(det, p, p.templates.data_as<double>(), x.data_as<double>())
            : channels_used(det, p, p.templates.data_as<float>(), x.data_as<float>());
  }
}

}  // namespace mfilter

void mf_count_channels_used(std::vector<Detection>& detections, const Array& templates,
                            const Array& data, const MfOptions& options, const MfNetwork& network) {
  if (detections.empty()) return;
  // The CPU preparation gives the checked, demeaned, scaled, flat-zeroed operands and the clamped
  // network exactly as the backends see them.
  MfOptions o = options;
  o.method = MfMethod::Direct;
  o.device = DeviceKind::Cpu;
  o.precision = Precision::Single;
  mfilter::count_channels_used(detections, mfilter::prepare(templates, data, o, network));
}

std::vector<Detection> matched_filter_detect(const Array& templates, const Array& data,
                                             const MfOptions& options, const MfNetwork& network,
                                             const DetectOptions& detect) {
  mfilter::validate_detect_options(detect, options.step);
  MfOptions o = options;
  o.network_sum = true;  // detection runs on the network stack
  const mfilter::Prepared p = mfilter::prepare(templates, data, o, network);
  mfilter::validate_devices(o.devices, p);
  std::vector<Detection> found;
#if HALFSCOPE_WITH_CUDA
  if (p.on_gpu && !o.devices.empty())
    found = mfilter::detect_cuda_devices(p, detect, o.devices);
  else if (p.on_gpu)
    found = mfilter::detect_cuda(p, detect);
  else
    found = detect_peaks(mfilter::run_cpu(p), detect, o.step);
#else
  found = detect_peaks(mfilter::run_cpu(p), detect, o.step);
#endif
  // The same prepared call (validated and converted once) decides which channels were used.
  mfilter::count_channels_used(found, p);
  return found;
}

}  // namespace halfscope
