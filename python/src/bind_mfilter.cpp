// halfscope._core.matched_filter, detect_peaks and matched_filter_detect: study 001's normalized
// cross-correlation behind hs.matched_filter (python/halfscope/mfilter.py maps Fast Matched
// Filter's shapes onto the library's (T, C, K) templates and (C, L) data).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "arrays.hpp"
#include "bindings.hpp"
#include "halfscope/mfilter.hpp"

namespace halfscope::python {

namespace {

MfOptions options_of(const std::string& normalize, const std::string& method,
                     const std::string& precision, const std::string& device, std::int64_t step,
                     bool network_sum, const std::vector<int>& devices) {
  MfOptions o;
  o.devices = devices;
  o.normalize = parse_mf_normalize(normalize);
  o.method = parse_mf_method(method);
  if (!precision.empty()) o.precision = parse_precision(precision);
  o.device = parse_device_kind(device);
  o.step = step;
  o.network_sum = network_sum;
  return o;
}

MfNetwork network_of(const std::optional<AnyArray>& moveouts,
                     const std::optional<AnyArray>& weights) {
  MfNetwork n;
  if (moveouts) n.moveouts = view_of(*moveouts, "moveouts");
  if (weights) n.weights = view_of(*weights, "weights");
  return n;
}

// Detections as columns (python/halfscope/mfilter.py makes a NumPy structured array).
nb::dict detection_columns(const std::vector<Detection>& found, bool with_channels) {
  nb::list t, i, s, v, thr, ch;
  for (const Detection& d : found) {
    t.append(d.template_index);
    i.append(d.correlation_index);
    s.append(d.sample);
    v.append(d.value);
    thr.append(d.threshold);
    ch.append(d.channels_used);
  }
  nb::dict out;
  out["template"] = t;
  out["index"] = i;
  out["sample"] = s;
  out["value"] = v;
  out["threshold"] = thr;
  if (with_channels) out["channels_used"] = ch;
  return out;
}

nb::object correlate(const AnyArray& templates, const AnyArray& data,
                     const std::optional<AnyArray>& moveouts,
                     const std::optional<AnyArray>& weights, const std::string& normalize,
                     const std::string& method, const std::string& precision,
                     const std::string& device, std::int64_t step, bool network_sum,
                     const std::vector<int>& devices, const std::string& framework,
                     std::uintptr_t stream) {
  const MfOptions o = options_of(normalize, method, precision, device, step, network_sum, devices);
  const Array t = view_of(templates, "templates");
  const Array s = view_of(data, "data");
  const MfNetwork net = network_of(moveouts, weights);
  const Framework out_kind = parse_framework(framework);
  const Array cc = released(stream, t.on_device() || s.on_device(),
                            [&] { return matched_filter(t, s, o, net); });
  return to_python(cc, out_kind);
}

DetectOptions detect_options(double threshold, const std::string& type,
                             std::int64_t min_separation) {
  DetectOptions d;
  d.threshold = threshold;
  d.type = parse_threshold_type(type);
  d.min_separation = min_separation;
  return d;
}

nb::dict detect(const AnyArray& stack, double threshold, const std::string& type,
                std::int64_t min_separation, std::int64_t step, std::uintptr_t stream) {
  const DetectOptions d = detect_options(threshold, type, min_separation);
  const Array cc = view_of(stack, "cc_sum");
  const std::vector<Detection> found =
      released(stream, cc.on_device(), [&] { return detect_peaks(cc, d, step); });
  return detection_columns(found, false);
}

nb::dict correlate_detect(const AnyArray& templates, const AnyArray& data,
                          const std::optional<AnyArray>& moveouts,
                          const std::optional<AnyArray>& weights, const std::string& normalize,
                          const std::string& method, const std::string& precision,
                          const std::string& device, std::int64_t step, double threshold,
                          const std::string& type, std::int64_t min_separation,
                          const std::vector<int>& devices, std::uintptr_t stream) {
  const MfOptions o = options_of(normalize, method, precision, device, step, true, devices);
  const DetectOptions d = detect_options(threshold, type, min_separation);
  const Array t = view_of(templates, "templates");
  const Array s = view_of(data, "data");
  const MfNetwork net = network_of(moveouts, weights);
  const std::vector<Detection> found = released(stream, t.on_device() || s.on_device(), [&] {
    return matched_filter_detect(t, s, o, net, d);
  });
  return detection_columns(found, true);
}

}  // namespace

void bind_mfilter(nb::module_& m) {
  m.def("matched_filter", &correlate, nb::arg("templates"), nb::arg("data"),
        nb::arg("moveouts").none(), nb::arg("weights").none(), nb::arg("normalize"),
        nb::arg("method"), nb::arg("precision"), nb::arg("device"), nb::arg("step"),
        nb::arg("network_sum"), nb::arg("devices"), nb::arg("framework"), nb::arg("stream"),
        "halfscope::matched_filter on (T, C, K) templates and (C, L) data.");
  m.def("detect_peaks", &detect, nb::arg("cc_sum"), nb::arg("threshold"), nb::arg("type"),
        nb::arg("min_separation"), nb::arg("step"), nb::arg("stream"),
        "Declustered peaks of a (T, n_corr) stack (EQcorrscan's semantics).");
  m.def("matched_filter_detect", &correlate_detect, nb::arg("templates"), nb::arg("data"),
        nb::arg("moveouts").none(), nb::arg("weights").none(), nb::arg("normalize"),
        nb::arg("method"), nb::arg("precision"), nb::arg("device"), nb::arg("step"),
        nb::arg("threshold"), nb::arg("type"), nb::arg("min_separation"), nb::arg("devices"),
        nb::arg("stream"), "Correlation and detection in one call, without keeping the stack.");
}

}  // namespace halfscope::python
