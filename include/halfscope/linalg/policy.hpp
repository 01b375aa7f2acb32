// Per-tile precision policy of the mixed-precision tile Cholesky (issue 6, study 002 section VI):
// which GEMM variant updates each off-diagonal tile. POTRF, TRSM and SYRK always run in FP32; the
// policy only chooses the trailing-update GEMMs, where almost all the flops are.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace halfscope::linalg {

/// How one GEMM update C -= A B^T of FP32 tiles is computed (names as in study 002 Table I).
/// DP: FP64 products and sums, rounded once to FP32. SP: FP32. TF32: inputs rounded to TF32
/// (10-bit mantissa), FP32 accumulation. HP1: A, B in FP16, FP32 accumulation and C. HP2: A, B in
/// FP16, FP32 accumulation, result stored in FP16. HP3: A, B, C in FP16 and every product and sum
/// rounded to FP16. BF16: A, B in bfloat16, FP32 accumulation.
enum class GemmVariant : std::uint8_t { DP, SP, TF32, HP1, HP2, HP3, BF16 };

/// The name used in policy strings: "DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16".
std::string_view gemm_variant_name(GemmVariant v) noexcept;

/// Parses a variant name (case-insensitive). Throws InvalidInput naming the text and listing the
/// valid names.
GemmVariant parse_gemm_variant(std::string_view text);

/// Every variant, in declaration order.
std::span<const GemmVariant> all_gemm_variants() noexcept;

/// Unit roundoff of the product inputs of a variant: 2^-53 (DP), 2^-24 (SP), 2^-11 (TF32 and the
/// FP16 variants), 2^-8 (BF16). The quantity the adaptive rule compares against.
double gemm_variant_unit_roundoff(GemmVariant v) noexcept;

/// Whether the variant stores A and B in FP16 (and therefore overflows above 65504).
bool gemm_variant_uses_fp16(GemmVariant v) noexcept;

/// What a policy sees about one tile when choosing its variant.
struct TileQuery {
  std::int64_t i = 0;          // tile row
  std::int64_t j = 0;          // tile column (i > j for the GEMM-updated tiles)
  double tile_norm = 0.0;      // Frobenius norm of tile (i, j) of the input matrix
  double matrix_norm = 0.0;    // Frobenius norm of the whole (symmetric) input matrix
  std::int64_t tile_rows = 0;  // NT, the number of tile rows
};

/// A precision policy: a named callable from a tile to the variant of the GEMMs that update it.
/// Copyable; the callable must be thread-safe (it is called from OpenMP tasks).
class Policy {
 public:
  using Rule = std::function<GemmVariant(const TileQuery&)>;

  /// A policy with the given display name and rule. Throws InvalidInput for an empty rule.
  /// `reads_norms` false promises that the rule ignores tile_norm and matrix_norm (uniform, band):
  /// the variants can then be chosen before the input's norms are known, so a factorization that
  /// streams a host matrix can check the input while it already works (cholesky.hpp).
  Policy(std::string name, Rule rule, bool reads_norms = true);
  /// uniform:SP, the FP32 reference policy.
  Policy();

  /// The variant for a tile.
  [[nodiscard]] GemmVariant operator()(const TileQuery& q) const { return rule_(q); }
  /// The text that parse_policy() reads back into the same policy (for built-ins) or the name
  /// given to the constructor.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Whether the rule may read the norms of a TileQuery.
  [[nodiscard]] bool reads_norms() const noexcept { return reads_norms_; }

 private:
  std::string name_;
  Rule rule_;
  bool reads_norms_ = true;
};

/// Every tile uses `v`. Name "uniform:<V>".
Policy uniform_policy(GemmVariant v);

/// One step of a band policy: `variant` for the tiles at distance i - j <= `max_distance` not
/// covered by an earlier step.
struct BandStep {
  GemmVariant variant;
  std::int64_t max_distance;
};

/// Band policy (study 002 Fig. 3): tiles near the diagonal, which carry most of the weight of a
/// covariance matrix, keep a high precision; farther bands a lower one. Steps are taken in order;
/// a tile whose distance i - j exceeds every step gets `rest`. Throws InvalidInput unless the
/// distances are >= 0 and strictly increasing. Name "band:SP=2,HP1=rest".
Policy band_policy(std::vector<BandStep> steps, GemmVariant rest);

/// Adaptive policy after Higham and Mary: the lowest-precision variant p of the ladder BF16, HP1,
/// SP with ||A_ij||_F * NT / ||A||_F < tol / u_p, where u_p is the unit roundoff of p's inputs;
/// SP when none qualifies. An FP16 variant is also skipped when ||A_ij||_F > 65504, since then an
/// entry may overflow FP16 (the Frobenius norm bounds every entry). Throws InvalidInput unless
/// 0 < tol < 1. Name "adaptive:tol=<tol>".
Policy adaptive_policy(double tol);

/// Parses "uniform:<V>", "band:<V>=<d>,...,<V>=rest" or "adaptive:tol=<x>" (variant names are
/// case-insensitive). Throws InvalidInput naming the text and what was expected.
Policy parse_policy(std::string_view text);

}  // namespace halfscope::linalg
