// Precision policies from Python: a policy string ("band:SP=2,HP1=rest") or a table of variants
// per tile that python/halfscope/linalg.py fills by calling a user's Python function once per
// tile before the factorization starts (so the library's OpenMP tasks never call into Python).
#pragma once

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"

namespace halfscope::python {

/// `table`, when given, is an (NT, NT) integer array of GemmVariant indices (DP = 0 ... BF16 = 6,
/// the order of all_gemm_variants) read at (i, j), i > j; `text` is then the policy's name.
/// Otherwise `text` is parsed by linalg::parse_policy.
linalg::Policy policy_of(const std::string& text, const std::optional<AnyArray>& table);

/// {variant name: tile count} for a report's per-variant counts.
template <class Counts>
nb::dict tile_counts(const Counts& tiles) {
  nb::dict d;
  for (linalg::GemmVariant v : linalg::all_gemm_variants())
    d[std::string(linalg::gemm_variant_name(v)).c_str()] = tiles[static_cast<std::size_t>(v)];
  return d;
}

/// A factorization's report as the Python API returns it (hs.linalg.cholesky's report, the
/// factorization fields of the reconstructor's).
inline nb::dict cholesky_report(const linalg::CholeskyReport& r) {
  nb::dict d;
  d["policy"] = r.policy;
  d["tiles"] = tile_counts(r.tiles);
  r.for_each_count([&](const char* name, std::int64_t value) { d[name] = value; });
  d["recoveries"] = r.recoveries;
  return d;
}

}  // namespace halfscope::python
