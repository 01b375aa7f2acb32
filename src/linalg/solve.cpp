// Solves with a tile Cholesky factor (include/halfscope/linalg/solve.hpp): validation, the solve
// policy's choice per tile of L, and dispatch to the CPU substitutions (solve_cpu.cpp) or the GPU
// ones (solve_cuda.hpp). solve_right_refined is in refine.cpp.
#include "halfscope/linalg/solve.hpp"

#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/solve_cpu.hpp"
#include "linalg/solve_devices.hpp"
#include "linalg/solve_internal.hpp"

#if HALFSCOPE_WITH_CUDA
#include "linalg/solve_cuda.hpp"
#include "linalg/solve_support_cuda.hpp"
#endif

namespace halfscope::linalg {
namespace detail {

void check_factor(const TileMatrix& l, const char* function, const char* name) {
  const std::string where = std::string(function) + ": " + name;
  if (l.storage.empty())
    throw InvalidInput(where + ": expected a factored tile matrix, found an empty one");
  if (l.layout.fill() != TileFill::lower)
    throw InvalidInput(where + ": expected a lower tile layout, found a full one");
  if (l.dtype() != DType::f32)
    throw InvalidInput(where + ": expected float32 tiles, found " +
                       std::string(dtype_name(l.dtype())));
}

void check_rhs(const TileMatrix& l, const Array& b, const char* function, const char* name,
               bool allow_vector, bool any_memory) {
  const std::string where = std::string(function) + ": " + name;
  const std::int64_t n = l.layout.rows();
  const std::string expected =
      allow_vector ? "shape [" + std::to_string(n) + "] or [" + std::to_string(n) + ", r]"
                   : "shape [r, " + std::to_string(n) + "]";
  const std::string context = " (the matrix is " + std::to_string(n) + " x " + std::to_string(n) +
                              "), found " +
                              (b.empty() ? std::string("an empty array") : b.describe());
  if (b.empty()) throw InvalidInput(where + ": expected " + expected + context);
  const bool shape_ok = allow_vector
                            ? ((b.ndim() == 1 && b.dim(0) == n) || (b.ndim() == 2 && b.dim(0) == n))
                            : (b.ndim() == 2 && b.dim(1) == n);
  if (!shape_ok || b.size() == 0) throw InvalidInput(where + ": expected " + expected + context);
  if (b.dtype() != DType::f32)
    throw InvalidInput(where + ": expected float32, found " + b.describe());
  if (!b.is_c_contiguous())
    throw InvalidInput(where + ": expected a C-contiguous array, found " + b.describe());
  if (!any_memory && b.on_device() != l.storage.on_device())
    throw InvalidInput(where + ": expected " + std::string(memory_name(l.storage.memory())) +
                       " memory like the matrix, found " + b.describe());
}

std::int64_t first_non_finite(const Array& x) {
#if HALFSCOPE_WITH_CUDA
  if (x.on_device()) return first_non_finite_cuda(x.data_as<float>(), x.size());
#endif
  return first_non_finite(x.data_as<float>(), x.size());
}

std::vector<GemmVariant> factor_variants(const TileMatrix& l, const Policy& policy) {
  const std::int64_t nt = l.layout.tile_rows();
  // A rule that ignores the norms (uniform, band) is not worth a pass over L: 8.7 ms of the
  // E-ELT solves on an H200, before the first substitution can start.
  if (!policy.reads_norms())
    return solve_variants(nt, std::vector<double>(static_cast<std::size_t>(nt * nt + 1), 0.0),
                          policy);
#if HALFSCOPE_WITH_CUDA
  if (l.storage.on_device()) return solve_variants(nt, factor_norms_cuda(l), policy);
#endif
  return solve_variants(nt, factor_norms_cpu(l), policy);
}

void solve_rows(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants) {
  const std::int64_t rhs = b.size() / l.layout.rows();
  if (b.on_device()) {
#if HALFSCOPE_WITH_CUDA
    solve_right_cuda(l, b, variants);
    return;
#else
    throw Unsupported("solve_right: device memory in a build without CUDA");
#endif
  }
  solve_right_cpu(l, b.data_as<float>(), rhs, variants);
}

void transpose(const Array& in, Array& out) {
  const std::int64_t rows = in.dim(0), cols = in.dim(1);
#if HALFSCOPE_WITH_CUDA
  if (in.on_device()) {
    transpose_cuda(in.data_as<float>(), rows, cols, out.data_as<float>());
    return;
  }
#endif
  const float* src = in.data_as<float>();
  float* dst = out.data_as<float>();
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t r = 0; r < rows; ++r) dst[c * rows + r] = src[r * cols + c];
}

}  // namespace detail

namespace {

// "row 3, column 17" of the r x n row-major array for a linear index.
std::string position(std::int64_t index, std::int64_t n) {
  return "row " + std::to_string(index / n) + ", column " + std::to_string(index % n);
}

// solve_right, with `hook` run on each solved block of rows of a streamed solve.
SolveReport solve_right_hooked(const TileMatrix& l, Array& b, const SolveOptions& options,
                               const detail::RowBlockHook& hook) {
  detail::check_factor(l, "solve_right", "l");
  if (options.device_memory < 0)
    throw InvalidInput("solve_right: device_memory: expected a size in bytes >= 0, found " +
                       std::to_string(options.device_memory));
  // A host factor with one device: solved there, L streamed (b in host memory or on it).
  const bool streamed = !l.storage.on_device() && options.devices.size() == 1;
  detail::check_rhs(l, b, "solve_right", "b", false, streamed);
  const std::int64_t n = l.layout.rows();
  const auto bad_input = [&](std::int64_t bad) {
    return InvalidInput("solve_right: b: every entry must be finite, found a non-finite one at " +
                        position(bad, n));
  };
  // A finite B can still give an inf (an FP32 overflow of a nearly singular factor's solve):
  // loud, never silent.
  const auto bad_output = [&](std::int64_t bad) {
    return NumericalError("solve_right with policy " + options.policy.name() +
                          ": the solution has a non-finite entry at " + position(bad, n) +
                          " (FP32 overflow: the factor is nearly singular or badly scaled)");
  };
  // The streamed solve checks b on the device where it can (a host scan of the E-ELT's 4.5 GB
  // of right-hand sides, before and after, cost more than its GPU work).
  if (!streamed)
    if (const std::int64_t bad = detail::first_non_finite(b); bad >= 0) throw bad_input(bad);
  const std::vector<GemmVariant> variants = detail::factor_variants(l, options.policy);
  SolveReport report;
  if (streamed) {
    const auto [in, out] = detail::solve_rows_streamed(l, b, variants, options.devices.front(),
                                                       options.device_memory, report, hook);
    if (in >= 0) throw bad_input(in);
    if (out >= 0) throw bad_output(out);
  } else {
    if (options.devices.empty())
      detail::solve_rows(l, b, variants);
    else
      detail::solve_rows_devices(l, b, variants, options.devices);
    if (const std::int64_t bad = detail::first_non_finite(b); bad >= 0) throw bad_output(bad);
  }
  report.policy = options.policy.name();
  const std::int64_t nt = l.layout.tile_rows();
  for (std::int64_t j = 0; j < nt; ++j)
    for (std::int64_t i = j + 1; i < nt; ++i)
      ++report.tiles[static_cast<std::size_t>(variants[static_cast<std::size_t>(i * nt + j)])];
  return report;
}

}  // namespace

SolveReport solve_right(const TileMatrix& l, Array& b, const SolveOptions& options) {
  return solve_right_hooked(l, b, options, {});
}

SolveReport detail::solve_right_streamed_with(const TileMatrix& l, Array& b,
                                              const SolveOptions& options,
                                              const RowBlockHook& hook) {
  if (l.storage.on_device() || options.devices.size() != 1)
    throw InvalidInput(
        "solve_right: a hooked solve streams a host factor through one device: found the factor "
        "in " +
        std::string(memory_name(l.storage.memory())) + " memory and " +
        std::to_string(options.devices.size()) + " devices");
  return solve_right_hooked(l, b, options, hook);
}

CholeskyReport solve_spd(TileMatrix& a, Array& b, const CholeskyOptions& factor,
                         const SolveOptions& solve) {
  detail::check_factor(a, "solve_spd", "a");
  detail::check_rhs(a, b, "solve_spd", "b", true);
  const std::int64_t n = a.layout.rows();
  // A is symmetric, so A X = B is X^T A = B^T: solve_right's row form. A vector b is one row
  // already; an n x r b is transposed into r x n rows and back (one copy each way).
  const bool matrix = b.ndim() == 2 && b.dim(1) > 1;
  const std::int64_t r = b.ndim() == 2 ? b.dim(1) : 1;
  Array rows = matrix ? Array(DType::f32, {r, n}, b.memory()) : b.reshape({1, n});
  if (matrix) detail::transpose(b, rows);
  CholeskyReport report = cholesky_tiles(a, factor);
  solve_right(a, rows, solve);
  if (matrix) detail::transpose(rows, b);
  return report;
}

}  // namespace halfscope::linalg
