// `halfscope simulate ...`: the studies' synthetic inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
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

struct SeismicCliOptions {
  sim::SeismicSimOptions sim;
  std::string start = "2010-01-01T00:00:00Z", normalize = "short", output;
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
  for (const auto& out : outputs) out->commit();
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

  struct KernelOptions {
    std::int64_t width = 15;
    double sigma = 0;
    std::string dtype = "float64", output;
  };
  auto k = std::make_shared<KernelOptions>();
  auto* gk = sim->add_subcommand("gaussian-kernel", "study 000's normalised Gaussian kernel");
  gk->add_option("--width", k->width, "kernel width in pixels")->capture_default_str();
  gk->add_option("--sigma", k->sigma, "standard deviation in pixels (default: width / 6)");
  gk->add_option("--dtype", k->dtype, "float64, float32 or float16")->capture_default_str();
  gk->add_option("-o,--output", k->output, "output file (.npy, .fits, ...)")->required();
  gk->callback([&g, k] {
    const Array a = sim::gaussian_kernel(k->width, k->sigma);
    write_array(
        g, k->output, a.astype(parse_dtype(k->dtype)),
        "halfscope " HALFSCOPE_VERSION " gaussian kernel width " + std::to_string(k->width));
  });

  struct ImageOptions {
    std::int64_t rows = 512, cols = 512;
    std::uint64_t seed = 1;
    double lo = 0, hi = 1;
    std::string dtype = "float32", output;
  };
  auto im = std::make_shared<ImageOptions>();
  auto* ri = sim->add_subcommand("random-image", "uniform random image, reproducible from --seed");
  ri->add_option("--rows", im->rows)->capture_default_str();
  ri->add_option("--cols", im->cols)->capture_default_str();
  ri->add_option("--seed", im->seed)->capture_default_str();
  ri->add_option("--low", im->lo)->capture_default_str();
  ri->add_option("--high", im->hi)->capture_default_str();
  ri->add_option("--dtype", im->dtype)->capture_default_str();
  ri->add_option("-o,--output", im->output, "output file")->required();
  ri->callback([&g, im] {
    const Array a = sim::random_image(im->rows, im->cols, im->seed, im->lo, im->hi);
    write_array(g, im->output, a.astype(parse_dtype(im->dtype)),
                "halfscope " HALFSCOPE_VERSION " random image");
  });

  auto se = std::make_shared<SeismicCliOptions>();
  auto* ss = sim->add_subcommand(
      "seismic", "noise with templates planted at known times and CC (matched-filter truth)");
  ss->add_option("-o,--output", se->output,
                 "folder for data.npy, templates.npy, moveouts.npy, weights.npy, events.csv")
      ->required();
  ss->add_option("--channels", se->sim.channels)->capture_default_str();
  ss->add_option("--samples", se->sim.samples, "samples per channel")->capture_default_str();
  ss->add_option("--templates", se->sim.templates)->capture_default_str();
  ss->add_option("--template-length", se->sim.template_length)->capture_default_str();
  ss->add_option("--events", se->sim.events_per_template, "events per template")
      ->capture_default_str();
  ss->add_option("--cc", se->sim.event_cc, "CC of the planted events, used in turn (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  ss->add_option("--colour", se->sim.noise_colour, "AR(1) coefficient of the noise, 0 = white")
      ->capture_default_str();
  ss->add_option("--max-moveout", se->sim.max_moveout, "largest per-channel moveout (samples)")
      ->capture_default_str();
  ss->add_option("--sample-rate", se->sim.sample_rate, "Hz")->capture_default_str();
  ss->add_option("--start", se->start, "time of the first sample (ISO-8601 UTC)")
      ->capture_default_str();
  ss->add_option("--normalize", se->normalize, "the normalization whose CC is planted exactly")
      ->capture_default_str();
  ss->add_option("--seed", se->sim.seed)->capture_default_str();
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
