// `halfscope ao evaluate SYSTEM --reconstructor R.npy`: scores a tomographic reconstructor on an AO
// system (evaluation.hpp): the tomographic error in nm rms and the Strehl ratio by Marechal and by
// the OTF path, optionally the long-exposure PSF and a JSON summary.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "ao_output_set.hpp"
#include "ao_system_arg.hpp"
#include "cli.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

struct AoEvaluateCliOptions {
  AoSystemArg system;
  std::string reconstructor, psf, json;
  double wavelength_m = 1.65e-6;
  std::int64_t psf_size = 256;
};

// The reconstructor file: one 2-D m x n array, shape checked here so that the message names it.
Array read_reconstructor(const std::string& path, std::int64_t m, std::int64_t n,
                         const std::string& label) {
  io::Dataset d = io::read_dataset(path);
  if (d.waveforms || d.arrays.size() != 1)
    throw InvalidInput(path +
                       ": expected a file holding one 2-D reconstructor array (.npy, .fits)");
  Array r = d.arrays.front().second;
  if (r.ndim() != 2 || r.dim(0) != m || r.dim(1) != n)
    throw InvalidInput(path + ": expected a " + std::to_string(m) + " x " + std::to_string(n) +
                       " reconstructor (truth slopes x measurement slopes of " + label +
                       "), found " + r.describe());
  // Dtype and values checked here too, before the covariances are generated (seconds to minutes),
  // so the message names the file rather than the library's argument.
  if (!dtype_is_float(r.dtype()))
    throw InvalidInput(path + ": expected a floating reconstructor (float64, float32, float16, " +
                       "bfloat16), found " + r.describe());
  const Array f = r.astype(DType::f64);
  const double* p = f.data_as<double>();
  for (std::int64_t i = 0; i < f.size(); ++i)
    if (!std::isfinite(p[i]))
      throw InvalidInput(path + ": expected finite reconstructor elements, found " +
                         std::to_string(p[i]) + " at (" + std::to_string(i / n) + ", " +
                         std::to_string(i % n) + ")");
  return r;
}

void write_summary(const std::string& path, const AoEvaluateCliOptions& c, const std::string& label,
                   const ao::AoSystem& system, const ao::Evaluation& e, double seconds) {
  nlohmann::json j;
  j["system"] = label;
  j["reconstructor"] = c.reconstructor;
  j["truth_slopes"] = ao::truth_count(system);
  j["measurement_slopes"] = ao::measurement_count(system);
  j["wavelength_m"] = e.wavelength_m;
  j["tomographic_error_nm"] = e.tomographic_error_nm;
  j["strehl_marechal"] = e.strehl_marechal;
  j["strehl_otf"] = e.strehl_otf;
  j["psf_size"] = c.psf_size;
  j["psf_pixel_arcsec"] = e.wavelength_m / (2.0 * system.diameter_m) * 206265.0;
  j["psf"] = c.psf.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.psf);
  j["seconds"] = seconds;
  j["halfscope"] = HALFSCOPE_VERSION;
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

void run_ao_evaluate(const Globals& g, const AoEvaluateCliOptions& c) {
  // Checked before the covariances are generated, so a typo fails in milliseconds.
  if (c.psf_size < 64 || c.psf_size > 8192 || (c.psf_size & (c.psf_size - 1)) != 0)
    throw InvalidInput("--psf-size: expected a power of two in [64, 8192], found " +
                       std::to_string(c.psf_size));
  check_distinct_paths({{"SYSTEM", c.system.spec},
                        {"--atmosphere", c.system.atmosphere},
                        {"--reconstructor", c.reconstructor}},
                       {{"--psf", c.psf}, {"--json", c.json}});
  check_text_output({"--json", c.json}, "JSON");
  if (!c.psf.empty()) {
    (void)io::format_of(c.psf);
    io::check_output_path(c.psf);
  }
  if (!c.json.empty()) io::check_output_path(c.json);
  const ao::AoSystem system = load_ao_system(c.system);
  const std::string label = ao_system_label(c.system);
  const std::int64_t m = ao::truth_count(system), n = ao::measurement_count(system);
  const Array r = read_reconstructor(c.reconstructor, m, n, label);
  ao::EvaluationOptions o;
  o.wavelength_m = c.wavelength_m;
  o.psf_size = c.psf_size;
  o.device = g.device_kind();
  info(g, "evaluating " + r.describe() + " on " + label + " (m = " + std::to_string(m) +
              ", n = " + std::to_string(n) + ")");
  const auto t0 = std::chrono::steady_clock::now();
  const ao::Evaluation e = ao::evaluate_reconstructor(system, r, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  detail(g, "ao evaluate: " + std::to_string(seconds) + " s (covariances, Cee, projection, PSF)");
  char line[256];
  std::snprintf(line, sizeof line, "tomographic error  %.2f nm rms\n", e.tomographic_error_nm);
  std::cout << line;
  std::snprintf(line, sizeof line, "Strehl at %.3f um  Marechal %.4f  OTF %.4f\n",
                e.wavelength_m * 1e6, e.strehl_marechal, e.strehl_otf);
  std::cout << line;
  // The PSF and the summary appear together or not at all (ao_output_set.hpp): a failed second
  // write must not leave this run's summary next to an older run's PSF (or the reverse).
  AoOutputSet outputs;
  if (!c.json.empty())
    write_summary(outputs.partial(c.json).string(), c, label, system, e, seconds);
  if (!c.psf.empty()) {
    io::Dataset d;  // the PSF is float64: written as is in every format
    d.source = c.psf;
    d.arrays.emplace_back("", e.psf);
    io::WriteOptions w;
    w.history = "halfscope " HALFSCOPE_VERSION
                " ao evaluate PSF, peak = Strehl (diffraction peak = 1), pixel lambda/(2D)";
    io::write_dataset(outputs.partial(c.psf), d, w);
  }
  outputs.commit();
  for (const std::string& path : {c.psf, c.json})
    if (!path.empty()) info(g, "wrote " + path);
}

}  // namespace

void register_ao_evaluate(CLI::App& ao, Globals& g) {
  auto c = std::make_shared<AoEvaluateCliOptions>();
  auto* cmd = ao.add_subcommand(
      "evaluate", "tomographic error (nm rms) and Strehl ratio of a reconstructor R (m x n)");
  add_ao_system_options(*cmd, c->system);
  cmd->add_option("--reconstructor", c->reconstructor, "R = Ctm Cmm^-1 as .npy or .fits (m x n)")
      ->required();
  cmd->add_option("--wavelength", c->wavelength_m, "science wavelength in metres")
      ->capture_default_str()
      ->check(positive_number("a wavelength in metres"));
  cmd->add_option("--psf", c->psf,
                  "write the long-exposure PSF (.fits, .npy, .npz or .png), Nyquist sampled");
  cmd->add_option("--psf-size", c->psf_size, "PSF pixels across (power of two, 64 to 8192)")
      ->capture_default_str();
  cmd->add_option("--json", c->json, "write the results to this JSON file");
  cmd->callback([&g, c] { run_ao_evaluate(g, *c); });
}

}  // namespace halfscope::cli
