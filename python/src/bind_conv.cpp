// halfscope._core.convolve2d: the one entry point behind hs.convolve2d, hs.correlate2d and
// hs.fftconvolve (python/halfscope/conv.py gives them SciPy's signatures); _core.ConvPlan behind
// hs.ConvPlan.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "halfscope/conv.hpp"

namespace halfscope::python {

namespace {

ConvOptions conv_options(const std::string& mode, const std::string& boundary, bool correlate,
                         const std::string& method, const std::string& precision,
                         const std::string& device) {
  ConvOptions options;
  options.mode = parse_conv_mode(mode);
  options.boundary = parse_boundary(boundary);
  options.correlate = correlate;
  options.method = parse_conv_method(method);
  options.precision = parse_precision(precision);
  options.device = parse_device_kind(device);
  return options;
}

nb::object convolve(const AnyArray& image, const AnyArray& kernel, const std::string& mode,
                    const std::string& boundary, bool correlate, const std::string& method,
                    const std::string& precision, const std::string& device,
                    const std::string& framework, std::uintptr_t stream) {
  const ConvOptions options = conv_options(mode, boundary, correlate, method, precision, device);
  const Array a = view_of(image, "in1");
  const Array k = view_of(kernel, "in2");
  const Framework out_kind = parse_framework(framework);
  const Array out =
      released(stream, a.on_device() || k.on_device(), [&] { return convolve2d(a, k, options); });
  return to_python(out, out_kind);
}

}  // namespace

void bind_conv(nb::module_& m) {
  m.def("convolve2d", &convolve, nb::arg("image"), nb::arg("kernel"), nb::arg("mode"),
        nb::arg("boundary"), nb::arg("correlate"), nb::arg("method"), nb::arg("precision"),
        nb::arg("device"), nb::arg("framework"), nb::arg("stream"),
        "halfscope::convolve2d on borrowed arrays; see halfscope.convolve2d.");
  // The plan copies the kernel, so the borrowed view need not outlive the constructor.
  nb::class_<ConvPlan>(m, "ConvPlan")
      .def(
          "__init__",
          [](ConvPlan* self, const AnyArray& kernel, const std::string& mode,
             const std::string& boundary, bool correlate, const std::string& method,
             const std::string& precision, const std::string& device) {
            const Array k = view_of(kernel, "kernel");
            const ConvOptions o =
                conv_options(mode, boundary, correlate, method, precision, device);
            new (self) ConvPlan(k, o);
          },
          nb::arg("kernel"), nb::arg("mode"), nb::arg("boundary"), nb::arg("correlate"),
          nb::arg("method"), nb::arg("precision"), nb::arg("device"))
      .def(
          "__call__",
          [](const ConvPlan& plan, const AnyArray& image, const std::string& framework,
             std::uintptr_t stream) {
            const Array a = view_of(image, "image");
            const Array out = released(stream, a.on_device(), [&] { return plan(a); });
            return to_python(out, parse_framework(framework));
          },
          nb::arg("image"), nb::arg("framework"), nb::arg("stream"),
          "ConvPlan::operator() on a borrowed image; see halfscope.ConvPlan.")
      .def(
          "resolve_method",
          [](const ConvPlan& plan, const AnyArray& image) {
            return std::string(conv_method_name(plan.resolve_method(view_of(image, "image"))));
          },
          nb::arg("image"));
  m.def(
      "conv_methods",
      [](const std::string& method, const std::string& device) {
        std::vector<std::string> names;
        for (Precision p :
             conv_supported_precisions(parse_conv_method(method), parse_device_kind(device)))
          names.emplace_back(precision_name(p));
        return names;
      },
      nb::arg("method"), nb::arg("device"), "The precisions a method supports on a device kind.");
}

}  // namespace halfscope::python
