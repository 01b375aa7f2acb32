// `halfscope simulate psf|sky|observation`: the radio-interferometric inputs of issue 7
// (sim/radio.hpp). Outputs are float64 .npy or FITS; FITS files carry the parameters as header
// cards (and the command as HISTORY), so a dirty image says which noise sigma it holds.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "cmd_simulate_checks.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/fits.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope::cli {

/// Adds `psf`, `sky` and `observation` to the `simulate` group (called from cmd_simulate.cpp).
void register_simulate_radio(CLI::App& sim, Globals& g);

namespace {

using Cards = std::vector<io::FitsCard>;
namespace checks = simulate_checks;

io::FitsCard number_card(const char* key, double v, const char* comment) {
  char text[40];
  std::snprintf(text, sizeof text, "%.15G", v);
  return {key, text, comment, false};
}

io::FitsCard integer_card(const char* key, unsigned long long v, const char* comment) {
  return {key, std::to_string(v), comment, false};
}

io::FitsCard text_card(const char* key, const std::string& v, const char* comment) {
  std::string quoted = "'";
  for (char c : v.substr(0, 60)) quoted += (c == '\'' ? std::string("''") : std::string(1, c));
  return {key, quoted + "'", comment, false};
}

// Refuses an output format before any work: these arrays go to .npy or FITS only.
void check_array_output(const std::string& path, const char* option, bool fits_allowed) {
  const io::Format f = io::format_of(path);
  if (!(f == io::Format::npy || (fits_allowed && f == io::Format::fits)))
    throw InvalidInput(std::string(option) + " " + path + ": expected a " +
                       (fits_allowed ? ".npy or .fits" : ".npy") + " file");
  io::check_output_path(path);
}

std::vector<std::byte> encode(const std::string& path, const Array& a, const Cards& cards,
                              const std::string& history) {
  if (io::format_of(path) != io::Format::fits) return io::serialize_npy(a);
  io::FitsImage img;
  img.data = a;
  img.cards = cards;
  return io::serialize_fits(img, history);
}

// Every file is encoded first, then written under a temporary name, and renamed into place only
// when all are complete: a failure leaves no partial or mismatched set.
void write_all(const Globals& g,
               const std::vector<std::pair<std::string, std::vector<std::byte>>>& files) {
  std::vector<std::unique_ptr<io::AtomicOutput>> outs;
  for (const auto& [path, bytes] : files) {
    outs.push_back(std::make_unique<io::AtomicOutput>(path));
    outs.back()->write(bytes);
  }
  std::vector<io::AtomicOutput*> all;  // all on disk before any is renamed (a full disk)
  for (const auto& o : outs) all.push_back(o.get());
  io::commit_together(all);
  for (const auto& [path, bytes] : files) info(g, "wrote " + path);
}

// --size, or --rows with --cols; a typed value is checked, whichever it is (`command`: "psf").
struct Size {
  std::int64_t size = 2048;
  std::optional<std::int64_t> rows, cols;  // given together (CLI11 needs), instead of --size
  [[nodiscard]] std::int64_t r(std::string_view command) const {
    checks::check_at_least(size, 1, command, "--size");
    if (rows) checks::check_at_least(*rows, 1, command, "--rows");
    return rows.value_or(size);
  }
  [[nodiscard]] std::int64_t c(std::string_view command) const {
    if (cols) checks::check_at_least(*cols, 1, command, "--cols");
    return cols.value_or(size);
  }
};

void add_size_options(CLI::App* cmd, Size& s) {
  auto* size =
      cmd->add_option("--size", s.size, "image side (rows = cols), >= 1")->capture_default_str();
  auto* rows =
      cmd->add_option("--rows", s.rows, "image rows, >= 1 (with --cols, instead of --size)");
  auto* cols = cmd->add_option("--cols", s.cols, "image columns, >= 1 (with --rows)");
  size->excludes(rows)->excludes(cols);
  rows->needs(cols);
  cols->needs(rows);
}

struct PsfCli {
  std::string antennas = "meerkat", weighting = "natural", output, uv_out;
  Size size;
  std::optional<double> pixel;  // absent: the library's default, lambda_min / (4 B_max)
  sim::PsfOptions o;
};

void run_psf(const Globals& g, PsfCli& c) {
  check_array_output(c.output, "-o", true);
  if (!c.uv_out.empty()) check_array_output(c.uv_out, "--uv-out", false);
  check_distinct_paths({}, {{"-o", c.output}, {"--uv-out", c.uv_out}});
  c.o.rows = c.size.r("psf");
  c.o.cols = c.size.c("psf");
  // pixel_arcsec 0 asks the library for its default: only an absent --pixel may mean that.
  if (c.pixel) checks::check_positive(*c.pixel, "psf", "--pixel", "size in arcsec");
  c.o.pixel_arcsec = c.pixel.value_or(0.0);
  c.o.weighting = sim::parse_weighting(c.weighting);
  const sim::AntennaTable ants = sim::load_antennas(c.antennas);
  const auto t0 = std::chrono::steady_clock::now();
  const sim::PsfResult p = sim::simulate_psf(ants, c.o);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const sim::UvTrackOptions& t = c.o.track;
  const Cards cards = {
      text_card("ANTENNAS", ants.source, "antenna table"),
      integer_card("NANT", ants.antennas.size(), "antennas"),
      number_card("BMAX", p.max_baseline_m, "longest baseline (m)"),
      number_card("LATITUDE", t.latitude_deg, "array latitude (deg)"),
      number_card("DEC", t.dec_deg, "declination of the phase centre (deg)"),
      number_card("HASTART", t.ha_start_h, "first hour angle (h)"),
      number_card("HAEND", t.ha_end_h, "last hour angle (h)"),
      number_card("HASTEP", t.ha_step_s, "hour-angle step (s)"),
      number_card("FREQ", t.freq_hz, "centre frequency (Hz)"),
      number_card("BANDWID", t.bandwidth_hz, "bandwidth (Hz)"),
      integer_card("NCHAN", static_cast<unsigned long long>(t.channels), "channels"),
      number_card("PIXSIZE", p.pixel_arcsec, "pixel (arcsec)"),
      text_card("WEIGHT", std::string(sim::weighting_name(c.o.weighting)), "uv weighting"),
      integer_card("NUVSAMP", static_cast<unsigned long long>(p.gridded.samples), "uv samples"),
      integer_card("NUVDROP", static_cast<unsigned long long>(p.gridded.dropped),
                   "uv samples off the grid"),
      integer_card("PSFROW", static_cast<unsigned long long>(c.o.rows / 2), "origin row (0-based)"),
      integer_card("PSFCOL", static_cast<unsigned long long>(c.o.cols / 2),
                   "origin column (0-based)")};
  std::vector<std::pair<std::string, std::vector<std::byte>>> files;
  files.emplace_back(c.output, encode(c.output, p.gridded.psf, cards,
                                      "halfscope " HALFSCOPE_VERSION " simulate psf"));
  if (!c.uv_out.empty()) files.emplace_back(c.uv_out, io::serialize_npy(p.uv));
  char line[320];
  std::snprintf(
      line, sizeof line,
      "simulate psf: %zu antennas (%s), %lld uv samples, %lld dropped outside the grid, "
      "%lld cells occupied, pixel %.6g arcsec, B_max %.1f m, %.1f ms",
      ants.antennas.size(), ants.source.c_str(), static_cast<long long>(p.gridded.samples),
      static_cast<long long>(p.gridded.dropped), static_cast<long long>(p.gridded.occupied_cells),
      p.pixel_arcsec, p.max_baseline_m, ms);
  info(g, line);
  if (p.gridded.dropped > 0)
    warn(std::to_string(p.gridded.dropped) + " of " + std::to_string(p.gridded.samples) +
         " uv samples fell outside the grid (pixel too small for the longest baselines)");
  write_all(g, files);
}

struct SkyCli {
  Size size;
  sim::SkyOptions o;
  std::string output;
  std::uint64_t seed = 1;
};

void run_sky(const Globals& g, SkyCli& c) {
  check_array_output(c.output, "-o", true);
  c.o.rows = c.size.r("sky");
  c.o.cols = c.size.c("sky");
  c.o.seed = c.seed;
  const sim::SkyResult s = sim::simulate_sky(c.o);
  const Cards cards = {
      integer_card("NSOURCES", static_cast<unsigned long long>(c.o.sources), "point sources"),
      number_card("FLUXIDX", c.o.flux_index, "dN/dS ~ S^index"),
      number_card("FLUXMIN", c.o.flux_min, "smallest flux"),
      number_card("FLUXMAX", c.o.flux_max, "largest flux"),
      number_card("HALORAT", c.o.halo_ratio, "halo peak / brightest pixel"),
      number_card("HALOLEN", c.o.halo_correlation_px,
                  "halo correlation length (px), >= 0 (0: white)"),
      integer_card("SEED", c.o.seed, "generator seed"),
      number_card("BRIGHT", s.brightest, "brightest pixel of the sources"),
      number_card("HALOPEAK", s.halo_peak, "peak of the halo")};
  char line[200];
  std::snprintf(line, sizeof line,
                "simulate sky: %lld sources, brightest %.6g, halo peak %.6g (seed %llu)",
                static_cast<long long>(c.o.sources), s.brightest, s.halo_peak,
                static_cast<unsigned long long>(c.o.seed));
  info(g, line);
  write_all(g, {{c.output,
                 encode(c.output, s.sky, cards, "halfscope " HALFSCOPE_VERSION " simulate sky")}});
}

struct ObservationCli {
  std::string sky, psf, boundary = "circular", output;
  std::uint64_t seed = 1;
  sim::ObservationOptions o;
};

void run_observation(const Globals& g, ObservationCli& c) {
  check_array_output(c.output, "-o", true);
  check_distinct_paths({{"sky", c.sky}, {"psf", c.psf}}, {{"-o", c.output}});
  c.o.seed = c.seed;
  c.o.boundary = parse_boundary(c.boundary);
  const Array sky = read_single_array(c.sky, "sky");
  const Array psf = read_single_array(c.psf, "PSF");
  const sim::ObservationResult r = sim::simulate_observation(sky, psf, c.o);
  const Cards cards = {text_card("SKY", c.sky, "model sky"),
                       text_card("PSF", c.psf, "point spread function"),
                       number_card("SNRDB", c.o.snr_db, "10 log10(||H f||^2 / (N sigma^2))"),
                       number_card("NOISESIG", r.sigma, "noise standard deviation"),
                       number_card("SIGPOWER", r.signal_power, "||H f||^2 / N"),
                       text_card("BOUNDARY", c.boundary, "H: circular or zero boundary"),
                       integer_card("SEED", c.o.seed, "noise generator seed")};
  char line[200];
  std::snprintf(line, sizeof line, "simulate observation: SNR %.4g dB, noise sigma %.17g",
                c.o.snr_db, r.sigma);
  info(g, line);
  write_all(g, {{c.output, encode(c.output, r.dirty, cards,
                                  "halfscope " HALFSCOPE_VERSION " simulate observation")}});
}

}  // namespace

void register_simulate_radio(CLI::App& sim, Globals& g) {
  auto p = std::make_shared<PsfCli>();
  auto* ps = sim.add_subcommand("psf", "an interferometer's PSF from its antennas (uv tracks)");
  ps->add_option("--antennas", p->antennas, "meerkat or a CSV file (name,east,north,up in m)")
      ->capture_default_str();
  add_size_options(ps, p->size);
  ps->add_option("--dec", p->o.track.dec_deg, "declination (deg)")->capture_default_str();
  ps->add_option("--latitude", p->o.track.latitude_deg, "array latitude (deg)")
      ->capture_default_str();
  ps->add_option("--ha-start", p->o.track.ha_start_h, "first hour angle (h)")
      ->capture_default_str();
  ps->add_option("--ha-end", p->o.track.ha_end_h, "last hour angle (h)")->capture_default_str();
  ps->add_option("--ha-step", p->o.track.ha_step_s, "integration (s)")->capture_default_str();
  ps->add_option("--freq", p->o.track.freq_hz, "centre frequency (Hz)")->capture_default_str();
  ps->add_option("--bandwidth", p->o.track.bandwidth_hz, "bandwidth (Hz)")->capture_default_str();
  ps->add_option("--channels", p->o.track.channels, "channels across the bandwidth")
      ->capture_default_str();
  ps->add_option("--pixel", p->pixel,
                 "pixel (arcsec), > 0; default: a quarter of lambda_min / B_max");
  ps->add_option("--weighting", p->weighting, "natural or uniform")->capture_default_str();
  ps->add_option("--uv-out", p->uv_out, "also write the uv samples (wavelengths) as {n, 2} .npy");
  ps->add_option("-o,--output", p->output, "PSF file (.npy or .fits)")->required();
  ps->callback([&g, p] { run_psf(g, *p); });

  auto s = std::make_shared<SkyCli>();
  auto* sk = sim.add_subcommand("sky", "point sources with power-law fluxes and a faint halo");
  add_size_options(sk, s->size);
  sk->add_option("--sources", s->o.sources, "point sources, >= 0 (0 needs --halo 0)")
      ->capture_default_str();
  sk->add_option("--flux-index", s->o.flux_index, "dN/dS ~ S^index")->capture_default_str();
  sk->add_option("--flux-min", s->o.flux_min, "smallest source flux, > 0")->capture_default_str();
  sk->add_option("--flux-max", s->o.flux_max, "largest source flux, >= --flux-min")
      ->capture_default_str();
  sk->add_option("--halo", s->o.halo_ratio, "halo peak / brightest pixel, >= 0 (0: none)")
      ->capture_default_str();
  sk->add_option("--halo-length", s->o.halo_correlation_px,
                 "halo correlation length (px), >= 0 (0: white)")
      ->capture_default_str();
  sk->add_option("--seed", s->seed, "generator seed, 0 to 2^64 - 1")->capture_default_str();
  sk->add_option("-o,--output", s->output, "sky file (.npy or .fits)")->required();
  sk->callback([&g, s] { run_sky(g, *s); });

  auto o = std::make_shared<ObservationCli>();
  auto* ob = sim.add_subcommand("observation", "dirty image g = H f + n at a given SNR");
  ob->add_option("sky", o->sky, "model sky f")->required();
  ob->add_option("psf", o->psf, "PSF h (origin at (rows/2, cols/2), the sky's shape)")->required();
  ob->add_option("--snr-db", o->o.snr_db, "10 log10(||H f||^2 / (N sigma^2))")
      ->capture_default_str();
  ob->add_option("--seed", o->seed, "noise generator seed, 0 to 2^64 - 1")->capture_default_str();
  ob->add_option("--boundary", o->boundary, "circular or zero")->capture_default_str();
  ob->add_option("-o,--output", o->output, "dirty image (.npy or .fits)")->required();
  ob->callback([&g, o] { run_observation(g, *o); });
}

}  // namespace halfscope::cli
