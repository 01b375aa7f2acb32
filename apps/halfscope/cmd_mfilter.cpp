// `halfscope mfilter TEMPLATES DATA -o CC.npy`: matched filtering (study 001) of templates
// against continuous data, per channel or stacked over the network with moveouts and weights
// (Fast Matched Filter's semantics), with optional detection (EQcorrscan's semantics) and an
// accuracy check against the CPU FP64 reference. Inputs are read and checked by
// io/seismic_input.hpp; numerics are the library's (halfscope/mfilter.hpp). Under mpirun the
// call is split over the ranks (mfilter_ranks.hpp, halfscope/mpi/mfilter.hpp) and rank 0 writes
// the same files as one process.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/seismic_input.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter_ranks.hpp"

namespace halfscope::cli {

namespace {

struct MfCliOptions {
  std::vector<std::string> inputs;  // TEMPLATES DATA, or DATA alone with --template-times
  std::string output, precision, method = "auto", normalize = "short";
  std::string moveouts, weights;
  std::int64_t step = 1;
  bool per_channel = false;
  bool detect = false;
  double threshold = 8.0;
  std::string threshold_type = "mad";
  std::int64_t min_separation = 1;
  std::string detections;
  std::string template_times, template_data;
  std::int64_t template_length = 0;
  bool check = false;
  std::vector<int> devices;     // --devices 0,1,2,3: templates spread over these CUDA devices
  std::int64_t time_parts = 0;  // under mpirun: correlation-time parts (0: automatic)
};

// A network table's shape (a one-dimensional file of one template taken as (1, C)) and type,
// checked against the templates' shape: the messages name the file.
void check_network_file(const std::string& path, const char* what, Shape shape, DType dtype,
                        std::int64_t templates, std::int64_t channels, bool integer) {
  if (shape.size() == 1 && templates == 1) shape = {1, shape[0]};
  if (shape.size() != 2 || shape[0] != templates || shape[1] != channels)
    throw InvalidInput(path + ": " + what + " have shape " + shape_to_string(shape) +
                       ": expected (" + std::to_string(templates) + ", " +
                       std::to_string(channels) + ") (templates, channels)");
  const bool is_int = dtype_is_signed_int(dtype) || dtype == DType::u8 || dtype == DType::u16 ||
                      dtype == DType::u32;
  if (integer && !is_int)
    throw InvalidInput(path + ": " + what + " of dtype " + std::string(dtype_name(dtype)) +
                       ": expected integers that fit int64 (int8..int64, uint8..uint32: samples)");
}

void check_network_format(const std::string& path, const char* what) {
  if (io::format_of(path) != io::Format::npy)
    throw InvalidInput(path + ": " + what + " must be a .npy array of shape (T, C)");
}

// A (T, C) network array from a .npy file, checked against the templates' shape.
Array read_network_array(const std::string& path, const char* what, std::int64_t templates,
                         std::int64_t channels, bool integer) {
  check_network_format(path, what);
  Array a = io::read_npy(path);
  check_network_file(path, what, a.shape(), a.dtype(), templates, channels, integer);
  if (a.ndim() == 1) a = a.reshape({1, a.dim(0)});
  if (!integer) {
    const Array v = a.astype(DType::f64);
    for (std::int64_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v.data_as<double>()[i]))
        throw InvalidInput(path + ": " + what + " [" + std::to_string(i / channels) + ", " +
                           std::to_string(i % channels) + "] is not finite: expected a real");
    return v;
  }
  return a.astype(DType::i64);
}

// The same under mpirun: a (T, C) file's header only, each rank then reading its template
// group's rows (io::npy_table, whose messages are read_network_array's); a one-dimensional file
// (one template) is read whole.
std::shared_ptr<const io::TableSource> network_table(const std::string& path, const char* what,
                                                     std::int64_t templates, std::int64_t channels,
                                                     bool integer) {
  check_network_format(path, what);
  std::shared_ptr<const io::TableSource> table = io::npy_table(path, what);
  if (table->shape().size() == 1)
    return io::array_table(read_network_array(path, what, templates, channels, integer));
  check_network_file(path, what, table->shape(), table->dtype(), templates, channels, integer);
  return table;
}

void report_gaps(const Globals& g, const io::SeismicData& d) {
  if (g.rank != 0) return;  // every rank reads the inputs; one reports
  for (const io::Gap& gap : d.gaps) {
    const bool overlap = gap.missing_samples < 0;
    warn(d.source + ": " + gap.id + (overlap ? ": overlap " : ": gap ") +
         io::format_iso8601(gap.start_ns, 6) + " to " + io::format_iso8601(gap.end_ns, 6) + " (" +
         std::to_string(overlap ? -gap.missing_samples : gap.missing_samples) +
         (overlap ? " samples; the earlier segment's samples kept)" : " samples zero-filled)"));
  }
  for (const std::string& n : d.notes) warn(d.source + ": " + n);
}

std::string detections_csv(const std::vector<Detection>& found, const io::SeismicTemplates& t,
                           const io::SeismicData& d) {
  std::ostringstream out;
  out << "template,correlation_index,sample,time,cc_sum,threshold,channels_used\n";
  char num[64];
  for (const Detection& x : found) {
    out << t.labels[static_cast<std::size_t>(x.template_index)] << ',' << x.correlation_index << ','
        << x.sample << ',';
    if (d.start_ns) out << io::format_iso8601(d.time_of_sample(x.sample), 6);
    std::snprintf(num, sizeof num, ",%.9g,%.9g,", x.value, x.threshold);
    out << num << x.channels_used << '\n';
  }
  return out.str();
}

void check_usage(const Globals& g, const MfCliOptions& c) {
  const std::size_t want = c.template_times.empty() ? 2 : 1;
  if (c.inputs.size() != want)
    throw InvalidInput(
        std::string("mfilter: ") + std::to_string(c.inputs.size()) +
        " input files given: expected " +
        (want == 2 ? "TEMPLATES DATA" : "DATA alone (templates cut with --template-times)"));
  if (c.output.empty() && !c.detect)
    throw InvalidInput("mfilter: no output: expected -o CC.npy, --detect, or both");
  if (c.detect && c.per_channel)
    throw InvalidInput("mfilter: --detect searches the network stack: expected no --per-channel");
  if (!c.detections.empty() && !c.detect)
    throw InvalidInput("mfilter: --detections " + c.detections + " needs --detect");
  if (!c.template_times.empty() && c.template_length < 1)
    throw InvalidInput(
        "mfilter: --template-times needs --template-length K (K >= 1), found " +
        (c.template_length == 0 ? std::string("none") : std::to_string(c.template_length)));
  if (c.template_times.empty() && (c.template_length != 0 || !c.template_data.empty()))
    throw InvalidInput("mfilter: --template-length and --template-data need --template-times");
  if (c.step < 1)
    throw InvalidInput("mfilter: --step " + std::to_string(c.step) + ": expected >= 1");
  if (c.min_separation < 0)
    throw InvalidInput("mfilter: --min-separation " + std::to_string(c.min_separation) +
                       ": expected >= 0 samples");
  if (c.time_parts < 0 || c.time_parts > g.ranks)
    throw InvalidInput("mfilter: --time-parts " + std::to_string(c.time_parts) + ": expected 0 " +
                       "(automatic) to the " + std::to_string(g.ranks) +
                       " MPI rank(s) of this job (mpirun -np N halfscope mfilter ...)");
  if (c.detect && (!std::isfinite(c.threshold) || c.threshold < 0))
    throw InvalidInput(
        "mfilter: --threshold " + std::to_string(c.threshold) + ": expected a finite value >= 0 (" +
        (c.threshold_type == "abs" ? "the |CC sum| to reach" : "a MAD factor") + ")");
  // The per-channel CC is 3-D: refused here, not after the correlation has run.
  if (c.per_channel && !c.output.empty()) {
    const io::Format f = io::format_of(c.output);
    if (f == io::Format::csv || f == io::Format::png)
      throw InvalidInput("-o " + c.output + ": --per-channel writes a 3-D (T, C, n) array, which " +
                         std::string(io::format_name(f)) +
                         " cannot hold: expected .npy, .npz or .fits");
  }
  const std::size_t data_at = c.inputs.size() - 1;
  check_distinct_paths({{"TEMPLATES", want == 2 ? c.inputs[0] : std::string()},
                        {"DATA", c.inputs[data_at], true},
                        {"--moveouts", c.moveouts},
                        {"--weights", c.weights},
                        {"--template-times", c.template_times},
                        {"--template-data", c.template_data, true}},
                       {{"-o", c.output}, {"--detections", c.detections}});
  check_text_output({"--detections", c.detections}, "CSV");
  if (g.ranks > 1 && !c.devices.empty())
    throw InvalidInput("mfilter: --devices with " + std::to_string(g.ranks) +
                       " MPI ranks: expected no --devices (each rank uses one GPU: its rank "
                       "among the ranks of its host, modulo the host's devices)");
}

// A checked call with its inputs read (on every rank of an MPI job).
struct MfJob {
  MfOptions options;
  DetectOptions detect;
  io::SeismicData data;  // data.data stays empty when `samples` reads them by windows
  /// Under mpirun (io::open_seismic_windows: a .npy, or SAC and MiniSEED files):
  /// the data, which each rank reads by windows.
  std::unique_ptr<io::SampleSource> samples;
  io::SeismicTemplates t;  // t.templates stays empty when `bank` reads them by groups
  /// Under mpirun: --template-data read by windows, which `bank` cuts from (declared first, so
  /// it outlives `bank`).
  std::unique_ptr<io::SampleSource> template_samples;
  /// Under mpirun with a .npy TEMPLATES, or templates cut from data read by windows: the
  /// templates, of which each rank reads (or cuts) its template group.
  std::unique_ptr<io::TemplateSource> bank;
  MfNetwork network;
  /// Under mpirun: --moveouts / --weights files, of which each rank reads its template group's
  /// rows (network's arrays then stay empty).
  NetworkTables tables;
  std::string history;  // of the correlation output
};

MfJob load_job(const Globals& g, const MfCliOptions& c) {
  check_usage(g, c);
  // Outputs first, so a bad path fails before any work.
  if (!c.output.empty()) {
    // The CC is an array without sample rate or start time: waveform formats cannot hold it.
    const io::Format f = io::format_of(c.output);
    if (f == io::Format::mseed || f == io::Format::sac)
      throw InvalidInput("-o " + c.output + ": " + std::string(io::format_name(f)) +
                         " holds waveforms: expected an array file for the CC (.npy, .npz, .fits, "
                         ".csv or .png)");
    io::check_output_path(c.output);
  }
  if (!c.detections.empty()) io::check_output_path(c.detections);
  MfOptions o;
  o.normalize = parse_mf_normalize(c.normalize);
  o.method = parse_mf_method(c.method);
  if (!c.precision.empty()) o.precision = parse_precision(c.precision);
  o.device = g.device_kind();
  o.step = c.step;
  o.network_sum = !c.per_channel;
  o.devices = c.devices;
  DetectOptions det;
  det.threshold = c.threshold;
  det.type = parse_threshold_type(c.threshold_type);
  det.min_separation = c.min_separation;

  const std::string& data_spec = c.inputs.back();
  // Under mpirun DATA (and --template-data) are read by windows, each rank its share, where
  // io::open_seismic_windows can; templates cut from them are cut by each rank for its group.
  const auto windows = [&](const std::string& spec, io::SeismicData& info) {
    std::unique_ptr<io::SampleSource> source;
    if (g.ranks > 1) {
      io::WindowedData w = io::open_seismic_windows(spec);
      source = std::move(w.samples);
      if (source) info = std::move(w.info);
    }
    if (source)
      detail(g, "mfilter: each rank reads its windows of " + spec);
    else
      info = io::read_seismic_data(spec);
    report_gaps(g, info);
    return source;
  };
  io::SeismicData data;
  std::unique_ptr<io::SampleSource> samples = windows(data_spec, data);
  const Shape data_shape = samples ? samples->shape() : data.data.shape();
  io::SeismicTemplates t;
  std::unique_ptr<io::TemplateSource> bank;
  std::unique_ptr<io::SampleSource> template_samples;
  NetworkTables tables;
  const auto cut = [&](const io::SeismicData& from, const io::SampleSource* windowed) {
    if (!windowed) {
      t = io::cut_templates(from, c.template_times, c.template_length);
      return;
    }
    io::CutTemplateSource by_groups =
        io::cut_template_source(from, *windowed, c.template_times, c.template_length);
    t.labels = std::move(by_groups.labels);
    bank = std::move(by_groups.templates);
    tables = {std::move(by_groups.moveouts), std::move(by_groups.weights)};
    detail(g, "mfilter: each rank cuts its template group from " + from.source);
  };
  if (c.template_times.empty() && g.ranks > 1 &&
      io::format_of(c.inputs.front()) == io::Format::npy) {
    bank = io::npy_templates(c.inputs.front());
    detail(g, "mfilter: each rank reads its template group of " + c.inputs.front());
    for (std::int64_t i = 0; i < bank->shape()[0]; ++i) t.labels.push_back(std::to_string(i));
  } else if (c.template_times.empty()) {
    t = io::read_template_array(c.inputs.front());
  } else if (c.template_data.empty()) {
    cut(data, samples.get());
  } else {
    io::SeismicData src;
    template_samples = windows(c.template_data, src);
    if (src.channel_ids != data.channel_ids)
      throw InvalidInput("--template-data " + c.template_data + ": " +
                         std::to_string(src.channel_ids.size()) + " channels (" +
                         src.channel_ids.front() + ", ...): expected the channels of " + data_spec +
                         " in the same order (" + data.channel_ids.front() + ", ...)");
    cut(src, template_samples.get());
  }
  const std::string tname = c.template_times.empty() ? c.inputs.front() : c.template_times;
  const Shape t_shape = bank ? bank->shape() : t.templates.shape();
  const std::int64_t T = t_shape[0], C = t_shape[1], K = t_shape[2];
  const std::int64_t L = data_shape[1];
  if (C != data_shape[0])
    throw InvalidInput(tname + ": templates have " + std::to_string(C) + " channels: expected " +
                       std::to_string(data_shape[0]) + ", the channels of " + data_spec);
  if (K > L)
    throw InvalidInput(tname + ": templates of " + std::to_string(K) + " samples: expected at " +
                       "most the " + std::to_string(L) + " samples of " + data_spec);
  // --moveouts / --weights replace what cutting the templates gave; under mpirun each rank
  // reads (or computes from the picks) only its template group's rows.
  MfNetwork net{t.moveouts, t.weights};
  const auto replace = [&](const std::string& path, const char* what, bool integer, Array& array,
                           std::shared_ptr<const io::TableSource>& table) {
    if (path.empty()) return;
    array = {};
    if (g.ranks > 1)
      table = network_table(path, what, T, C, integer);
    else
      array = read_network_array(path, what, T, C, integer);
  };
  replace(c.moveouts, "moveouts", true, net.moveouts, tables.moveouts);
  replace(c.weights, "weights", false, net.weights, tables.weights);
  if (g.ranks > 1 && !(c.moveouts.empty() && c.weights.empty()))
    detail(g, "mfilter: each rank reads its template group's rows of the network");

  const MfMethod method = mf_resolve_method(o, K);
  const Precision precision = o.precision.value_or(mf_default_precision(method));
  info(g, "mfilter: " + std::to_string(T) + " templates x " + std::to_string(C) + " channels x " +
              std::to_string(K) + " samples against " + std::to_string(L) + " samples, " +
              std::to_string(mf_correlation_count(L, K, c.step)) + " correlation times; method " +
              std::string(mf_method_name(method)) + ", precision " +
              std::string(precision_name(precision)));
  MfJob job{o,
            det,
            std::move(data),
            std::move(samples),
            std::move(t),
            std::move(template_samples),
            std::move(bank),
            std::move(net),
            std::move(tables),
            ""};
  job.history = "halfscope " HALFSCOPE_VERSION " mfilter " + std::string(mf_method_name(method)) +
                " " + std::string(precision_name(precision)) + " " + c.normalize;
  return job;
}

// Both outputs or neither: the detections CSV is written to its temporary file first, on disk
// before the correlation is written (a full disk fails it there), and renamed only once the
// correlation file is in place (write_array is atomic itself).
void write_outputs(const Globals& g, const MfCliOptions& c, const MfJob& job, const MfRun& run) {
  std::unique_ptr<io::AtomicOutput> detections_out;
  std::string csv;
  if (c.detect) {
    csv = detections_csv(run.found, job.t, job.data);
    if (!c.detections.empty()) {
      detections_out = std::make_unique<io::AtomicOutput>(c.detections);
      detections_out->write(csv);
      detections_out->finish();
    }
  }
  if (run.cc_file) {
    run.cc_file->commit();  // written by the ranks (mpi::write_result_npy)
    info(g, "wrote " + c.output);
  } else if (!c.output.empty()) {
    write_array(g, c.output, run.cc, job.history);
  }
  if (c.detect) {
    if (detections_out) {
      detections_out->commit();
      info(g, "wrote " + c.detections);
    } else {
      std::cout << csv;
    }
    info(g, "mfilter: " + std::to_string(run.found.size()) + " detection" +
                (run.found.size() == 1 ? "" : "s"));
  }
}

// One process: the library calls of halfscope/mfilter.hpp.
MfRun run_one_process(const MfCliOptions& c, const MfJob& job) {
  MfRun run;
  const Array& templates = job.t.templates;
  const Array& data = job.data.data;
  // Inputs are checked where they are read (a NaN sample is refused by read_seismic_data with
  // the file's name), so the library's own argument errors are not re-labelled here.
  if (!c.output.empty() || c.check)
    run.cc = matched_filter(templates, data, job.options, job.network);
  if (c.detect) {
    if (!run.cc.empty()) {
      run.found = detect_peaks(run.cc, job.detect, c.step);
      mf_count_channels_used(run.found, templates, data, job.options, job.network);
    } else {
      run.found = matched_filter_detect(templates, data, job.options, job.network, job.detect);
    }
  }
  if (c.check) {
    MfOptions ref = job.options;
    ref.precision = Precision::Double;
    ref.method = MfMethod::Direct;
    ref.device = DeviceKind::Cpu;
    run.check = max_abs_difference(matched_filter(templates, data, ref, job.network), run.cc);
  }
  return run;
}

void run_mfilter(const Globals& g, const MfCliOptions& c) {
  // With several MPI ranks every rank reads and checks the inputs, and each step that can fail
  // ends alike on every rank (an error is printed once, by rank 0, with its exit status).
  MfJob job;
  on_every_rank(g, [&] { job = load_job(g, c); });
  const auto t0 = std::chrono::steady_clock::now();
  // With several ranks a .npy result is written by every rank into one file (no gathering); the
  // other array formats are gathered on rank 0 and written there.
  const bool npy = !c.output.empty() && io::format_of(c.output) == io::Format::npy;
  MfRun run;
  if (g.ranks > 1) {
    const auto samples = job.samples ? nullptr : io::array_samples(job.data.data);
    const auto bank = job.bank ? nullptr : io::array_templates(job.t.templates);
    run = mfilter_over_ranks(g, job.bank ? *job.bank : *bank, job.samples ? *job.samples : *samples,
                             job.options, job.network, job.tables, c.detect ? &job.detect : nullptr,
                             !c.output.empty(), c.check, c.time_parts,
                             npy ? c.output : std::string());
  } else {
    run = run_one_process(c, job);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  detail(g, "mfilter: done in " + std::to_string(ms) + " ms (with transfers)");
  if (c.check && g.rank == 0) {
    // To standard error: standard output may carry the detections CSV.
    char line[200];
    if (run.check.nonfinite > 0)
      std::snprintf(line, sizeof line,
                    "check against FP64 (CPU direct): max |CC - CC_fp64| inf (%lld non-finite; "
                    "largest finite %.3e)",
                    static_cast<long long>(run.check.nonfinite), run.check.max_abs);
    else
      std::snprintf(line, sizeof line, "check against FP64 (CPU direct): max |CC - CC_fp64| %.3e",
                    run.check.max_abs);
    std::cerr << line << "\n";
  }
  // Rank 0 writes (the result was gathered there); a failure to write is every rank's.
  on_every_rank(g, [&] {
    if (g.rank == 0) write_outputs(g, c, job, run);
  });
}

}  // namespace

void register_mfilter(CLI::App& app, Globals& g) {
  auto c = std::make_shared<MfCliOptions>();
  auto* cmd =
      app.add_subcommand("mfilter",
                         "matched filtering: normalized cross-correlation of templates against "
                         "continuous data, network stack and detection (docs/mfilter.md)");
  cmd->add_option("FILES", c->inputs,
                  "TEMPLATES DATA: templates .npy (T,C,K) or (T,K); data .npy (C,L) or (L), or "
                  "MiniSEED/SAC files (comma list). With --template-times: DATA only")
      ->required()
      ->expected(1, 2);
  cmd->add_option("-o,--output", c->output,
                  "correlation output (.npy, .npz, .fits; .csv or .png for the 2-D stack): (T,n) "
                  "or (T,C,n)");
  cmd->add_option("--precision", c->precision,
                  "double, single, half, mixed, bf16, split (default: the method's own)");
  cmd->add_option("--method", c->method,
                  "auto, direct (CPU); naive, cublas1..cublas4, tensor, fft (GPU)")
      ->capture_default_str();
  cmd->add_option("--normalize", c->normalize, "short (study 001) or full (demeaned)")
      ->capture_default_str();
  cmd->add_option("--moveouts", c->moveouts, "per-channel moveouts in samples, .npy (T,C) int");
  cmd->add_option("--weights", c->weights, "per-channel weights of the stack, .npy (T,C)");
  cmd->add_option("--step", c->step, "samples between correlation times")->capture_default_str();
  cmd->add_option("--devices", c->devices,
                  "CUDA devices to spread the templates over, comma-separated (e.g. 0,1,2,3)")
      ->delimiter(',');
  cmd->add_option("--time-parts", c->time_parts,
                  "under mpirun: split correlation time into this many parts per template group "
                  "(0: only when the 16-template groups are fewer than the ranks)")
      ->capture_default_str();
  cmd->add_flag("--per-channel", c->per_channel, "write per-channel CC (T,C,n), not the stack");
  cmd->add_flag("--detect", c->detect, "detect events on the stack");
  cmd->add_option("--threshold", c->threshold, "detection threshold (abs value or MAD factor)")
      ->capture_default_str();
  cmd->add_option("--threshold-type", c->threshold_type, "abs or mad")->capture_default_str();
  cmd->add_option("--min-separation", c->min_separation,
                  "minimum samples between detections of one template")
      ->capture_default_str();
  cmd->add_option("--detections", c->detections, "detections CSV (default: standard output)");
  cmd->add_option("--template-times", c->template_times,
                  "CSV of picks 'template, channel, start' to cut templates from data");
  cmd->add_option("--template-length", c->template_length, "samples per cut template");
  cmd->add_option("--template-data", c->template_data,
                  "cut the templates from this data instead of DATA (same channels)");
  cmd->add_flag("--check", c->check, "print max |CC - CC_fp64| against the CPU FP64 direct method");
  cmd->callback([&g, c] { run_mfilter(g, *c); });
}

}  // namespace halfscope::cli
