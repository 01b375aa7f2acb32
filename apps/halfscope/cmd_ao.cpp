// The `halfscope ao` group (issue 5): `ao covariance SYSTEM -o DIR` writes the slope covariance
// matrices Cmm / Ctm / Ctt of an AO system (covariance.hpp), `ao structure-function` tabulates the
// FP64 reference von Karman D(r) or C(r) (turbulence.hpp) so that they can be checked against
// SciPy, and `ao evaluate` (cmd_ao_evaluate.cpp) scores a reconstructor.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ao_output_set.hpp"
#include "ao_system_arg.hpp"
#include "cli.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/turbulence.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/fits.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------- ao covariance

struct AoCovarianceCliOptions {
  AoSystemArg system;
  std::string output_dir;
  std::string kinds = "cmm,ctm,ctt";
  std::string dtype = "f64";
  std::string format = "npy";
  bool no_noise = false;
};

// "cmm,ctm" -> the kinds in the order given, each once.
std::vector<ao::CovarianceKind> parse_kinds(const std::string& text) {
  std::vector<ao::CovarianceKind> kinds;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const ao::CovarianceKind k =
        ao::parse_covariance_kind(std::string_view(text).substr(start, comma - start), "--kinds");
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    start = comma + 1;
  }
  return kinds;
}

DType parse_covariance_dtype(const std::string& text) {
  if (text == "f64" || text == "float64") return DType::f64;
  if (text == "f32" || text == "float32") return DType::f32;
  throw InvalidInput(
      "--dtype: expected f32 or f64 (the matrices are computed in FP64 and rounded "
      "once), found '" +
      text + "'");
}

// A FITS string value: quoted, inner quotes doubled, at most 68 characters (one card), printable
// ASCII only (the standard's character set; a file name may hold anything else, shown as '?').
std::string fits_string(std::string text) {
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'')
      quoted += "''";
    else
      quoted += (c >= ' ' && c <= '~') ? c : '?';
  }
  return quoted + "'";
}

void write_fits_covariance(const fs::path& path, const Array& matrix, const std::string& label,
                           ao::CovarianceKind kind, bool noise) {
  io::FitsImage image;
  image.data = matrix;
  const std::string kind_name(ao::covariance_kind_name(kind));
  image.cards = {
      {"BUNIT", fits_string("arcsec**2"), "covariance of WFS slopes in arcsec"},
      {"AOSYSTEM", fits_string(label), "AO system (file or preset)"},
      {"AOKIND", fits_string(kind_name), "cmm: meas x meas, ctm: truth x meas, ctt: truth"},
      {"AONOISE", noise ? "T" : "F", "noise terms included"},
  };
  io::write_fits(path, image, "halfscope " HALFSCOPE_VERSION " ao covariance " + kind_name);
}

std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", ms);
  return text;
}

void run_ao_covariance(const Globals& g, const AoCovarianceCliOptions& c) {
  const std::vector<ao::CovarianceKind> kinds = parse_kinds(c.kinds);
  ao::CovarianceOptions options;
  options.dtype = parse_covariance_dtype(c.dtype);
  options.noise = !c.no_noise;
  options.memory = Memory::host;
  if (c.format != "npy" && c.format != "fits")
    throw InvalidInput("--format: expected npy or fits, found '" + c.format + "'");
  if (c.format == "fits" && !HALFSCOPE_HAS_FITS)
    throw Unsupported("--format fits: this build has no FITS support (cfitsio); use npy");
  // The device is resolved once so that the report says where the work ran (Auto -> cuda when a
  // GPU is usable, else cpu); an explicit cuda without a GPU fails here, before any work.
  options.device = resolve_device(g.device_kind());
  const ao::AoSystem system = load_ao_system(c.system);
  const std::string label = ao_system_label(c.system);

  const fs::path dir(c.output_dir);
  AoOutputSet outputs;  // the matrices appear together when all are written (ao_output_set.hpp)
  outputs.create_folder(dir);
  std::vector<fs::path> paths;
  for (ao::CovarianceKind k : kinds) {
    paths.push_back(dir / (std::string(ao::covariance_kind_name(k)) + "." + c.format));
    io::check_output_path(paths.back());  // fail before the (possibly long) generation
  }

  const char* device = options.device == DeviceKind::Cuda ? "cuda" : "cpu";
  const bool noise = options.noise && system.noise.enabled;  // both gate the noise terms
  std::cout << "system " << label << ": n = " << ao::measurement_count(system)
            << " measurement slopes, m = " << ao::truth_count(system) << " truth slopes, "
            << system.atmosphere.layers.size() << " layers, noise " << (noise ? "on" : "off")
            << ", device " << device << "\n";
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Array matrix = ao::covariance(system, kinds[i], options);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const fs::path partial = outputs.partial(paths[i]);
    if (c.format == "fits")
      write_fits_covariance(partial, matrix, label, kinds[i], noise);
    else
      io::write_npy(partial, matrix);
    std::cout << ao::covariance_kind_name(kinds[i]) << ": " << matrix.dim(0) << " x "
              << matrix.dim(1) << " " << dtype_name(matrix.dtype()) << " in " << format_ms(ms)
              << " on " << device << " -> " << paths[i].string() << "\n";
  }
  outputs.commit();
}

void register_ao_covariance(CLI::App& ao, Globals& g) {
  auto c = std::make_shared<AoCovarianceCliOptions>();
  auto* cmd = ao.add_subcommand(
      "covariance", "write the slope covariance matrices Cmm, Ctm, Ctt (arcsec^2) of a system");
  add_ao_system_options(*cmd, c->system);
  cmd->add_option("-o,--output", c->output_dir,
                  "output folder (created if missing); the matrices appear together when all are "
                  "written, or not at all")
      ->required();
  cmd->add_option("--kinds", c->kinds, "comma-separated: cmm (n x n), ctm (m x n), ctt (m x m)")
      ->capture_default_str();
  cmd->add_option("--dtype", c->dtype, "f64 or f32 (computed in FP64, rounded once)")
      ->capture_default_str();
  cmd->add_option("--format", c->format, "npy or fits (with BUNIT and AOSYSTEM/AOKIND cards)")
      ->capture_default_str();
  cmd->add_flag("--no-noise", c->no_noise,
                "turbulence only: no noise terms (Cmm is then generally not positive definite)");
  cmd->callback([&g, c] { run_ao_covariance(g, *c); });
}

// ---------------------------------------------------------------- ao structure-function

struct AoStructureCliOptions {
  double r0 = 0;
  std::string L0;  // text, so that "inf" (the Kolmogorov limit) is accepted explicitly
  std::string separations, range, output;
  bool covariance = false;
};

// Shortest text that reads back as the same double: what was found is shown exactly.
std::string number_text(double value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc{} ? std::string(text, end) : std::string("?");
}

double parse_double(const std::string& text, const std::string& what) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty())
    throw InvalidInput(what + ": expected a number, found '" + text + "'");
  return value;
}

// --range a:b:n -> n equally spaced separations from a to b inclusive, metres.
std::vector<double> parse_range(const std::string& text) {
  const std::size_t c1 = text.find(':');
  const std::size_t c2 = c1 == std::string::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string::npos || text.find(':', c2 + 1) != std::string::npos)
    throw InvalidInput("--range: expected START:STOP:COUNT (metres, metres, points), found '" +
                       text + "'");
  const double a = parse_double(text.substr(0, c1), "--range START");
  const double b = parse_double(text.substr(c1 + 1, c2 - c1 - 1), "--range STOP");
  const std::string count_text = text.substr(c2 + 1);
  long long n = 0;
  const auto [ptr, ec] =
      std::from_chars(count_text.data(), count_text.data() + count_text.size(), n);
  if (ec != std::errc{} || ptr != count_text.data() + count_text.size() || n < 1 || n > 100000000)
    throw InvalidInput("--range COUNT: expected an integer from 1 to 1e8, found '" + count_text +
                       "'");
  if (!std::isfinite(a) || !std::isfinite(b) || a < 0 || b < a)
    throw InvalidInput("--range: expected finite 0 <= START <= STOP, found START " +
                       number_text(a) + ", STOP " + number_text(b));
  if (n == 1 && a != b) throw InvalidInput("--range: COUNT 1 needs START == STOP, found " + text);
  std::vector<double> r(static_cast<std::size_t>(n));
  for (long long i = 0; i < n; ++i)  // a + i h, the last one exactly b (as numpy.linspace)
    r[static_cast<std::size_t>(i)] =
        i == n - 1 ? b : a + static_cast<double>(i) * ((b - a) / static_cast<double>(n - 1));
  return r;
}

void run_ao_structure(const Globals& g, const AoStructureCliOptions& c) {
  (void)io::format_of(c.output);
  check_distinct_paths({{"--separations", c.separations}}, {{"-o", c.output}});
  io::check_output_path(c.output);
  const double L0 =
      c.L0 == "inf" ? std::numeric_limits<double>::infinity() : parse_double(c.L0, "--L0");
  if (!std::isfinite(c.r0) || c.r0 <= 0)
    throw InvalidInput("--r0: expected a finite Fried parameter > 0 in metres, found " +
                       number_text(c.r0));
  if (std::isnan(L0) || L0 <= 0 || (c.covariance && std::isinf(L0)))
    throw InvalidInput(std::string("--L0: expected an outer scale > 0 in metres") +
                       (c.covariance ? " and finite (the phase variance diverges without one)"
                                     : " (or inf for Kolmogorov)") +
                       ", found " + c.L0);
  if (c.separations.empty() == c.range.empty())
    throw InvalidInput("expected exactly one of --separations FILE.npy and --range A:B:N, found " +
                       std::string(c.range.empty() ? "neither" : "both"));

  Array r;
  if (!c.range.empty()) {
    const std::vector<double> values = parse_range(c.range);
    r = Array::from_values<double>(values, {static_cast<std::int64_t>(values.size())});
  } else {
    // Every dtype a .npy may hold here is real (integers or floats); widen to FP64 exactly.
    r = io::read_npy(c.separations).astype(DType::f64).contiguous();
  }
  Array out(DType::f64, r.shape());
  const double* rv = r.data_as<double>();
  double* ov = out.data_as<double>();
  for (std::int64_t i = 0; i < r.size(); ++i) {
    if (!std::isfinite(rv[i]) || rv[i] < 0)
      throw InvalidInput((c.separations.empty() ? std::string("--range") : c.separations) +
                         ": expected finite separations >= 0 metres, found " + number_text(rv[i]) +
                         " at flat index " + std::to_string(i));
    ov[i] = c.covariance ? ao::vonkarman_phase_covariance(rv[i], c.r0, L0)
                         : ao::vonkarman_structure_function(rv[i], c.r0, L0);
  }
  detail(g, std::string(c.covariance ? "C(r)" : "D(r)") + " at " + std::to_string(r.size()) +
                " separations, r0 = " + number_text(c.r0) + " m, L0 = " + c.L0 + " m");
  write_array(g, c.output, out,
              "halfscope " HALFSCOPE_VERSION " ao structure-function " +
                  std::string(c.covariance ? "C(r)" : "D(r)") + " rad^2 r0=" + number_text(c.r0) +
                  " L0=" + c.L0);
}

void register_ao_structure(CLI::App& ao, Globals& g) {
  auto c = std::make_shared<AoStructureCliOptions>();
  auto* cmd = ao.add_subcommand(
      "structure-function",
      "tabulate the von Karman phase structure function D(r) (or covariance C(r)) in rad^2");
  cmd->add_option("--r0", c->r0, "Fried parameter, metres")->required();
  cmd->add_option("--L0", c->L0, "outer scale, metres (inf: Kolmogorov, D(r) only)")->required();
  cmd->add_option("--separations", c->separations, "separations r in metres (.npy, any shape)");
  cmd->add_option("--range", c->range, "START:STOP:COUNT separations in metres, inclusive");
  cmd->add_option("-o,--output", c->output, "output file (.npy float64, same shape as r)")
      ->required();
  cmd->add_flag("--covariance", c->covariance, "the phase covariance C(r) instead of D(r)");
  cmd->callback([&g, c] { run_ao_structure(g, *c); });
}

}  // namespace

void register_ao(CLI::App& app, Globals& g) {
  auto* ao = app.add_subcommand("ao", "adaptive-optics tomography (covariance, evaluation)");
  ao->require_subcommand(1);
  register_ao_covariance(*ao, g);
  register_ao_structure(*ao, g);
  register_ao_evaluate(*ao, g);
  register_ao_reconstructor(*ao, g);
}

}  // namespace halfscope::cli
