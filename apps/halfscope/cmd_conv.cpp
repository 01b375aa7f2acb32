// `halfscope conv IMAGE KERNEL -o OUT`: 2D convolution with a chosen method and precision; with
// --check, the error against an FP64 reference computed on the CPU.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/conv.hpp"
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

void run_conv(const Globals& g, const ConvCliOptions& c) {
  (void)io::format_of(c.output);
  io::check_output_path(c.output);
  ConvOptions o;
  o.method = parse_conv_method(c.method);
  o.precision = parse_precision(c.precision);
  o.mode = parse_conv_mode(c.mode);
  o.boundary = parse_boundary(c.boundary);
  o.correlate = c.correlate;
  o.device = g.device_kind();
  const Array image = read_single_array(c.image);
  const Array kernel = read_single_array(c.kernel);
  const auto t0 = std::chrono::steady_clock::now();
  const Array out = convolve2d(image, kernel, o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  detail(g, "conv: " + out.describe() + " in " + std::to_string(ms) + " ms (with transfers)");
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
  cmd->add_option("--boundary", c->boundary, "zero or circular")->capture_default_str();
  cmd->add_flag("--correlate", c->correlate, "cross-correlate instead (scipy.signal.correlate2d)");
  cmd->add_flag("--check", c->check, "print the error against an FP64 reference");
  cmd->callback([&g, c] { run_conv(g, *c); });
}

}  // namespace halfscope::cli
