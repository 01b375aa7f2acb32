// halfscope._core.cholesky and spd_solve: the mixed-precision tile Cholesky of study 002 behind
// hs.linalg (python/halfscope/linalg.py).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>

#include "bindings.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/solve.hpp"
#include "policy_arg.hpp"

namespace halfscope::python {

linalg::Policy policy_of(const std::string& text, const std::optional<AnyArray>& table) {
  if (!table) return linalg::parse_policy(text);
  const Array t = view_of(*table, "policy table").to(Memory::host).astype(DType::i64);
  if (t.ndim() != 2 || t.dim(0) != t.dim(1))
    throw InvalidInput("policy table: expected a square (NT, NT) array, found " + t.describe());
  const auto variants = linalg::all_gemm_variants();
  auto cells = std::make_shared<std::vector<linalg::GemmVariant>>();
  for (std::int64_t k = 0; k < t.size(); ++k) {
    const auto v = static_cast<std::int64_t>(t.at_as_double(k));
    if (v < 0 || v >= static_cast<std::int64_t>(variants.size()))
      throw InvalidInput("policy table: entry " + std::to_string(k) + " is " + std::to_string(v) +
                         ", expected a variant index 0..6 (DP, SP, TF32, HP1, HP2, HP3, BF16)");
    cells->push_back(variants[static_cast<std::size_t>(v)]);
  }
  const std::int64_t nt = t.dim(0);
  return linalg::Policy(text, [cells, nt](const linalg::TileQuery& q) {
    if (q.i >= nt || q.j >= nt)
      throw InvalidInput("policy table of " + std::to_string(nt) + " x " + std::to_string(nt) +
                         " tiles asked for tile (" + std::to_string(q.i) + ", " +
                         std::to_string(q.j) + ")");
    return (*cells)[static_cast<std::size_t>(q.i * nt + q.j)];
  });
}

namespace {

Memory memory_for(const std::string& device) {
  return resolve_device(parse_device_kind(device)) == DeviceKind::Cuda ? Memory::device
                                                                       : Memory::host;
}

// `devices` and `device_memory` come checked from hs.linalg.cholesky (linalg.py).
nb::dict cholesky(const AnyArray& a, const std::string& policy,
                  const std::optional<AnyArray>& table, std::int64_t tile, bool recover,
                  const std::string& device, const std::vector<int>& devices,
                  std::int64_t device_memory, std::uintptr_t stream, const std::string& framework,
                  bool scale) {
  const Array dense = view_of(a, "a");
  linalg::CholeskyOptions o;
  o.policy = policy_of(policy, table);
  o.recover = recover;
  o.scale = scale;
  o.devices = devices;
  o.device_memory = device_memory;
  // With a device list a host matrix stays on the host: the library copies it to the devices
  // (out of core on one device when it does not fit the budget); a device matrix stays there.
  const Memory memory = devices.empty()     ? memory_for(device)
                        : dense.on_device() ? Memory::device
                                            : Memory::host;
  linalg::CholeskyReport r;
  Array l;
  {
    nb::gil_scoped_release unlocked;
    StreamOrder order(stream, dense.on_device());
    linalg::TileMatrix m =
        linalg::TileMatrix::from_dense(dense, tile, linalg::TileFill::lower, DType::f32, memory);
    r = linalg::cholesky_tiles(m, o);
    // A device matrix gets its factor back on its device, made dense there, when it fits beside
    // the tiles (else through the host, and Python moves it back).
    l = m.to_dense(dense.on_device() ? linalg::dense_copy_memory(m, dense) : Memory::host,
                   linalg::UpperTriangle::zero);
  }
  nb::dict d;
  d["L"] = to_python(l, l.on_device() ? parse_framework(framework) : Framework::numpy);
  d["report"] = cholesky_report(r);
  return d;
}

// A X = B for SPD A. The library solves rows (X A = B); A is symmetric, so X^T A = B^T: B's
// columns are the right-hand sides, each solved as one row.
nb::dict solve(const AnyArray& a, const AnyArray& b, const std::string& policy,
               const std::optional<AnyArray>& table, const std::string& solve_policy,
               std::int64_t tile, bool refine, std::int64_t max_iterations,
               const std::string& device, std::uintptr_t stream) {
  const Array dense = view_of(a, "a");
  const Array rhs = view_of(b, "b").to(Memory::host).astype(DType::f32);
  if (rhs.ndim() < 1 || rhs.ndim() > 2)
    throw InvalidInput("Python argument 'b': expected a vector or a matrix, found " +
                       rhs.describe());
  const std::int64_t n = rhs.dim(0), r = rhs.ndim() == 2 ? rhs.dim(1) : 1;
  if (dense.ndim() != 2 || dense.dim(0) != n || dense.dim(1) != n)
    throw InvalidInput("Python argument 'b': expected " +
                       std::to_string(dense.ndim() == 2 ? dense.dim(0) : 0) +
                       " rows for a of shape " + dense.describe() + ", found " + rhs.describe());
  const Memory memory = memory_for(device);
  // Rows = right-hand sides (the transpose of b), C-contiguous float32.
  Array rows(DType::f32, {r, n});
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < r; ++k)
      rows.data_as<float>()[k * n + i] = rhs.data_as<float>()[i * r + k];
  Array x = rows.to(memory);
  nb::dict d;
  {
    nb::gil_scoped_release unlocked;
    StreamOrder order(stream, dense.on_device());
    linalg::TileMatrix m =
        linalg::TileMatrix::from_dense(dense, tile, linalg::TileFill::lower, DType::f32, memory);
    linalg::SolveOptions so;
    so.policy = linalg::parse_policy(solve_policy);
    if (refine) {
      linalg::RefinementOptions ro;
      ro.factor.policy = policy_of(policy, table);
      ro.solve = so;
      ro.max_iterations = max_iterations;
      const linalg::RefinementReport rr = linalg::solve_right_refined(m, x, ro);
      nb::gil_scoped_acquire locked;
      nb::dict rep = cholesky_report(rr.factor);
      rep["iterations"] = rr.iterations;
      rep["residuals"] = rr.residuals;
      rep["converged"] = rr.converged;
      rep["stop_reason"] = rr.stop_reason;
      d["report"] = rep;
    } else {
      linalg::CholeskyOptions co;
      co.policy = policy_of(policy, table);
      const linalg::CholeskyReport cr = linalg::cholesky_tiles(m, co);
      linalg::solve_right(m, x, so);
      nb::gil_scoped_acquire locked;
      d["report"] = cholesky_report(cr);
    }
  }
  const Array xr = x.to(Memory::host);
  Array out(DType::f32, rhs.ndim() == 2 ? Shape{n, r} : Shape{n});
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < r; ++k)
      out.data_as<float>()[i * r + k] = xr.data_as<float>()[k * n + i];
  d["x"] = to_python(out, Framework::numpy);
  return d;
}

}  // namespace

void bind_linalg(nb::module_& m) {
  m.def("cholesky", &cholesky, nb::arg("a"), nb::arg("policy"), nb::arg("table").none(),
        nb::arg("tile"), nb::arg("recover"), nb::arg("device"), nb::arg("devices"),
        nb::arg("device_memory"), nb::arg("stream"), nb::arg("framework") = "numpy",
        nb::arg("scale") = true,
        "Tile Cholesky of an SPD matrix under a precision policy; L dense, float32, on the host "
        "(or on the device, as `framework`'s array, for a device matrix factored there).");
  m.def("spd_solve", &solve, nb::arg("a"), nb::arg("b"), nb::arg("policy"), nb::arg("table").none(),
        nb::arg("solve_policy"), nb::arg("tile"), nb::arg("refine"), nb::arg("max_iterations"),
        nb::arg("device"), nb::arg("stream"),
        "A x = b for SPD A by the tile Cholesky (optionally refined to FP32).");
}

}  // namespace halfscope::python
