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

// One window a detection may have used: its detection and where it starts in the flat data.
struct Window {
  std::int64_t detection, start;
};

// The windows that can count for a detection: weight != 0, window inside the data, template
// channel not zero (prepare zeroed the flat ones). Whether the window itself is flat decides the
// rest (channels_used below).
template <class V>
std::vector<Window> candidate_windows(const std::vector<Detection>& detections, const Prepared& p,
                                      const V* tp) {
  const Dims& d = p.dims;
  std::vector<unsigned char> live(static_cast<std::size_t>(d.templates * d.channels));
#pragma omp parallel for schedule(static)
  for (std::int64_t tc = 0; tc < d.templates * d.channels; ++tc) {
    const V* t = tp + tc * d.length;
    live[static_cast<std::size_t>(tc)] =
        std::any_of(t, t + d.length, [](V v) { return v != V{0}; });
  }
  std::vector<Window> out;
  for (std::size_t i = 0; i < detections.size(); ++i) {
    const Detection& det = detections[i];
    for (std::int64_t c = 0; c < d.channels; ++c) {
      const std::int64_t tc = det.template_index * d.channels + c;
      const std::int64_t s =
          det.correlation_index * d.step + p.moveouts[static_cast<std::size_t>(tc)];
      if (p.weights[static_cast<std::size_t>(tc)] == 0.0f || s < 0 || s + d.length > d.samples ||
          !live[static_cast<std::size_t>(tc)])
        continue;
      out.push_back({static_cast<std::int64_t>(i), c * d.samples + s});
    }
  }
  return out;
}

// Adds 1 to a detection's channels_used for each window that is not flat. The flat decision is
// the CPU backends' own (window_inv_norms over exactly this window, with the channel's removed
// mean for the raw sum), so the count agrees with the CC the stack summed. `values(w)` points to
// window w's samples.
template <class Values>
void count_windows(std::vector<Detection>& detections, const Prepared& p,
                   const std::vector<Window>& windows, const Values& values) {
  const Dims& d = p.dims;
  const auto n = static_cast<std::int64_t>(windows.size());
  std::vector<unsigned char> used(windows.size());
  // Windows are independent (1000 detections x 30 channels took tens of ms serially).
#pragma omp parallel for schedule(static)
  for (std::int64_t w = 0; w < n; ++w) {
    const std::int64_t c = windows[static_cast<std::size_t>(w)].start / d.samples;
    double inv = 0;
    window_inv_norms(values(w), d.length, d.length, d.normalize, &inv,
                     p.channel_offsets[static_cast<std::size_t>(c)]);
    used[static_cast<std::size_t>(w)] = inv != 0;
  }
  for (std::size_t w = 0; w < windows.size(); ++w)
    detections[static_cast<std::size_t>(windows[w].detection)].channels_used += used[w];
}

template <class V>
void count_host(std::vector<Detection>& detections, const Prepared& p, const V* tp, const V* xp) {
  const std::vector<Window> windows = candidate_windows(detections, p, tp);
  count_windows(detections, p, windows,
                [&](std::int64_t w) { return xp + windows[static_cast<std::size_t>(w)].start; });
}

}  // namespace

void count_channels_used(std::vector<Detection>& detections, const Prepared& p) {
  if (detections.empty()) return;
  const Dims& d = p.dims;
  for (const Detection& det : detections)
    if (det.template_index < 0 || det.template_index >= d.templates || det.correlation_index < 0 ||
        det.correlation_index >= d.n_corr)
      throw InvalidInput("mf_count_channels_used: detection at template " +
                         std::to_string(det.template_index) + ", correlation " +
                         std::to_string(det.correlation_index) + " lies outside the (" +
                         std::to_string(d.templates) + ", " + std::to_string(d.n_corr) +
                         ") stack of these inputs");
  for (Detection& det : detections) det.channels_used = 0;
#if HALFSCOPE_WITH_CUDA
  if (p.data.on_device() && p.data.dtype() == DType::f32 && p.templates.dtype() == DType::f32) {
    // Only the windows cross the bus (a day of 30 channels is 0.5 GB; its windows a few MB).
    const std::vector<Window> windows =
        candidate_windows(detections, p, p.templates.data_as<float>());
    std::vector<std::int64_t> starts(windows.size());
    for (std::size_t w = 0; w < windows.size(); ++w) starts[w] = windows[w].start;
    const std::vector<float> values =
        gather_windows_cuda(p.data.data_as<float>(), starts, d.length);
    count_windows(detections, p, windows,
                  [&](std::int64_t w) { return values.data() + w * d.length; });
    return;
  }
#endif
  const Array x = p.data.on_device() ? p.data.to(Memory::host) : p.data;
  if (x.dtype() == DType::f64)
    count_host(detections, p, p.templates.data_as<double>(), x.data_as<double>());
  else
    count_host(detections, p, p.templates.data_as<float>(), x.data_as<float>());
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
