// halfscope._core.ao_*: adaptive-optics systems, covariances, the tomographic reconstructor and
// its evaluation (study 002) behind hs.ao and hs.simulate.ao_system. Systems cross the boundary
// as the JSON text of docs/ao.md, so Python holds them as plain dicts.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "bindings.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/linalg/tiles.hpp"
#include "policy_arg.hpp"

namespace halfscope::python {

namespace {

ao::AoSystem system_of(const std::string& json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidInput(std::string("AO system: not valid JSON: ") + e.what());
  }
  return ao::ao_system_from_json(j, "system");
}

// kind: "preset" (text = name), "file" (text = path, atmosphere = MOAO atmosphere file or ""),
// "json" (text = the JSON form). Returns the validated system as JSON text.
std::string load_system(const std::string& kind, const std::string& text,
                        const std::string& atmosphere, int layers) {
  ao::AoSystem s;
  if (kind == "preset")
    s = ao::ao_preset(text, layers);
  else if (kind == "file")
    s = ao::read_ao_system(text, atmosphere);
  else if (kind == "json")
    s = system_of(text);
  else
    throw InvalidInput("AO system source '" + kind + "': expected preset, file or json");
  return ao::to_json(s).dump();
}

// The factorization's side of a reconstructor report: tiles, recoveries, memory and copies.
void add_factor_fields(nb::dict& rep, const linalg::CholeskyReport& f) {
  for (const auto [key, value] : cholesky_report(f)) rep[key] = value;
}

// The solves' side: tiles per variant, and for a factor streamed from host memory its slabs,
// blocks of rows and bytes copied ("solve_slabs", ...).
void add_solve_fields(nb::dict& rep, const linalg::SolveReport& s) {
  rep["solve_tiles"] = tile_counts(s.tiles);
  s.for_each_count([&](const char* key, std::int64_t value) {
    rep[nb::str((std::string("solve_") + key).c_str())] = value;
  });
}

ao::ProjectionMethod parse_projection(const std::string& text) {
  if (text == "matched") return ao::ProjectionMethod::matched;
  if (text == "fried") return ao::ProjectionMethod::fried;
  throw InvalidInput("projection '" + text + "': expected matched or fried");
}

nb::object covariance(const std::string& system, const std::string& kind, const std::string& dtype,
                      const std::string& device, bool noise) {
  const ao::AoSystem s = system_of(system);
  ao::CovarianceOptions o;
  o.device = parse_device_kind(device);
  o.dtype = parse_dtype(dtype);
  o.noise = noise;
  const ao::CovarianceKind k = ao::parse_covariance_kind(kind, "kind");
  Array c;
  {
    nb::gil_scoped_release unlocked;
    c = ao::covariance(s, k, o);
  }
  return to_python(c, Framework::numpy);
}

nb::dict reconstructor_of_system(const std::string& system, const std::string& policy,
                                 const std::optional<AnyArray>& table,
                                 const std::string& solve_policy, std::int64_t tile, bool recover,
                                 const std::string& device, const std::vector<int>& devices,
                                 const std::string& tiptilt, std::int64_t device_memory) {
  const ao::AoSystem s = system_of(system);
  ao::ReconstructorOptions o;
  o.policy = policy_of(policy, table);
  o.solve_policy = linalg::parse_policy(solve_policy);
  o.tile = tile;
  o.recover = recover;
  o.device = parse_device_kind(device);
  o.devices = devices;  // checked by hs.ao.reconstructor (linalg.py's _device_list)
  o.tiptilt = ao::parse_tiptilt_method(tiptilt, "tiptilt");
  o.device_memory = device_memory;  // checked by the library (>= 0, a GPU run, one device)
  ao::Reconstructor r;
  {
    nb::gil_scoped_release unlocked;
    r = ao::tomographic_reconstructor(s, o);
  }
  nb::dict rep;
  add_factor_fields(rep, r.factor);
  add_solve_fields(rep, r.solve);
  rep["covariance_ms"] = r.covariance_ms;
  rep["factor_ms"] = r.factor_ms;
  rep["solve_ms"] = r.solve_ms;
  rep["tiptilt_groups"] = r.tiptilt_groups;
  rep["rhs_memory"] = std::string(memory_name(r.rhs_memory));
  rep["device"] = r.device == DeviceKind::Cuda ? "cuda" : "cpu";
  nb::dict d;
  d["R"] = to_python(r.matrix, Framework::numpy);
  d["report"] = rep;
  return d;
}

// R = Ctm Cmm^-1 from matrices: Cmm's lower triangle tiled in FP32, factored under the policy,
// then Ctm's rows solved against the factor (X Cmm = Ctm), as the reconstructor does.
nb::dict reconstructor_of_matrices(const AnyArray& cmm, const AnyArray& ctm,
                                   const std::string& policy, const std::optional<AnyArray>& table,
                                   const std::string& solve_policy, std::int64_t tile, bool recover,
                                   const std::string& device, const std::vector<int>& devices,
                                   std::int64_t device_memory, std::uintptr_t stream) {
  const Array a = view_of(cmm, "cmm");
  const Array b = view_of(ctm, "ctm");
  linalg::CholeskyOptions co;
  co.policy = policy_of(policy, table);
  co.recover = recover;
  co.devices = devices;  // checked by hs.ao.reconstructor: a list means a GPU run
  linalg::SolveOptions so;
  so.policy = linalg::parse_policy(solve_policy);
  so.devices = devices;
  // A budget (one listed device, checked by hs.ao.reconstructor): the tiles stay in host memory
  // and both steps stream them through the device.
  co.device_memory = so.device_memory = device_memory;
  const Memory memory =
      device_memory == 0 && resolve_device(parse_device_kind(device)) == DeviceKind::Cuda
          ? Memory::device
          : Memory::host;
  linalg::CholeskyReport cr;
  linalg::SolveReport sr;
  Array r;
  {
    nb::gil_scoped_release unlocked;
    StreamOrder order(stream, a.on_device() || b.on_device());
    linalg::TileMatrix l =
        linalg::TileMatrix::from_dense(a, tile, linalg::TileFill::lower, DType::f32, memory);
    Array rows = b.to(Memory::host).astype(DType::f32).to(memory);
    cr = linalg::cholesky_tiles(l, co);
    sr = linalg::solve_right(l, rows, so);
    r = rows.to(Memory::host);
  }
  nb::dict rep;
  add_factor_fields(rep, cr);
  add_solve_fields(rep, sr);
  nb::dict d;
  d["R"] = to_python(r, Framework::numpy);
  d["report"] = rep;
  return d;
}

nb::dict evaluate(const std::string& system, const AnyArray& reconstructor, double wavelength_m,
                  std::int64_t psf_size, const std::string& projection, const std::string& device,
                  std::uintptr_t stream) {
  const ao::AoSystem s = system_of(system);
  const Array r = view_of(reconstructor, "reconstructor");
  ao::EvaluationOptions o;
  o.wavelength_m = wavelength_m;
  o.psf_size = psf_size;
  o.device = parse_device_kind(device);
  o.projection = parse_projection(projection);
  const ao::Evaluation e =
      released(stream, r.on_device(), [&] { return ao::evaluate_reconstructor(s, r, o); });
  nb::dict d;
  d["tomographic_error_nm"] = e.tomographic_error_nm;
  d["strehl_marechal"] = e.strehl_marechal;
  d["strehl_otf"] = e.strehl_otf;
  d["wavelength_m"] = e.wavelength_m;
  d["psf"] = to_python(e.psf, Framework::numpy);
  d["psf_diffraction"] = to_python(e.psf_diffraction, Framework::numpy);
  d["error_covariance"] = to_python(e.error_covariance, Framework::numpy);
  return d;
}

}  // namespace

void bind_ao(nb::module_& m) {
  m.def("ao_system", &load_system, nb::arg("kind"), nb::arg("text"), nb::arg("atmosphere"),
        nb::arg("layers"), "A validated AO system as JSON text (preset, file or JSON).");
  m.def("ao_presets", &ao::ao_preset_names, "The built-in AO system names.");
  m.def("ao_covariance", &covariance, nb::arg("system"), nb::arg("kind"), nb::arg("dtype"),
        nb::arg("device"), nb::arg("noise"), "Cmm, Ctm or Ctt of a system, dense, host.");
  m.def("ao_reconstructor_system", &reconstructor_of_system, nb::arg("system"), nb::arg("policy"),
        nb::arg("table").none(), nb::arg("solve_policy"), nb::arg("tile"), nb::arg("recover"),
        nb::arg("device"), nb::arg("devices"), nb::arg("tiptilt"), nb::arg("device_memory"),
        "halfscope::ao::tomographic_reconstructor of a system.");
  m.def("ao_reconstructor_matrices", &reconstructor_of_matrices, nb::arg("cmm"), nb::arg("ctm"),
        nb::arg("policy"), nb::arg("table").none(), nb::arg("solve_policy"), nb::arg("tile"),
        nb::arg("recover"), nb::arg("device"), nb::arg("devices"), nb::arg("device_memory"),
        nb::arg("stream"), "R = Ctm Cmm^-1 by the tile Cholesky.");
  m.def(
      "ao_reconstructor_fp64",
      [](const AnyArray& cmm, const AnyArray& ctm, const std::string& device,
         std::uintptr_t stream) {
        const Array a = view_of(cmm, "cmm"), b = view_of(ctm, "ctm");
        const DeviceKind d = parse_device_kind(device);
        const Array r = released(stream, a.on_device() || b.on_device(),
                                 [&] { return ao::reconstructor_fp64(a, b, d); });
        return to_python(r, Framework::numpy);
      },
      nb::arg("cmm"), nb::arg("ctm"), nb::arg("device"), nb::arg("stream"),
      "R = Ctm Cmm^-1 in FP64.");
  m.def("ao_evaluate", &evaluate, nb::arg("system"), nb::arg("reconstructor"),
        nb::arg("wavelength_m"), nb::arg("psf_size"), nb::arg("projection"), nb::arg("device"),
        nb::arg("stream"), "Tomographic error and Strehl ratios of a reconstructor.");
}

}  // namespace halfscope::python
