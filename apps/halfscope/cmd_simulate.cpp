// `halfscope simulate ...`: the studies' synthetic inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "cmd_simulate_checks.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/waveform.hpp"
#include "halfscope/sim/kernels.hpp"
#include "halfscope/sim/seismic.hpp"

namespace halfscope::cli {

void register_simulate_radio(CLI::App& sim, Globals& g);  // cmd_simulate_radio.cpp: psf, sky, ...

namespace {

namespace checks = simulate_checks;

// The simulated float64 values in the asked dtype, counted like `convert --dtype`: a value that
// overflows to inf is convert's NumericalError (exit 1, nothing written), never an inf in the
// file; values that underflow to zero are reported.
void write_simulated(const Globals& g, const std::string& path, const Array& values, DType dtype,
                     const std::string& history) {
  ConversionReport report;
  const Array out = values.astype(dtype, &report);
  require_finite(report, path);
  if (report.underflow > 0)
    warn(path + ": " + std::to_string(report.underflow) + " nonzero values underflowed to zero");
  write_array(g, path, out, history);
}

struct KernelCliOptions {
  std::int64_t width = 15;
  std::optional<double> sigma;  // absent: width / 6
  std::string dtype = "float64", output;
};

void run_simulate_gaussian_kernel(const Globals& g, const KernelCliOptions& c) {
  checks::check_at_least(c.width, 1, "gaussian-kernel", "--width");
  if (c.sigma) checks::check_positive(*c.sigma, "gaussian-kernel", "--sigma", "standard deviation");
  const DType dtype = checks::parse_float_dtype(c.dtype, "gaussian-kernel");
  io::check_output_path(c.output);
  const Array k = sim::gaussian_kernel(c.width, c.sigma.value_or(0.0));
  // A sigma far below a pixel underflows every sample (for an even width, which has no sample
  // at the centre), or 2 sigma^2 itself: the normalisation is then 0 / 0. The default width / 6
  // never does.
  const double* p = k.data_as<double>();
  if (c.sigma && !std::all_of(p, p + k.size(), [](double v) { return std::isfinite(v); }))
    checks::refuse("gaussian-kernel", "--sigma",
                   "a standard deviation whose samples do not all underflow to 0 in float64 with "
                   "--width " +
                       std::to_string(c.width),
                   checks::number_text(*c.sigma));
  write_simulated(
      g, c.output, k, dtype,
      "halfscope " HALFSCOPE_VERSION " gaussian kernel width " + std::to_string(c.width));
}

struct ImageCliOptions {
  std::int64_t rows = 512, cols = 512;
  std::uint64_t seed = 1;
  double low = 0, high = 1;
  std::string dtype = "float32", output;
};

// Values are drawn from [low, high) and then rounded to the dtype, so the bounds alone decide
// whether every value is finite there: they are checked against the dtype's range here, before
// anything is drawn. low == high is refused: the half-open interval is empty.
void run_simulate_random_image(const Globals& g, const ImageCliOptions& c) {
  checks::check_at_least(c.rows, 1, "random-image", "--rows");
  checks::check_at_least(c.cols, 1, "random-image", "--cols");
  checks::check_finite(c.low, "random-image", "--low");
  checks::check_finite(c.high, "random-image", "--high");
  if (!(c.low < c.high))
    checks::refuse(
        "random-image", "--low/--high", "--low < --high (values in [low, high))",
        "--low " + checks::number_text(c.low) + ", --high " + checks::number_text(c.high));
  const DType dtype = checks::parse_float_dtype(c.dtype, "random-image");
  const double largest = checks::largest_finite(dtype);
  const std::string range = "a value in the range of " + std::string(dtype_name(dtype)) +
                            " (--dtype), [-" + checks::number_text(largest) + ", " +
                            checks::number_text(largest) + "]";
  if (std::abs(c.low) > largest)
    checks::refuse("random-image", "--low", range, checks::number_text(c.low));
  if (std::abs(c.high) > largest)
    checks::refuse("random-image", "--high", range, checks::number_text(c.high));
  // The generator scales by high - low in float64.
  if (!std::isfinite(c.high - c.low))
    checks::refuse(
        "random-image", "--low/--high",
        "a width high - low that is finite in float64 (<= " +
            checks::number_text(std::numeric_limits<double>::max()) + ")",
        "--low " + checks::number_text(c.low) + ", --high " + checks::number_text(c.high));
  io::check_output_path(c.output);
  write_simulated(g, c.output, sim::random_image(c.rows, c.cols, c.seed, c.low, c.high), dtype,
                  "halfscope " HALFSCOPE_VERSION " random image");
}

struct SeismicCliOptions {
  sim::SeismicSimOptions sim;
  std::string start = "2010-01-01T00:00:00Z", normalize = "short", output;
  std::uint64_t seed = 1;
  bool mseed = false;
};

// Station codes S0000, S0001, ...: channel ids sort in channel order, so reading data.mseed back
// gives the channels of data.npy in the same order.
io::Waveforms as_waveforms(const sim::SeismicSimulation& s, const sim::SeismicSimOptions& o) {
  io::Waveforms w;
  for (std::int64_t c = 0; c < s.data.dim(0); ++c) {
    io::Trace t;
    char station[8];
    std::snprintf(station, sizeof station, "S%04lld", static_cast<long long>(c % 10000));
    t.network = "XX";
    t.station = station;
    t.channel = "HHZ";
    t.start_ns = o.start_ns;
    t.sample_rate = o.sample_rate;
    t.data = s.data.select(0, c).contiguous();
    w.traces.push_back(std::move(t));
  }
  return w;
}

std::string events_csv(const sim::SeismicSimulation& s, const sim::SeismicSimOptions& o) {
  std::ostringstream csv;
  csv << "template,sample,time,cc,cc_sum\n";
  char line[160];
  for (const sim::PlantedEvent& e : s.events) {
    const auto ns = o.start_ns + std::llround(static_cast<long double>(e.sample) * 1e9L /
                                              static_cast<long double>(o.sample_rate));
    std::snprintf(line, sizeof line, "%lld,%lld,%s,%.17g,%.17g\n",
                  static_cast<long long>(e.template_index), static_cast<long long>(e.sample),
                  io::format_iso8601(ns, 6).c_str(), e.cc, e.expected_cc_sum);
    csv << line;
  }
  return csv.str();
}

// The files of one data set must never mix two runs: everything that can fail on the inputs
// (option checks, the simulation, MiniSEED encoding, which throws Unsupported without libmseed)
// runs before the folder is touched; then every file is written under a temporary name and only
// when all of them are complete are they renamed into place.
void run_simulate_seismic(const Globals& g, SeismicCliOptions c) {
  namespace fs = std::filesystem;
  c.sim.seed = c.seed;
  // The library refuses a rate <= 0; inf would pass it and give every event time 0.
  checks::check_positive(c.sim.sample_rate, "seismic", "--sample-rate", "rate in Hz");
  c.sim.start_ns = io::parse_iso8601(c.start);
  c.sim.normalize = parse_mf_normalize(c.normalize);
  if (c.mseed && c.sim.channels > 10000)
    throw InvalidInput("simulate seismic --mseed: " + std::to_string(c.sim.channels) +
                       " channels: expected at most 10000 (5-character station codes)");
  const sim::SeismicSimulation s = sim::simulate_seismic(c.sim);
  std::vector<std::pair<std::string, std::vector<std::byte>>> files;
  files.emplace_back("data.npy", io::serialize_npy(s.data));
  files.emplace_back("templates.npy", io::serialize_npy(s.templates));
  files.emplace_back("moveouts.npy", io::serialize_npy(s.moveouts));
  files.emplace_back("weights.npy", io::serialize_npy(s.weights));
  if (c.mseed) files.emplace_back("data.mseed", io::serialize_mseed(as_waveforms(s, c.sim)));
  const std::string csv = events_csv(s, c.sim);
  files.emplace_back(
      "events.csv",
      std::vector<std::byte>(reinterpret_cast<const std::byte*>(csv.data()),
                             reinterpret_cast<const std::byte*>(csv.data()) + csv.size()));

  const fs::path dir(c.output);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(c.output + ": cannot create the output folder: " + ec.message());
  // Every target is checked before any is written (a target that is a folder fails here).
  for (const auto& [name, bytes] : files) io::check_output_path(dir / name);
  std::vector<std::unique_ptr<io::AtomicOutput>> outputs;
  for (const auto& [name, bytes] : files) {
    outputs.push_back(std::make_unique<io::AtomicOutput>(dir / name));
    outputs.back()->write(bytes);
  }
  // All on disk before any is renamed: a full disk leaves the earlier run's set whole.
  std::vector<io::AtomicOutput*> all;
  for (const auto& out : outputs) all.push_back(out.get());
  io::commit_together(all);
  if (!c.mseed && fs::exists(dir / "data.mseed", ec))
    warn(c.output + "/data.mseed is from an earlier run (no --mseed now): it is not this data set");
  info(g, "simulate seismic: " + std::to_string(s.events.size()) + " events planted; wrote " +
              c.output + "/{data,templates,moveouts,weights}.npy" +
              (c.mseed ? ", data.mseed" : "") + " and events.csv");
}

struct AoSystemCliOptions {
  std::string preset, output;
  int layers = 10;
};

// The preset and the layer count are checked here, before anything is built or written, so that
// the message names the option; write_ao_system then writes atomically (no file on failure).
void run_simulate_ao_system(const Globals& g, const AoSystemCliOptions& c) {
  const std::vector<std::string> names = ao::ao_preset_names();
  if (std::find(names.begin(), names.end(), c.preset) == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InvalidInput("simulate ao-system --preset: expected one of " + list + ", found \"" +
                       c.preset + "\"");
  }
  if (c.layers != 10 && c.layers != 60)
    throw InvalidInput("simulate ao-system --layers: expected 10 or 60, found " +
                       std::to_string(c.layers));
  const ao::AoSystem s = ao::ao_preset(c.preset, c.layers);
  ao::write_ao_system(c.output, s);
  info(g, "simulate ao-system: " + s.name + ": " + std::to_string(s.sensors.size()) +
              " measuring sensors, n = " + std::to_string(ao::measurement_count(s)) +
              " measurements, m = " + std::to_string(ao::truth_count(s)) + " truth slopes; wrote " +
              c.output);
}

}  // namespace

void register_simulate(CLI::App& app, Globals& g) {
  auto* sim =
      app.add_subcommand("simulate", "make synthetic inputs (kernels, images, seismic data)");
  sim->require_subcommand(1);

  auto k = std::make_shared<KernelCliOptions>();
  auto* gk = sim->add_subcommand("gaussian-kernel", "study 000's normalised Gaussian kernel");
  gk->add_option("--width", k->width, "kernel width in pixels, >= 1")->capture_default_str();
  gk->add_option("--sigma", k->sigma, "standard deviation in pixels, > 0 (default: width / 6)");
  gk->add_option("--dtype", k->dtype, std::string(checks::kFloatDtypes))->capture_default_str();
  gk->add_option("-o,--output", k->output, "output file (.npy, .fits, ...)")->required();
  gk->callback([&g, k] { run_simulate_gaussian_kernel(g, *k); });

  auto im = std::make_shared<ImageCliOptions>();
  auto* ri = sim->add_subcommand("random-image", "uniform random image, reproducible from --seed");
  ri->add_option("--rows", im->rows, "image rows, >= 1")->capture_default_str();
  ri->add_option("--cols", im->cols, "image columns, >= 1")->capture_default_str();
  ri->add_option("--seed", im->seed, "generator seed, 0 to 2^64 - 1")->capture_default_str();
  ri->add_option("--low", im->low, "smallest value (inclusive), finite")->capture_default_str();
  ri->add_option("--high", im->high, "bound above the values (exclusive), finite, > --low")
      ->capture_default_str();
  ri->add_option("--dtype", im->dtype,
                 std::string(checks::kFloatDtypes) + "; --low and --high must lie in its range")
      ->capture_default_str();
  ri->add_option("-o,--output", im->output, "output file (.npy, .fits, ...)")->required();
  ri->callback([&g, im] { run_simulate_random_image(g, *im); });

  auto se = std::make_shared<SeismicCliOptions>();
  auto* ss = sim->add_subcommand(
      "seismic", "noise with templates planted at known times and CC (matched-filter truth)");
  ss->add_option("-o,--output", se->output,
                 "folder for data.npy, templates.npy, moveouts.npy, weights.npy, events.csv")
      ->required();
  ss->add_option("--channels", se->sim.channels, "channels (rows of data.npy), >= 1")
      ->capture_default_str();
  ss->add_option("--samples", se->sim.samples, "samples per channel, >= 1")->capture_default_str();
  ss->add_option("--templates", se->sim.templates, "templates, >= 1")->capture_default_str();
  ss->add_option("--template-length", se->sim.template_length, "samples per template, >= 1")
      ->capture_default_str();
  ss->add_option("--events", se->sim.events_per_template,
                 "events per template, >= 0 (0: noise only)")
      ->capture_default_str();
  ss->add_option("--cc", se->sim.event_cc,
                 "CC of the planted events, each in (0, 1), used in turn (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  ss->add_option("--colour", se->sim.noise_colour,
                 "AR(1) coefficient of the noise in [0, 1), 0 = white")
      ->capture_default_str();
  ss->add_option("--max-moveout", se->sim.max_moveout,
                 "largest per-channel moveout (samples), >= 0")
      ->capture_default_str();
  ss->add_option("--sample-rate", se->sim.sample_rate, "sampling rate (Hz), finite, > 0")
      ->capture_default_str();
  ss->add_option("--start", se->start, "time of the first sample (ISO-8601 UTC)")
      ->capture_default_str();
  ss->add_option("--normalize", se->normalize,
                 "the normalization whose CC is planted exactly: short or full")
      ->capture_default_str();
  ss->add_option("--seed", se->seed, "generator seed, 0 to 2^64 - 1")->capture_default_str();
  ss->add_flag("--mseed", se->mseed, "also write data.mseed (float64 traces XX.Snnnn..HHZ)");
  ss->callback([&g, se] { run_simulate_seismic(g, *se); });

  auto ao_options = std::make_shared<AoSystemCliOptions>();
  auto* as = sim->add_subcommand(
      "ao-system", "a built-in adaptive-optics system (telescope, sensors, atmosphere) as JSON");
  as->add_option("--preset", ao_options->preset,
                 "check (n = 912), mid (n = 10,240) or eelt (n = 100,368)")
      ->required();
  as->add_option("--layers", ao_options->layers, "atmospheric profile: 10 or 60 layers")
      ->capture_default_str();
  as->add_option("-o,--output", ao_options->output, "output file (JSON)")->required();
  as->callback([&g, ao_options] { run_simulate_ao_system(g, *ao_options); });

  register_simulate_radio(*sim, g);
}

}  // namespace halfscope::cli
