// `halfscope bench mfilter`, case (b): a network-scale matched filter. 1000 templates x 30
// channels x 256 samples against 4.32e6 samples per channel (quick: 64 x 8 x 256 x 2^22), with
// moveouts and weights, on the tensor cores; timed three ways:
// - `tensor`: the backend computing the whole network stack into device memory (T x n_corr
//   float32), the rate the tensor-core kernel reaches; error against the FP64 CPU reference on
//   the leading correlation times;
// - `tensor+detect`: matched_filter_detect on the device-resident inputs, the product path
//   (time chunks, stack searched on the device, MAD threshold, declustering), with its memory
//   and whether it finds every template at its planted origin;
// - `tensor+detect-host`: the same on host inputs, streamed through the GPU in time chunks (the
//   path for data larger than device memory; the copies are part of the time).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "halfscope/config.hpp"

#if HALFSCOPE_WITH_CUDA
#include "bench/mfilter_bench_util.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::bench {

namespace {

constexpr double kMadThreshold = 8.0;         // EQcorrscan's usual MAD multiple
constexpr std::int64_t kMinSeparation = 100;  // samples

void say(const MfBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

// Correlation times around planted origins, where the stack reaches sum_c w ~ 0.75 C (~22 at
// 30 channels): the leading-times reference sees only noise (|stack| of a few tenths), so the
// error at the peaks, where FP16 products and the normalization matter most, is measured here.
constexpr std::int64_t kOriginWindows = 4;       // the first templates' origins
constexpr std::int64_t kOriginWindowTimes = 32;  // correlation times per window, centred

struct OriginReference {
  std::vector<std::int64_t> starts;  // first correlation time of each window
  Array reference;                   // (T, windows * kOriginWindowTimes) float32
};

OriginReference origin_reference(const MfNetworkInputs& in, const MfBenchSize& sz) {
  const std::int64_t n_corr = sz.correlation_count(), K = sz.length;
  const std::int64_t W = std::min(kOriginWindowTimes, n_corr), T = sz.templates;
  std::int64_t max_moveout = 0;
  for (std::int64_t i = 0; i < in.moveouts.size(); ++i)
    max_moveout = std::max(max_moveout, in.moveouts.data_as<std::int64_t>()[i]);
  OriginReference r;
  const auto windows =
      std::min<std::int64_t>(kOriginWindows, static_cast<std::int64_t>(in.origins.size()));
  r.reference = Array(DType::f32, {T, windows * W});
  for (std::int64_t k = 0; k < windows; ++k) {
    const std::int64_t start =
        std::clamp<std::int64_t>(in.origins[static_cast<std::size_t>(k)] - W / 2, 0, n_corr - W);
    r.starts.push_back(start);
    // Every window of these W times, at every moveout, lies inside this slice of the data, so
    // the reference on the slice equals the reference on the whole data at times start + i.
    const std::int64_t stop = std::min(sz.samples, start + W - 1 + max_moveout + K);
    const Array part = in.data.slice(1, start, stop).contiguous();
    const Array ref = detail::fp64_reference(in.templates, part, in.moveouts, in.weights, W, true);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < W; ++i)
        r.reference.data_as<float>()[t * windows * W + k * W + i] = ref.data_as<float>()[t * W + i];
  }
  return r;
}

// The backend alone, writing the whole stack to device memory.
void measure_stack(BenchCase& c, const MfBenchSize& sz, Precision precision,
                   const Array& d_templates, const Array& d_data, const Array& d_moveouts,
                   const Array& d_weights, const Array& reference, const OriginReference& peaks,
                   const MfBenchOptions& o) {
  const std::int64_t T = sz.templates, n_corr = sz.correlation_count();
  const std::int64_t out_bytes = T * n_corr * 4;
  const std::int64_t margin = std::int64_t{2} << 30;  // scratch of the kernel and libraries
  if (out_bytes + margin > detail::device_free_bytes())
    throw Unsupported("bench mfilter (b): the whole stack needs " +
                      std::to_string(out_bytes >> 20) + " MiB + 2 GiB of scratch; " +
                      std::to_string(detail::device_free_bytes() >> 20) + " MiB are free");
  Array d_out(DType::f32, {T, n_corr}, Memory::device);
  cuda::Stream stream;
  mfilter::DeviceProblem p;
  p.dims = {T, sz.channels, sz.length, sz.samples, sz.step, n_corr, MfNormalize::Short, true};
  p.templates = d_templates.data_as<float>();
  p.data = d_data.data_as<float>();
  p.moveouts = d_moveouts.data_as<std::int64_t>();
  p.weights = d_weights.data_as<float>();
  p.out = d_out.data_as<float>();
  p.stream = stream.get();
  HS_CUDA_CHECK(cudaMemsetAsync(d_out.data(), 0xFF, static_cast<std::size_t>(out_bytes),
                                stream.get()));  // NaN: an unwritten stack cannot pass
  {
    detail::MemoryWatch watch;
    mfilter::tensor_cuda(p, precision);  // also the warm-up
    watch.finish(c, static_cast<double>(d_templates.nbytes() + d_data.nbytes() + out_bytes +
                                        d_moveouts.nbytes() + d_weights.nbytes()));
  }
  detail::record_error(c, "", reference,
                       detail::leading_block(p.out, T, n_corr, reference.dim(1), stream.get()));
  if (!peaks.starts.empty()) {
    const std::int64_t W = peaks.reference.dim(1) / static_cast<std::int64_t>(peaks.starts.size());
    Array got(DType::f32, peaks.reference.shape());
    for (std::size_t k = 0; k < peaks.starts.size(); ++k) {
      const Array block =
          detail::leading_block(p.out + peaks.starts[k], T, n_corr, W, stream.get());
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t i = 0; i < W; ++i)
          got.data_as<float>()[t * peaks.reference.dim(1) + static_cast<std::int64_t>(k) * W + i] =
              block.data_as<float>()[t * W + i];
    }
    detail::record_error(c, "origins_", peaks.reference, got);
    std::string starts;
    for (const std::int64_t s0 : peaks.starts)
      starts += (starts.empty() ? "" : ", ") + std::to_string(s0);
    c.params["origin_reference"] = std::to_string(peaks.starts.size()) + " windows of " +
                                   std::to_string(W) + " correlation times starting at " + starts +
                                   " (around planted origins: error origins_max_abs)";
  }
  cuda::EventTimer timer(stream.get());
  std::vector<double> ms;
  double total = 0;
  const int repeats = std::min(o.repeats, o.quick ? 10 : 5);
  for (int i = 0; i < repeats && (i < 3 || total < o.max_ms_per_case); ++i) {
    timer.start();
    mfilter::tensor_cuda(p, precision);
    ms.push_back(timer.stop_ms());
    total += ms.back();
  }
  c.stats = compute_stats(ms);
  c.params["path"] = std::string("tensor_cuda backend, whole stack in device memory");
}

// The product path: correlation and detection in one call, on device or host inputs.
void measure_detect(BenchCase& c, Precision precision, const MfNetworkInputs& in,
                    const Array& templates, const Array& data, const MfBenchOptions& o) {
  MfOptions opt;
  opt.method = MfMethod::Tensor;
  opt.precision = precision;
  opt.device = DeviceKind::Cuda;
  const MfNetwork net{in.moveouts, in.weights};
  DetectOptions det;
  det.threshold = kMadThreshold;
  det.type = ThresholdType::Mad;
  det.min_separation = kMinSeparation;
  std::vector<Detection> found;
  {
    detail::MemoryWatch watch;  // also the warm-up
    found = matched_filter_detect(templates, data, opt, net, det);
    watch.finish(
        c, templates.on_device() ? static_cast<double>(templates.nbytes() + data.nbytes()) : 0.0);
  }
  // The call returns host detections, so it synchronises: a steady clock times it whole.
  const int repeats = std::min(o.repeats, 3);
  c.stats =
      time_host([&] { found = matched_filter_detect(templates, data, opt, net, det); }, 0, repeats);
  c.params["path"] = std::string("matched_filter_detect on ") +
                     (data.on_device() ? "device inputs" : "host inputs (streamed in chunks)");
  c.params["threshold"] = std::to_string(kMadThreshold) + " x MAD";
  c.params["min_separation"] = kMinSeparation;
  c.params["detections"] = static_cast<std::int64_t>(found.size());
  // Every channel of template t correlates to 1 at its origin: a detection within one sample.
  c.error["planted_found_fraction"] = planted_found_fraction(found, in.origins, 1);
}

}  // namespace

void run_mfilter_network_case(const MfBenchOptions& o, BenchReport& report) {
  const MfBenchSize sz = network_case_size(o.quick);
  const std::int64_t n_ref = network_reference_times(sz);
  say(o, "mfilter (b): " + std::to_string(sz.templates) + " templates x " +
             std::to_string(sz.channels) + " channels x " + std::to_string(sz.samples) +
             " samples: inputs and FP64 reference (" + std::to_string(n_ref) + " times)");
  const MfNetworkInputs in = make_network_inputs(sz, kMfMaxMoveout, kMfNetworkSeed);
  const Array reference =
      detail::fp64_reference(in.templates, in.data, in.moveouts, in.weights, n_ref, true);
  const OriginReference peaks = origin_reference(in, sz);
  const Array d_templates = in.templates.to(Memory::device);
  const Array d_data = in.data.to(Memory::device);
  const Array d_moveouts = in.moveouts.to(Memory::device);
  const Array d_weights = in.weights.to(Memory::device);
  for (Precision p : {Precision::Mixed, Precision::Split}) {
    for (const char* method : {"tensor", "tensor+detect", "tensor+detect-host"}) {
      BenchCase c = network_case_template(sz, method, p, n_ref);
      say(o, std::string("mfilter (b): ") + method + " " + c.precision);
      try {
        if (c.method == "tensor")
          measure_stack(c, sz, p, d_templates, d_data, d_moveouts, d_weights, reference, peaks, o);
        else if (c.method == "tensor+detect")
          measure_detect(c, p, in, d_templates, d_data, o);
        else
          measure_detect(c, p, in, in.templates, in.data, o);
        // Per-row traffic floor: the stack row writes T n_corr floats; the detect rows never
        // write the stack (it is searched chunk by chunk on the device), only read the inputs.
        const double inputs = 4.0 * static_cast<double>(sz.channels * sz.samples +
                                                        sz.templates * sz.channels * sz.length);
        const bool stack = c.method == "tensor";
        c.GBps = gbps(stack ? sz.min_bytes(true) : inputs, c.stats.median_ms);
        if (!stack) c.params["bytes_model"] = std::string("4 (C L + T C K): the inputs once");
        c.TFLOPs = tflops(sz.flops(), c.stats.median_ms);
        // Direct-equivalent flops: split runs >= 3 FP16 products per multiply-add, so its
        // "% of the FP16 ceiling" understates the tensor-core load; mixed is the target row.
        c.params["flops_model"] =
            std::string(p == Precision::Split ? "2 T C K n_corr direct-equivalent; split "
                                                "executes >= 3x these products"
                                              : "2 T C K n_corr direct-equivalent");
        c.params["target"] = stack && p == Precision::Mixed;
      } catch (const Error& e) {
        c.params["failed"] = std::string(e.what());
        say(o, std::string("  ") + method + " " + c.precision + ": " + e.what());
        (void)cudaGetLastError();
      }
      report.cases.push_back(std::move(c));
    }
  }
}

}  // namespace halfscope::bench
#endif
