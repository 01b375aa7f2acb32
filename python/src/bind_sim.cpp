// halfscope._core.simulate_*: the simulated radio observations and seismic data sets behind
// hs.simulate (python/halfscope/simulate.py gives them keyword arguments and defaults).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <optional>

#include "arrays.hpp"
#include "bindings.hpp"
#include "halfscope/sim/radio.hpp"
#include "halfscope/sim/seismic.hpp"

namespace halfscope::python {

namespace {

// An (n, 3) array of east, north, up metres becomes an antenna table named ant0, ant1, ...
sim::AntennaTable table_of(const std::string& spec, const std::optional<AnyArray>& positions) {
  if (!positions) return sim::load_antennas(spec);
  const Array p = view_of(*positions, "antennas").to(Memory::host).astype(DType::f64);
  if (p.ndim() != 2 || p.dim(1) != 3)
    throw InvalidInput(
        "Python argument 'antennas': expected an (n, 3) array of east, north, up "
        "metres, found shape " +
        p.describe());
  if (p.dim(0) < 2)
    throw InvalidInput("Python argument 'antennas': an array needs at least 2 antennas, found " +
                       std::to_string(p.dim(0)));
  sim::AntennaTable t{"array argument", {}};
  for (std::int64_t i = 0; i < p.dim(0); ++i) {
    const double e = p.at_as_double(3 * i), n = p.at_as_double(3 * i + 1),
                 u = p.at_as_double(3 * i + 2);
    if (!std::isfinite(e) || !std::isfinite(n) || !std::isfinite(u))
      throw InvalidInput("Python argument 'antennas': row " + std::to_string(i) +
                         " is not finite (expected east, north, up in metres)");
    t.antennas.push_back({"ant" + std::to_string(i), e, n, u});
  }
  return t;
}

nb::dict psf(const std::string& spec, const std::optional<AnyArray>& positions, std::int64_t rows,
             std::int64_t cols, double dec_deg, double ha_start_h, double ha_end_h,
             double ha_step_s, double freq_hz, double bandwidth_hz, std::int64_t channels,
             double latitude_deg, double pixel_arcsec, const std::string& weighting) {
  const sim::AntennaTable table = table_of(spec, positions);
  sim::PsfOptions o;
  o.rows = rows;
  o.cols = cols;
  o.track = {dec_deg, ha_start_h,   ha_end_h, ha_step_s,
             freq_hz, bandwidth_hz, channels, latitude_deg};
  o.pixel_arcsec = pixel_arcsec;
  o.weighting = sim::parse_weighting(weighting);
  sim::PsfResult r;
  {
    nb::gil_scoped_release unlocked;
    r = sim::simulate_psf(table, o);
  }
  nb::dict d;
  d["psf"] = to_python(r.gridded.psf, Framework::numpy);
  d["uv"] = to_python(r.uv, Framework::numpy);
  d["pixel_arcsec"] = r.pixel_arcsec;
  d["max_baseline_m"] = r.max_baseline_m;
  d["samples"] = r.gridded.samples;
  d["dropped"] = r.gridded.dropped;
  d["occupied_cells"] = r.gridded.occupied_cells;
  d["antennas"] = static_cast<std::int64_t>(table.antennas.size());
  return d;
}

nb::dict sky(std::int64_t rows, std::int64_t cols, std::int64_t sources, double flux_index,
             double flux_min, double flux_max, double halo_ratio, double halo_correlation_px,
             std::uint64_t seed) {
  const sim::SkyOptions o{
      rows, cols, sources, flux_index, flux_min, flux_max, halo_ratio, halo_correlation_px, seed};
  sim::SkyResult r;
  {
    nb::gil_scoped_release unlocked;
    r = sim::simulate_sky(o);
  }
  nb::dict d;
  d["sky"] = to_python(r.sky, Framework::numpy);
  d["points"] = to_python(r.points, Framework::numpy);
  d["halo"] = to_python(r.halo, Framework::numpy);
  d["brightest"] = r.brightest;
  d["halo_peak"] = r.halo_peak;
  return d;
}

nb::dict observation(const AnyArray& sky_image, const AnyArray& psf_image, double snr_db,
                     std::uint64_t seed, const std::string& boundary) {
  const Array f = view_of(sky_image, "sky").to(Memory::host);
  const Array h = view_of(psf_image, "psf").to(Memory::host);
  const sim::ObservationOptions o{snr_db, seed, parse_boundary(boundary)};
  sim::ObservationResult r;
  {
    nb::gil_scoped_release unlocked;
    r = sim::simulate_observation(f, h, o);
  }
  nb::dict d;
  d["dirty"] = to_python(r.dirty, Framework::numpy);
  d["sigma"] = r.sigma;
  d["signal_power"] = r.signal_power;
  return d;
}

nb::dict seismic(std::int64_t channels, std::int64_t samples, std::int64_t templates,
                 std::int64_t template_length, std::int64_t events_per_template,
                 const std::vector<double>& event_cc, double noise_colour, std::int64_t max_moveout,
                 double sample_rate, const std::string& normalize, std::uint64_t seed) {
  sim::SeismicSimOptions o;
  o.channels = channels;
  o.samples = samples;
  o.templates = templates;
  o.template_length = template_length;
  o.events_per_template = events_per_template;
  o.event_cc = event_cc;
  o.noise_colour = noise_colour;
  o.max_moveout = max_moveout;
  o.sample_rate = sample_rate;
  o.normalize = parse_mf_normalize(normalize);
  o.seed = seed;
  sim::SeismicSimulation r;
  {
    nb::gil_scoped_release unlocked;
    r = sim::simulate_seismic(o);
  }
  nb::list events;
  for (const auto& e : r.events) {
    nb::dict x;
    x["template"] = e.template_index;
    x["sample"] = e.sample;
    x["cc"] = e.cc;
    x["expected_cc_sum"] = e.expected_cc_sum;
    x["amplitude"] = e.amplitude;
    events.append(x);
  }
  nb::dict d;
  d["data"] = to_python(r.data, Framework::numpy);
  d["templates"] = to_python(r.templates, Framework::numpy);
  d["moveouts"] = to_python(r.moveouts, Framework::numpy);
  d["weights"] = to_python(r.weights, Framework::numpy);
  d["events"] = events;
  return d;
}

}  // namespace

void bind_sim(nb::module_& m) {
  m.def("simulate_psf", &psf, nb::arg("antennas"), nb::arg("positions").none(), nb::arg("rows"),
        nb::arg("cols"), nb::arg("dec_deg"), nb::arg("ha_start_h"), nb::arg("ha_end_h"),
        nb::arg("ha_step_s"), nb::arg("freq_hz"), nb::arg("bandwidth_hz"), nb::arg("channels"),
        nb::arg("latitude_deg"), nb::arg("pixel_arcsec"), nb::arg("weighting"),
        "The PSF of an antenna array (halfscope::sim::simulate_psf).");
  m.def("simulate_sky", &sky, nb::arg("rows"), nb::arg("cols"), nb::arg("sources"),
        nb::arg("flux_index"), nb::arg("flux_min"), nb::arg("flux_max"), nb::arg("halo_ratio"),
        nb::arg("halo_correlation_px"), nb::arg("seed"), "A model sky (sim::simulate_sky).");
  m.def("simulate_observation", &observation, nb::arg("sky"), nb::arg("psf"), nb::arg("snr_db"),
        nb::arg("seed"), nb::arg("boundary"), "The dirty image g = H f + n.");
  m.def("simulate_seismic", &seismic, nb::arg("channels"), nb::arg("samples"), nb::arg("templates"),
        nb::arg("template_length"), nb::arg("events_per_template"), nb::arg("event_cc"),
        nb::arg("noise_colour"), nb::arg("max_moveout"), nb::arg("sample_rate"),
        nb::arg("normalize"), nb::arg("seed"),
        "Synthetic seismic data with planted events (sim::simulate_seismic).");
}

}  // namespace halfscope::python
