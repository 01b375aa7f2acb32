// `halfscope conv IMAGE KERNEL -o OUT`: 2D convolution with a chosen method and precision; with
// --check, the error against an FP64 reference computed on the CPU.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/metrics.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

struct ConvCliOptions {
  std::string image, kernel, output;
  std::string method = "auto", precision = "single", mode = "same", boundary = "zero";
  bool correlate = false, check = false;
};

// The accepted --boundary values, SciPy's names (fill, wrap) included as aliases.
constexpr const char* kBoundaryValues = "zero (alias fill) or circular (alias wrap)";

Boundary parse_boundary_option(const std::string& text) {
  try {
    return parse_boundary(text);
  } catch (const InvalidInput&) {
    // The library's message lists only the canonical names; the CLI accepts the aliases too.
    throw InvalidInput("--boundary: expected " + std::string(kBoundaryValues) + ", found '" + text +
                       "'");
  }
}

// The index of the first NaN or infinity of a host array, or -1 (integer arrays have none).
std::int64_t first_non_finite(const Array& a) {
  std::int64_t first = -1;
  if (dtype_is_float(a.dtype()))
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(a.data());
      for (std::int64_t i = 0; i < a.size() && first < 0; ++i)
        if (!std::isfinite(static_cast<double>(p[i]))) first = i;
    });
  return first;
}

// The image or the kernel (`what`) from `path` (read_single_array), of finite values, checked
// here so that the message names the file. convolve2d itself propagates NaN and inf as IEEE
// arithmetic does (docs/conv.md), which the FFT methods spread over the whole output: a
// non-finite input is almost always a broken file, so the command refuses it, as deconv does.
Array read_conv_input(const std::string& path, const char* what) {
  const Array a = read_single_array(path, what);
  if (const std::int64_t i = first_non_finite(a); i >= 0) {
    const double v = a.at_as_double(i);
    throw InvalidInput(path + ": expected finite " + what + " values, found " +
                       (std::isnan(v) ? std::string("nan")
                        : v > 0       ? "inf"
                                      : "-inf") +
                       " at row " + std::to_string(i / a.dim(1)) + ", column " +
                       std::to_string(i % a.dim(1)));
  }
  return a;
}

// Finite inputs that give a non-finite output overflowed the arithmetic (values near 1e38 in
// single, or an FFT's sums in bf16): a NumericalError, never an output full of inf and NaN.
void check_output_finite(const Array& out, const ConvCliOptions& c) {
  const Array h = out.to(Memory::host).contiguous();
  if (const std::int64_t i = first_non_finite(h); i >= 0)
    throw NumericalError("conv: the " + c.precision + " " + c.method +
                         " convolution of finite inputs overflowed: output row " +
                         std::to_string(i / h.dim(1)) + ", column " + std::to_string(i % h.dim(1)) +
                         " is not finite (scale the inputs down, or use a wider precision)");
}

void run_conv(const Globals& g, const ConvCliOptions& c) {
  check_distinct_paths({{"image", c.image}, {"kernel", c.kernel}}, {{"-o", c.output}});
  (void)io::format_of(c.output);
  io::check_output_path(c.output);
  ConvOptions o;
  o.method = parse_conv_method(c.method);
  o.precision = parse_precision(c.precision);
  o.mode = parse_conv_mode(c.mode);
  o.boundary = parse_boundary_option(c.boundary);
  o.correlate = c.correlate;
  o.device = g.device_kind();
  const Array image = read_conv_input(c.image, "image");
  const Array kernel = read_conv_input(c.kernel, "kernel");
  const auto t0 = std::chrono::steady_clock::now();
  const Array out = convolve2d(image, kernel, o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  detail(g, "conv: " + out.describe() + " in " + std::to_string(ms) + " ms (with transfers)");
  check_output_finite(out, c);
  if (c.check) {
    ConvOptions ref = o;
    ref.precision = Precision::Double;
    ref.device = DeviceKind::Cpu;
    ref.method = ConvMethod::Direct;
    const Array r = convolve2d(image, kernel, ref);
    const ErrorMetrics m = compare(r, out);
    char line[256];
    std::snprintf(line, sizeof line,
                  "check against FP64: MRE %.3e  max abs %.3e  rel Frobenius %.3e", m.mre,
                  m.max_abs, m.rel_frobenius);
    std::cout << line << "\n";
  }
  write_array(
      g, c.output, out,
      "halfscope " HALFSCOPE_VERSION " conv " + c.method + " " + c.precision + " " + c.mode);
}

}  // namespace

void register_conv(CLI::App& app, Globals& g) {
  auto c = std::make_shared<ConvCliOptions>();
  auto* cmd =
      app.add_subcommand("conv", "2D convolution of an image with a kernel (.npy, .fits, ...)");
  cmd->add_option("image", c->image, "image file")->required();
  cmd->add_option("kernel", c->kernel, "kernel file")->required();
  cmd->add_option("-o,--output", c->output, "output file")->required();
  cmd->add_option(
         "--method", c->method,
         "auto, direct, fft (CPU); naive, register, fft, gemm, tensor, cudnn, separable (GPU)")
      ->capture_default_str();
  cmd->add_option("--precision", c->precision, "double, single, tf32, half, mixed, bf16, split")
      ->capture_default_str();
  cmd->add_option("--mode", c->mode, "same, full or valid (scipy.signal.convolve2d)")
      ->capture_default_str();
  cmd->add_option("--boundary", c->boundary,
                  std::string(kBoundaryValues) + ": zero pads with 0, circular is periodic")
      ->capture_default_str();
  cmd->add_flag("--correlate", c->correlate, "cross-correlate instead (scipy.signal.correlate2d)");
  cmd->add_flag("--check", c->check, "print the error against an FP64 reference");
  cmd->callback([&g, c] { run_conv(g, *c); });
}

}  // namespace halfscope::cli
