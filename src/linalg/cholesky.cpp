// Tile Cholesky: validation, the policy's choice per tile, --recover and the dispatch to the CPU
// (cholesky_cpu.cpp) or GPU (cholesky_cuda.cu) factorization (include/halfscope/linalg/
// cholesky.hpp). The norms and the choice per tile are in tile_norms.cpp.
#include "halfscope/linalg/cholesky.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/cholesky_cpu.hpp"
#include "linalg/scaling.hpp"
#include "linalg/tile_norms.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "linalg/cholesky_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace {

// One precision up, or the same variant when there is nothing higher to try.
GemmVariant promote(GemmVariant v) {
  switch (v) {
    case GemmVariant::HP3:
      return GemmVariant::HP2;
    case GemmVariant::HP2:
      return GemmVariant::HP1;
    case GemmVariant::HP1:
    case GemmVariant::TF32:
    case GemmVariant::BF16:
      return GemmVariant::SP;
    case GemmVariant::SP:
    case GemmVariant::DP:
      return v;
  }
  return v;
}

// Promotes the tiles of the failing region and describes the change; false when none could be
// promoted. A failed pivot at (k, k) depends on every tile (i, j) with j < i <= k (its
// dependency cone); an overflow in the GEMM updating (i, j) on that tile's variant alone.
bool promote_region(std::vector<GemmVariant>& variants, std::int64_t nt, std::int64_t fi,
                    std::int64_t fj, std::string& change) {
  std::map<std::string, std::int64_t> moves;
  const bool pivot = fi == fj;
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i) {
      const bool in_region = pivot ? i <= fi : (i == fi && j == fj);
      if (!in_region) continue;
      GemmVariant& v = variants[static_cast<std::size_t>(i * nt + j)];
      const GemmVariant up = promote(v);
      if (up == v) continue;
      ++moves[std::string(gemm_variant_name(v)) + "->" + std::string(gemm_variant_name(up))];
      v = up;
    }
  if (moves.empty()) return false;
  change = pivot ? "promoted the tiles (i, j), j < i <= " + std::to_string(fi) + ":"
                 : "promoted tile (" + std::to_string(fi) + ", " + std::to_string(fj) + "):";
  for (const auto& [move, count] : moves) change += " " + move + " x" + std::to_string(count);
  return true;
}

#if HALFSCOPE_WITH_CUDA
// The device budget of an out-of-core factorization, or 0 when the matrix is factored in core:
// on the device (in place, or a device of the list), or on the host with a layout that fits
// every listed device. A host matrix too large for several devices is refused: the out-of-core
// factorization runs on one.
std::int64_t out_of_core_budget(const TileMatrix& a, const std::vector<GemmVariant>& variants,
                                const CholeskyOptions& options) {
  if (a.storage.on_device()) return 0;
  const std::int64_t need = detail::in_core_device_bytes(
      a.layout, variants, static_cast<std::int64_t>(options.devices.size()));
  for (const int d : options.devices) {
    const std::int64_t budget = detail::device_budget(d, options.device_memory);
    if (need <= budget) continue;
    if (options.devices.size() == 1) return budget;
    throw Unsupported("cholesky_tiles: over " + std::to_string(options.devices.size()) +
                      " devices every device holds the whole layout and scratch, " +
                      std::to_string(need) + " bytes, but device " + std::to_string(d) +
                      " may use " + std::to_string(budget) +
                      " (device_memory, or its free memory): list one device to factor out of "
                      "core, or give more device memory");
  }
  return 0;
}

// Bytes the several-device factorization moved (cholesky_devices_cuda.cu), counted once it
// finished: each column goes from its owner to every other device; a host matrix goes in and the
// factor comes back; device storage on a listed device is factored in place there and the other
// devices get their own columns from it; on a device that is not listed, it goes in and back.
void add_device_traffic(const TileMatrix& a, const std::vector<int>& devices,
                        CholeskyReport& report) {
  const TileLayout& l = a.layout;
  const std::int64_t bytes = l.element_count() * 4, nt = l.tile_cols();
  const auto g = static_cast<std::int64_t>(std::min<std::size_t>(devices.size(), nt));
  report.device_to_device_bytes += (g - 1) * bytes;
  if (!a.storage.on_device()) {
    report.host_to_device_bytes += bytes;
    report.device_to_host_bytes += bytes;
    return;
  }
  const auto home = static_cast<std::int64_t>(
      std::find(devices.begin(), devices.begin() + g, cuda::device_of(a.storage.data())) -
      devices.begin());
  if (home == g) {
    report.device_to_device_bytes += 2 * bytes;
    return;
  }
  for (std::int64_t j = 0; j < nt; ++j) {
    const std::int64_t end = j + 1 < nt ? l.tile_offset(j + 1, j + 1) : l.element_count();
    if (j % g != home) report.device_to_device_bytes += (end - l.tile_offset(j, j)) * 4;
  }
}
#endif

}  // namespace

// Promotes, in one retry, what the failure says cannot work at any lower level: every GEMM reading
// operand tile L(oi, ok) in FP16 goes to SP (the tiles (oi, j), ok < j < oi, read it as A; the
// tiles (i, oi), i > oi, as B), since HP3 -> HP2 -> HP1 all keep FP16 operands; a C entry that
// does not fit FP16 moves its tile straight to HP1 (C in FP32). Other failures: promote_region.
bool detail::promote_failure(std::vector<GemmVariant>& variants, std::int64_t nt,
                             const detail::FailedTile& f, std::string& change) {
  const auto half = gemm_variant_uses_fp16;
  std::map<std::string, std::int64_t> moves;
  auto move = [&](std::int64_t i, std::int64_t j, GemmVariant to) {
    GemmVariant& v = variants[static_cast<std::size_t>(i * nt + j)];
    ++moves[std::string(gemm_variant_name(v)) + "->" + std::string(gemm_variant_name(to))];
    v = to;
  };
  if (f.part == detail::FailedPart::operand) {
    for (std::int64_t j = f.ok + 1; j < f.oi; ++j)
      if (half(variants[static_cast<std::size_t>(f.oi * nt + j)])) move(f.oi, j, GemmVariant::SP);
    for (std::int64_t i = f.oi + 1; i < nt; ++i)
      if (half(variants[static_cast<std::size_t>(i * nt + f.oi)])) move(i, f.oi, GemmVariant::SP);
    if (moves.empty()) return false;
    change = "promoted the FP16 consumers of operand tile L" + detail::tile_text(f.oi, f.ok) + ":";
  } else if (f.part == detail::FailedPart::c_entry &&
             (variants[static_cast<std::size_t>(f.i * nt + f.j)] == GemmVariant::HP2 ||
              variants[static_cast<std::size_t>(f.i * nt + f.j)] == GemmVariant::HP3)) {
    move(f.i, f.j, GemmVariant::HP1);
    change = "promoted tile " + detail::tile_text(f.i, f.j) + " (C entry beyond FP16):";
  } else {
    return promote_region(variants, nt, f.i, f.j, change);
  }
  for (const auto& [m, count] : moves) change += " " + m + " x" + std::to_string(count);
  return true;
}

CholeskyReport cholesky_tiles(TileMatrix& a, const CholeskyOptions& options) {
  if (a.layout.fill() != TileFill::lower)
    throw InvalidInput("cholesky_tiles: the matrix must use a lower tile layout, found a full one");
  if (a.dtype() != DType::f32)
    throw InvalidInput("cholesky_tiles: the matrix must be float32, found " +
                       std::string(dtype_name(a.dtype())));
  if (options.device_memory < 0)
    throw InvalidInput(
        "cholesky_tiles: device_memory must be >= 0 bytes (0: the free memory), found " +
        std::to_string(options.device_memory));
  if (options.device_memory > 0 && options.devices.empty())
    throw InvalidInput(
        "cholesky_tiles: device_memory applies to the listed devices, but no devices "
        "were given");

#if !HALFSCOPE_WITH_CUDA
  if (a.storage.on_device())
    throw Unsupported("cholesky_tiles: device memory in a build without CUDA");
  if (!options.devices.empty())
    throw Unsupported("cholesky_tiles: devices were given but halfscope was built without CUDA");
#else
  if (!options.devices.empty()) {
    int count = 0;
    HS_CUDA_CHECK(cudaGetDeviceCount(&count));
    for (const int d : options.devices)
      if (d < 0 || d >= count)
        throw InvalidInput("cholesky_tiles: devices: CUDA device " + std::to_string(d) +
                           " does not exist (this host has " + std::to_string(count) + ")");
  }
#endif

  CholeskyReport report;
  report.policy = options.policy.name();
  const std::int64_t nt = a.layout.tile_rows();
  // Before any result is written: a NaN/Inf in A would otherwise flow into L unnoticed on the GPU.
  // The tile columns from `first_column` on (those before: checked elsewhere, out of core).
  [[maybe_unused]] const auto check_input = [&a](std::int64_t first_column) {
    detail::require_finite(a, detail::tile_norms(a, first_column), "cholesky_tiles: the matrix");
  };
  // A policy that ignores the norms tells its variants at once (Policy::reads_norms).
  std::vector<GemmVariant> variants;
  if (!options.policy.reads_norms())
    variants = detail::choose_variants(
        a.layout, std::vector<double>(static_cast<std::size_t>(nt * nt), 0.0), options.policy);
  // Out of core with a policy that ignores the norms, the checks (they read the whole host
  // matrix: 0.3 s for 20 GB) run beside the first slab, whose columns go back only after they
  // passed; everywhere else they come first.
  // The out-of-core budget is decided once (free memory may change between two queries, and the
  // checks' place depends on it); 0: in core.
  bool checks_beside = false;
  [[maybe_unused]] std::int64_t ooc_budget = 0;
#if HALFSCOPE_WITH_CUDA
  if (!options.policy.reads_norms() && options.devices.size() == 1 && !a.storage.on_device()) {
    ooc_budget = out_of_core_budget(a, variants, options);
    checks_beside = ooc_budget > 0;
  }
#endif
  // FP16 variants on a matrix far from 1: factor 4^-k A (exact) and scale L back (scaling.hpp).
  // k_fp16 is the k should the variants round to FP16; the largest entry bounds the scaled matrix
  // from above: from the tile norms, or one host pass (scaling up out of core only).
  // (SP alone reads no diagonal.)
  const bool may_scale =
      options.scale && (options.policy.reads_norms() || detail::rounds_to_fp16(variants));
  const double d = may_scale ? detail::max_diagonal(a) : 0.0;
  int k_fp16 = 0;
  if (checks_beside) {
    const bool up = d > 0.0 && d < std::ldexp(1.0, detail::kUnscaledLow);
    k_fp16 = detail::fp16_scaling_exponent(d, up ? detail::max_abs_lower(a) : 0.0);
  } else {
    std::vector<double> norms = detail::tile_norms(a);
    detail::require_finite(a, norms, "cholesky_tiles: the matrix");
    k_fp16 = detail::fp16_scaling_exponent(d, *std::max_element(norms.begin(), norms.end()));
    // The policy sees the norms of the matrix as its FP16 variants would factor it (adaptive's
    // FP16 overflow guard then judges the scaled tiles); exact, powers of two.
    for (double& x : norms) x = std::ldexp(x, -2 * k_fp16);
    if (options.policy.reads_norms()) variants = detail::choose_variants(a, norms, options.policy);
#if HALFSCOPE_WITH_CUDA
    if (!options.devices.empty()) ooc_budget = out_of_core_budget(a, variants, options);
#endif
  }
  const int k = detail::rounds_to_fp16(variants) ? k_fp16 : 0;
  // A rejected input is left as it came: checked before it is scaled.
  if (k != 0 && checks_beside) {
    check_input(0);
    checks_beside = false;
  }
  detail::scale_lower(a, -2 * k);
  report.scaling_exponent = k;
  // The input, kept (in the matrix's own memory) only when a retry may need it.
  const Array original = options.recover ? a.storage.clone() : Array{};
  const std::int64_t bytes = a.layout.element_count() * static_cast<std::int64_t>(sizeof(float));
  if (options.recover) report.workspace_bytes = bytes;
  [[maybe_unused]] const std::int64_t kept = report.workspace_bytes;  // used by the GPU path
  detail::FailedTile failed;
  // Every failure's message names the policy, and with it the scaling.
  const std::string policy_text = detail::scaled_policy_text(report.policy, k);
  try {
    for (;;) {
      try {
        if (!options.devices.empty()) {
#if HALFSCOPE_WITH_CUDA
          if (ooc_budget > 0) {
            // The checks run once: a retry starts from the checked input.
            const detail::OutOfCore o = detail::cholesky_cuda_out_of_core(
                a, variants, policy_text, &failed, options.devices.front(), ooc_budget,
                checks_beside && report.attempts == 1
                    ? std::function<void(std::int64_t)>(check_input)
                    : std::function<void(std::int64_t)>());
            report.workspace_bytes = kept + o.workspace;
            report.out_of_core_slabs = o.slabs;
            report.host_to_device_bytes = o.host_to_device;
            report.device_to_host_bytes = o.device_to_host;
          } else {
            report.workspace_bytes = kept + detail::cholesky_cuda_devices(a, variants, policy_text,
                                                                          &failed, options.devices);
            report.host_to_device_bytes = report.device_to_host_bytes = 0;  // this attempt's
            report.device_to_device_bytes = 0;
            add_device_traffic(a, options.devices, report);
          }
#endif
        } else if (a.storage.on_device()) {
#if HALFSCOPE_WITH_CUDA
          report.workspace_bytes = kept + detail::cholesky_cuda(a, variants, policy_text, &failed);
#endif
        } else {
          detail::cholesky_cpu(a, variants, policy_text, &failed);
        }
        // A finite A can still give a non-finite L (an FP32 overflow in SP / SYRK, a NaN pivot the
        // solver does not report); any such entry reaches a diagonal tile through its SYRK.
        const std::int64_t bad = detail::first_non_finite_diagonal(a);
        if (bad >= 0) {
          failed = detail::FailedTile{bad, bad};
          throw NumericalError("Cholesky with policy " + policy_text + ": diagonal tile (" +
                               std::to_string(bad) + ", " + std::to_string(bad) +
                               ") of the factor holds a non-finite entry (an FP32 overflow)");
        }
        break;
      } catch (const NumericalError& e) {
        if (!options.recover) throw;
        // POTRF failures come from (k, k), GEMM overflows from the updated tile (i > j); when the
        // region has nothing left to promote the failure is the matrix's, not the precision's.
        std::string change;
        if (failed.i < failed.j || !detail::promote_failure(variants, nt, failed, change)) throw;
        report.recoveries.push_back("attempt " + std::to_string(report.attempts) + " failed (" +
                                    e.what() + "); " + change);
        ++report.attempts;
        copy_bytes(a.storage.data(), a.storage.memory(), original.data(), original.memory(), bytes);
      }
    }
  } catch (const InvalidInput&) {
    detail::scale_lower(a, 2 * k);  // raised before any work (the out-of-core budget): restored
    throw;
  }
  detail::scale_lower(a, k);
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  return report;
}

}  // namespace halfscope::linalg
