// Per-tile precision policies of the tile Cholesky (include/halfscope/linalg/policy.hpp).
#include "halfscope/linalg/policy.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>

#include "halfscope/core/error.hpp"

namespace halfscope::linalg {
namespace {

constexpr std::array<GemmVariant, 7> kVariants = {
    GemmVariant::DP,  GemmVariant::SP,  GemmVariant::TF32, GemmVariant::HP1,
    GemmVariant::HP2, GemmVariant::HP3, GemmVariant::BF16};

// Largest finite FP16 value: an FP16 operand with a larger entry would overflow to inf.
constexpr double kHalfMax = 65504.0;

std::string variant_list() {
  std::string out;
  for (const GemmVariant v : kVariants) {
    if (!out.empty()) out += ", ";
    out += gemm_variant_name(v);
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(a[k])) !=
        std::tolower(static_cast<unsigned char>(b[k])))
      return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_policy(std::string_view text, const std::string& why) {
  throw InvalidInput("policy '" + std::string(text) + "': " + why +
                     "; expected uniform:<V>, band:<V>=<distance>,...,<V>=rest or "
                     "adaptive:tol=<x> with V one of " +
                     variant_list());
}

// A variant name inside a policy string; errors name the whole policy text.
GemmVariant policy_variant(std::string_view text, std::string_view name) {
  for (const GemmVariant v : kVariants)
    if (iequals(trim(name), gemm_variant_name(v))) return v;
  bad_policy(text, "unknown variant '" + std::string(name) + "'");
}

Policy parse_band(std::string_view text, std::string_view body) {
  std::vector<BandStep> steps;
  bool have_rest = false;
  GemmVariant rest = GemmVariant::SP;
  while (!body.empty()) {
    const std::size_t comma = body.find(',');
    const std::string_view item = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    if (have_rest) bad_policy(text, "'rest' must be the last step");
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      bad_policy(text, "step '" + std::string(item) + "' is not <V>=<distance> or <V>=rest");
    const GemmVariant v = policy_variant(text, item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    if (iequals(value, "rest")) {
      have_rest = true;
      rest = v;
      continue;
    }
    std::int64_t d = -1;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), d);
    if (ec != std::errc{} || end != value.data() + value.size() || d < 0)
      bad_policy(text, "distance '" + std::string(value) + "' is not an integer >= 0");
    steps.push_back({v, d});
  }
  if (!have_rest) bad_policy(text, "the last step must be <V>=rest");
  try {
    return band_policy(std::move(steps), rest);
  } catch (const InvalidInput& e) {
    bad_policy(text, e.what());
  }
}

Policy parse_adaptive(std::string_view text, std::string_view body) {
  const std::size_t eq = body.find('=');
  if (eq == std::string_view::npos || !iequals(trim(body.substr(0, eq)), "tol"))
    bad_policy(text, "adaptive takes exactly tol=<x>");
  const std::string value(trim(body.substr(eq + 1)));
  double tol = 0.0;
  std::size_t used = 0;
  try {
    tol = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !(tol > 0.0 && tol < 1.0))
    bad_policy(text, "tol '" + value + "' is not a number in (0, 1)");
  return adaptive_policy(tol);
}

}  // namespace

std::string_view gemm_variant_name(GemmVariant v) noexcept {
  switch (v) {
    case GemmVariant::DP:
      return "DP";
    case GemmVariant::SP:
      return "SP";
    case GemmVariant::TF32:
      return "TF32";
    case GemmVariant::HP1:
      return "HP1";
    case GemmVariant::HP2:
      return "HP2";
    case GemmVariant::HP3:
      return "HP3";
    case GemmVariant::BF16:
      return "BF16";
  }
  return "?";
}

GemmVariant parse_gemm_variant(std::string_view text) {
  for (const GemmVariant v : kVariants)
    if (iequals(trim(text), gemm_variant_name(v))) return v;
  throw InvalidInput("GEMM variant '" + std::string(text) + "': expected one of " + variant_list());
}

std::span<const GemmVariant> all_gemm_variants() noexcept {
  return kVariants;
}

double gemm_variant_unit_roundoff(GemmVariant v) noexcept {
  switch (v) {
    case GemmVariant::DP:
      return std::ldexp(1.0, -53);
    case GemmVariant::SP:
      return std::ldexp(1.0, -24);
    case GemmVariant::TF32:
    case GemmVariant::HP1:
    case GemmVariant::HP2:
    case GemmVariant::HP3:
      return std::ldexp(1.0, -11);
    case GemmVariant::BF16:
      return std::ldexp(1.0, -8);
  }
  return 1.0;
}

bool gemm_variant_uses_fp16(GemmVariant v) noexcept {
  return v == GemmVariant::HP1 || v == GemmVariant::HP2 || v == GemmVariant::HP3;
}

Policy::Policy(std::string name, Rule rule, bool reads_norms)
    : name_(std::move(name)), rule_(std::move(rule)), reads_norms_(reads_norms) {
  if (!rule_) throw InvalidInput("Policy '" + name_ + "': the rule is empty");
}

Policy::Policy() : Policy(uniform_policy(GemmVariant::SP)) {}

Policy uniform_policy(GemmVariant v) {
  return Policy(
      "uniform:" + std::string(gemm_variant_name(v)), [v](const TileQuery&) { return v; }, false);
}

Policy band_policy(std::vector<BandStep> steps, GemmVariant rest) {
  std::string name = "band:";
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].max_distance < 0 || (k > 0 && steps[k].max_distance <= steps[k - 1].max_distance))
      throw InvalidInput("band policy: distances must be >= 0 and strictly increasing, found " +
                         std::to_string(steps[k].max_distance) + " at step " +
                         std::to_string(k + 1));
    name += std::string(gemm_variant_name(steps[k].variant)) + "=" +
            std::to_string(steps[k].max_distance) + ",";
  }
  name += std::string(gemm_variant_name(rest)) + "=rest";
  return Policy(
      std::move(name),
      [steps = std::move(steps), rest](const TileQuery& q) {
        const std::int64_t distance = q.i - q.j;
        for (const BandStep& s : steps)
          if (distance <= s.max_distance) return s.variant;
        return rest;
      },
      false);
}

Policy adaptive_policy(double tol) {
  if (!(tol > 0.0 && tol < 1.0))
    throw InvalidInput("adaptive policy: tol must lie in (0, 1), found " + std::to_string(tol));
  // Shortest text that reads back to the same double, so name() round-trips through parse_policy.
  std::array<char, 32> digits{};
  const auto printed = std::to_chars(digits.data(), digits.data() + digits.size(), tol);
  std::string name = "adaptive:tol=" + std::string(digits.data(), printed.ptr);
  return Policy(std::move(name), [tol](const TileQuery& q) {
    // A zero matrix has nothing to lose: any precision is exact on zeros.
    const double relative =
        q.matrix_norm > 0.0 ? q.tile_norm * static_cast<double>(q.tile_rows) / q.matrix_norm : 0.0;
    // Lowest precision first: the first variant the criterion admits is the cheapest one.
    for (const GemmVariant v : {GemmVariant::BF16, GemmVariant::HP1}) {
      if (gemm_variant_uses_fp16(v) && q.tile_norm > kHalfMax) continue;
      if (relative < tol / gemm_variant_unit_roundoff(v)) return v;
    }
    return GemmVariant::SP;
  });
}

Policy parse_policy(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) bad_policy(text, "no ':' after the policy kind");
  const std::string_view kind = trim(text.substr(0, colon));
  const std::string_view body = trim(text.substr(colon + 1));
  if (iequals(kind, "uniform")) return uniform_policy(policy_variant(text, body));
  if (iequals(kind, "band")) return parse_band(text, body);
  if (iequals(kind, "adaptive")) return parse_adaptive(text, body);
  bad_policy(text, "unknown policy kind '" + std::string(kind) + "'");
}

}  // namespace halfscope::linalg
