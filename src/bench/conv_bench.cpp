#include "halfscope/bench/conv_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/metrics.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/sim/kernels.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::bench {

#if !HALFSCOPE_WITH_CUDA
BenchReport run_conv_bench(const ConvBenchOptions&) {
  throw Unsupported("bench conv: needs CUDA; this halfscope was built without it");
}
#else

namespace {

void say(const ConvBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

std::vector<std::pair<ConvMethod, Precision>> default_cases() {
  std::vector<std::pair<ConvMethod, Precision>> out;
  for (ConvMethod m :
       {ConvMethod::Naive, ConvMethod::Register, ConvMethod::FFT, ConvMethod::Gemm,
        ConvMethod::Cudnn, ConvMethod::Tensor, ConvMethod::Separable, ConvMethod::Auto})
    for (Precision p : conv_supported_precisions(m, DeviceKind::Cuda))
      if (p != Precision::Double) out.emplace_back(m, p);
  return out;
}

Array test_image(std::int64_t n, const ConvBenchOptions& o) {
  if (n == 512 && !o.image_512.empty() && std::filesystem::exists(o.image_512)) {
    Array a = io::read_npy(o.image_512);
    if (a.shape() == Shape{512, 512}) return a.astype(DType::f64);
  }
  return sim::random_image(n, n, 1000 + static_cast<std::uint64_t>(n));
}

}  // namespace

BenchReport run_conv_bench(const ConvBenchOptions& o) {
  BenchReport report = BenchReport::start("conv", describe_cuda_device(0));
  const auto cases = o.cases.empty() ? default_cases() : o.cases;
  if (!o.export_dir.empty()) std::filesystem::create_directories(o.export_dir);
  cuda::EventTimer timer;
  for (std::int64_t n : o.sizes) {
    const Array image64 = test_image(n, o);
    if (!o.export_dir.empty())
      io::write_npy(o.export_dir / ("image_" + std::to_string(n) + ".npy"),
                    image64.astype(DType::f32));
    for (std::int64_t w : o.widths) {
      const Array kernel64 = sim::gaussian_kernel(w);
      if (!o.export_dir.empty() && n == o.sizes.front())
        io::write_npy(o.export_dir / ("kernel_" + std::to_string(w) + ".npy"), kernel64);
      // FP64 reference: the direct sum in double on the GPU (an exact-order FP64 direct method).
      ConvOptions ref_opt;
      ref_opt.mode = ConvMode::Same;
      ref_opt.precision = Precision::Double;
      ref_opt.method = ConvMethod::Naive;
      ref_opt.device = DeviceKind::Cuda;
      const Array reference = convolve2d(image64, kernel64, ref_opt);
      // Cross-check the reference with an independent FP64 path (FFTW on the CPU) up to 4096^2;
      // the discrepancy is recorded in every case so the reference's own error is visible.
      double reference_check = NAN;
      if (n <= 4096) {
        ConvOptions cpu_opt = ref_opt;
        cpu_opt.method = ConvMethod::FFT;
        cpu_opt.device = DeviceKind::Cpu;
        reference_check = compare(reference, convolve2d(image64, kernel64, cpu_opt)).rel_frobenius;
      }
      say(o, "conv " + std::to_string(n) + "^2, width " + std::to_string(w));
      for (const auto& [method, precision] : cases) {
        ConvOptions opt;
        opt.mode = ConvMode::Same;
        opt.method = method;
        opt.precision = precision;
        opt.device = DeviceKind::Cuda;
        // The timed loop runs at the kernels' speed: the overflow check is settled once per case
        // with conv_check_overflow() after the loop (ConvOptions::defer_overflow_check).
        opt.defer_overflow_check = true;
        BenchCase c;
        c.implementation = "halfscope";
        c.method = std::string(conv_method_name(method));
        c.precision = std::string(precision_name(precision));
        c.params = {
            {"rows", n},
            {"cols", n},
            {"kernel", w},
            {"mode", std::string("same")},
            {"boundary", std::string("zero")},
            {"reference", std::string("gpu naive double")},
            {"overflow_check", std::string("deferred")},
            {"kernel_given_as", std::string("ConvPlan")},
            {"calls_per_sample", static_cast<std::int64_t>(std::max(o.calls_per_sample, 1))}};
        if (!std::isnan(reference_check)) c.params["reference_vs_fftw_double"] = reference_check;
        try {
          const DType st = storage_dtype(precision);
          const Array img = image64.astype(st).to(Memory::device);
          const Array ker = kernel64.astype(st).to(Memory::device);
          Array out(st, {n, n}, Memory::device);
          const ConvPlan plan(ker, opt);
          plan.run(img, out);  // warm-up: cuFFT plans, caches, Auto's measurement
          std::vector<double> samples;
          double total = 0;
          const int calls = std::max(o.calls_per_sample, 1);
          for (int r = 0; r < o.repeats && (r < 3 || total < o.max_ms_per_case); ++r) {
            timer.start();
            for (int k = 0; k < calls; ++k) plan.run(img, out);
            const double ms = timer.stop_ms() / calls;
            samples.push_back(ms);
            total += ms;
          }
          // The deferred FP16 / BF16 overflow check is settled here, so an overflow is this
          // case's failure and not blamed on the next one.
          conv_check_overflow();
          c.stats = compute_stats(samples);
          const double bytes =
              2.0 * static_cast<double>(n * n) * static_cast<double>(dtype_size(st));
          c.GBps = gbps(bytes, c.stats.median_ms);
          c.TFLOPs = tflops(2.0 * static_cast<double>(n * n) * static_cast<double>(w * w),
                            c.stats.median_ms);
          const ErrorMetrics m = compare(reference, out.to(Memory::host));
          c.error = {{"mre", m.mre}, {"max_abs", m.max_abs}, {"rel_frobenius", m.rel_frobenius}};
          if (method == ConvMethod::Auto) {
            const ConvMethod chosen = plan.resolve_method(img);
            c.params["chosen"] = std::string(conv_method_name(chosen));
          }
        } catch (const Error& e) {
          c.params["failed"] = std::string(e.what());
          say(o, "  " + c.method + " " + c.precision + ": " + e.what());
        }
        report.cases.push_back(std::move(c));
      }
    }
  }
  return report;
}

#endif

}  // namespace halfscope::bench
