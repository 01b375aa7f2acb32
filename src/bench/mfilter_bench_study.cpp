// `halfscope bench mfilter`, case (a): study 001's Table I on this GPU. 16 templates x 256
// samples against 4.32e6 samples of one channel, every GPU method, timed on device-resident
// uniform [-50, 50] data; errors against the FP64 CPU reference on the real and uniform data.
// The backend rows time the internal backend (src/mfilter/backends.hpp); the "public call" rows
// time matched_filter() itself on the same device arrays.
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/config.hpp"

#if HALFSCOPE_WITH_CUDA
#include "bench/mfilter_bench_util.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::bench {

namespace {

// One data set of case (a): inputs on the host and the device, and the FP64 reference of the
// leading correlation times.
struct StudyData {
  std::string name;  // "real" or "uniform"
  Array templates;   // (T, 1, K) float32, host
  Array data;        // (1, L) float32, host
  Array reference;   // (T, 1, n_ref) float32
  Array d_templates, d_data;
};

// What one (method, precision) measured: whole-call times and, for cuBLAS, GemmEx-only times.
struct Measured {
  Stats call;
  std::optional<Stats> gemm;
  BenchCase base;      // errors and memory, shared by the rows of one measurement
  std::string failed;  // the error of a measurement that threw
};

void say(const MfBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

void call_method(const MfBenchMethod& m, const mfilter::DeviceProblem& p, float* gemm_ms) {
  switch (m.method) {
    case MfMethod::Naive:
      mfilter::naive_cuda(p);
      return;
    case MfMethod::Cublas1:
      mfilter::cublas_cuda(p, 1, gemm_ms);
      return;
    case MfMethod::Cublas2:
      mfilter::cublas_cuda(p, 2, gemm_ms);
      return;
    case MfMethod::Cublas3:
      mfilter::cublas_cuda(p, 3, gemm_ms);
      return;
    case MfMethod::Cublas4:
      mfilter::cublas_cuda(p, 4, gemm_ms);
      return;
    case MfMethod::Tensor:
      mfilter::tensor_cuda(p, m.precision);
      return;
    case MfMethod::FFT:
      mfilter::fft_cuda(p);
      return;
    default:
      throw InvalidInput("bench mfilter: no GPU backend for method " + m.name);
  }
}

bool is_cublas(MfMethod m) {
  return m == MfMethod::Cublas1 || m == MfMethod::Cublas2 || m == MfMethod::Cublas3 ||
         m == MfMethod::Cublas4;
}

Measured measure(const MfBenchMethod& m, std::vector<StudyData>& sets, const MfBenchSize& sz,
                 const Array& d_moveouts, const Array& d_weights, Array& d_out, cudaStream_t stream,
                 const MfBenchOptions& o) {
  const std::int64_t T = sz.templates, n_corr = sz.correlation_count();
  Measured r;
  mfilter::DeviceProblem p;
  p.dims = {T, 1, sz.length, sz.samples, sz.step, n_corr, MfNormalize::Short, false};
  p.moveouts = d_moveouts.data_as<std::int64_t>();
  p.weights = d_weights.data_as<float>();
  p.out = d_out.data_as<float>();
  p.stream = stream;
  auto bind = [&p](const StudyData& s) {
    p.templates = s.d_templates.data_as<float>();
    p.data = s.d_data.data_as<float>();
  };
  const double resident =
      static_cast<double>(sets.front().d_templates.nbytes() + sets.front().d_data.nbytes() +
                          d_out.nbytes() + d_moveouts.nbytes() + d_weights.nbytes());
  // Accuracy first (these calls are also the warm-up: plans, handles, scratch pools). The output
  // is filled with NaN before each, so a method that leaves it unwritten cannot pass.
  for (std::size_t k = 0; k < sets.size(); ++k) {
    bind(sets[k]);
    HS_CUDA_CHECK(
        cudaMemsetAsync(d_out.data(), 0xFF, static_cast<std::size_t>(d_out.nbytes()), stream));
    std::optional<detail::MemoryWatch> watch;
    // The method's first call: persistent allocations (cuFFT plans, cuBLAS workspaces) are
    // made here and belong to its footprint; memory does not depend on the data set.
    if (k == 0) watch.emplace();
    call_method(m, p, nullptr);
    if (watch) watch->finish(r.base, resident);
    const Array got = detail::leading_block(p.out, T, n_corr, sets[k].reference.dim(2), stream);
    detail::record_error(r.base, sets[k].name + "_", sets[k].reference, got);
  }
  // Timed calls on the uniform set. The data (17 MB) would fit in L2, but each call writes a
  // 276 MB result that evicts it, so consecutive calls on one input set do not run from L2.
  // The whole call is timed with gemm_ms = nullptr: asking for the GemmEx time makes the
  // backend synchronise on its GemmEx timer in every chunk, host round trips that are not part
  // of an ordinary call. The GemmEx-only times come from a loop of their own.
  bind(sets.back());
  cuda::EventTimer timer(stream);
  std::vector<double> call_ms, gemm_ms;
  double total = 0;
  for (int i = 0; i < o.repeats && (i < 3 || total < o.max_ms_per_case); ++i) {
    timer.start();
    call_method(m, p, nullptr);
    const double ms = timer.stop_ms();
    call_ms.push_back(ms);
    total += ms;
  }
  r.call = compute_stats(call_ms);
  if (is_cublas(m.method)) {
    total = 0;
    for (int i = 0; i < o.repeats && (i < 3 || total < o.max_ms_per_case); ++i) {
      float g = NAN;
      call_method(m, p, &g);
      if (std::isfinite(g)) gemm_ms.push_back(g);
      total += std::isfinite(g) ? g : 0.0;
    }
    if (!gemm_ms.empty()) r.gemm = compute_stats(gemm_ms);
  }
  return r;
}

// The "public call" rows: matched_filter() itself on device arrays, timed like the backend
// rows (CUDA events on the default stream around each call, same repeats), so the cost of
// what a user calls -- argument checks, the finiteness scan of the inputs, the output
// allocation -- is visible next to the backend alone, and next to the PyTorch peers, which
// are timed as whole public pipelines too. Errors are those of the public call's own output.
Measured measure_public(const MfBenchMethod& m, std::vector<StudyData>& sets, const MfBenchSize& sz,
                        const MfBenchOptions& o) {
  const std::int64_t T = sz.templates, n_corr = sz.correlation_count();
  MfOptions opt;
  opt.method = m.method;
  opt.precision = m.precision;
  opt.device = DeviceKind::Cuda;
  opt.step = sz.step;
  opt.network_sum = false;  // one channel: the (T, 1, n_corr) CC, as the backend rows write
  Measured r;
  for (StudyData& s : sets) {
    const Array out = matched_filter(s.d_templates, s.d_data, opt);
    HS_CUDA_CHECK(cudaDeviceSynchronize());
    const Array got =
        detail::leading_block(out.data_as<float>(), T, n_corr, s.reference.dim(2), nullptr);
    detail::record_error(r.base, s.name + "_", s.reference, got);
  }
  const StudyData& timed = sets.back();
  cuda::EventTimer timer(nullptr);
  std::vector<double> call_ms;
  double total = 0;
  for (int i = 0; i < o.repeats && (i < 3 || total < o.max_ms_per_case); ++i) {
    timer.start();
    const Array out = matched_filter(timed.d_templates, timed.d_data, opt);
    const double ms = timer.stop_ms();
    call_ms.push_back(ms);
    total += ms;
  }
  r.call = compute_stats(call_ms);
  return r;
}

StudyData make_set(std::string name, Array templates, Array data, std::int64_t n_ref) {
  StudyData s;
  s.name = std::move(name);
  const std::int64_t T = templates.dim(0), K = templates.dim(1), L = data.size();
  s.templates = templates.reshape({T, 1, K});
  s.data = data.reshape({1, L});
  s.reference = detail::fp64_reference(s.templates, s.data, {}, {}, n_ref, false);
  s.d_templates = s.templates.to(Memory::device);
  s.d_data = s.data.to(Memory::device);
  return s;
}

}  // namespace

void run_mfilter_study_case(const MfBenchOptions& o, BenchReport& report) {
  const MfBenchSize sz = study_case_size();
  const std::int64_t T = sz.templates, K = sz.length, L = sz.samples;
  const std::int64_t n_corr = sz.correlation_count();
  const std::int64_t n_ref = study_reference_times(n_corr, o.reference_times, o.quick);
  std::vector<StudyData> sets;  // real first (when staged), uniform last (the timed one)
  std::string real_note = "none (no --real-data)";
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.real_data.empty()) {
    const Array trace = load_real_trace(o.real_data, K);
    const auto starts = loudest_window_starts(trace, T, K);
    say(o, "mfilter (a): FP64 reference on real data, " + std::to_string(n_ref) + " times");
    sets.push_back(make_set("real", cut_windows(trace, starts, K), tile_trace(trace, L), n_ref));
    real_note = o.real_data.filename().string() + " (" + std::to_string(trace.size()) +
                " samples) tiled to " + std::to_string(L) + "; templates: " + std::to_string(T) +
                " disjoint windows centred on its largest |x|";
  }
  say(o, "mfilter (a): FP64 reference on uniform data, " + std::to_string(n_ref) + " times");
  sets.push_back(make_set("uniform", uniform_array({T, K}, -50.0f, 50.0f, kMfUniformSeed),
                          uniform_array({1, L}, -50.0f, 50.0f, kMfUniformSeed + 1).reshape({L}),
                          n_ref));
  const double reference_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.export_dir.empty()) {
    std::filesystem::create_directories(o.export_dir);
    for (const StudyData& s : sets) {
      io::write_npy(o.export_dir / ("templates_" + s.name + ".npy"), s.templates.reshape({T, K}));
      io::write_npy(o.export_dir / ("data_" + s.name + ".npy"), s.data.reshape({L}));
      io::write_npy(o.export_dir / ("reference_" + s.name + ".npy"),
                    s.reference.reshape({T, n_ref}));
    }
  }
  const std::vector<std::int64_t> zeros(static_cast<std::size_t>(T), 0);
  const std::vector<float> ones(static_cast<std::size_t>(T), 1.0f);
  const Array d_moveouts = Array::from_values<std::int64_t>(zeros, {T, 1}).to(Memory::device);
  const Array d_weights = Array::from_values<float>(ones, {T, 1}).to(Memory::device);
  Array d_out(DType::f32, {T, 1, n_corr}, Memory::device);
  cuda::Stream stream;

  std::map<std::string, Measured> done;  // cuBLAS rows share one measurement
  std::vector<MfBenchMethod> rows = study_methods();
  for (const MfBenchMethod& m : study_public_methods()) rows.push_back(m);
  for (const MfBenchMethod& m : rows) {
    const std::string key =
        m.name + ":" + std::string(precision_name(m.precision)) + (m.public_call ? ":public" : "");
    BenchCase c = study_case_template(m, sz, n_ref, real_note);
    c.params["reference_seconds"] = reference_s;
    if (!done.count(key)) {
      say(o, "mfilter (a): " + m.name + " " + c.precision);
      try {
        done[key] = m.public_call
                        ? measure_public(m, sets, sz, o)
                        : measure(m, sets, sz, d_moveouts, d_weights, d_out, stream.get(), o);
      } catch (const Error& e) {
        done[key].failed = e.what();
        say(o, "  " + m.name + " " + c.precision + ": " + e.what());
        (void)cudaGetLastError();  // a failed launch must not fail the next method's checks
      }
    }
    const Measured& r = done.at(key);
    for (const auto& [k, v] : r.base.params) c.params[k] = v;
    c.error = r.base.error;
    if (r.failed.empty() && m.gemm_only && !r.gemm)
      c.params["failed"] = m.name + " reported no cublasGemmEx time";
    else if (!r.failed.empty())
      c.params["failed"] = r.failed;
    else {
      c.stats = m.gemm_only ? *r.gemm : r.call;
      c.GBps = gbps(sz.min_bytes(false), c.stats.median_ms);
      c.TFLOPs = tflops(sz.flops(), c.stats.median_ms);
    }
    report.cases.push_back(std::move(c));
  }
}

}  // namespace halfscope::bench
#endif
