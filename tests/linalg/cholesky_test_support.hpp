// Helpers of the GPU Cholesky tests that compare one factorization with another
// (gpu_cholesky.cpp, gpu_cholesky_devices.cpp, gpu_cholesky_out_of_core.cpp,
// tests/mpi/test_cholesky_gpu.cpp): a factor as a dense FP64 lower triangle, its backward error
// with the bound of those files' headers, relative differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/linalg/cholesky.hpp"
#include "solve_test_support.hpp"

namespace halfscope::linalg::test {

struct Factored {
  std::vector<double> l;  // dense lower factor, row-major
  CholeskyReport report;
};

// The lower triangle of a factored tile matrix, dense row-major FP64 (zeros above).
inline std::vector<double> lower_of(const TileMatrix& t) {
  const std::int64_t n = t.layout.rows();
  const Array d = t.to_dense();
  std::vector<double> l(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      l[static_cast<std::size_t>(i * n + j)] = d.data_as<float>()[i * n + j];
  return l;
}

inline Factored factor(const std::vector<double>& a, std::int64_t n, std::int64_t nb,
                       const CholeskyOptions& opts, Memory memory) {
  TileMatrix t = test::tiled(a, n, nb, memory);
  Factored f;
  f.report = cholesky_tiles(t, opts);
  f.l = lower_of(t);
  return f;
}

// ||L L^T - A||_F / ||A||_F with A the FP32-rounded input, and the bound of the header.
inline std::pair<double, double> backward(const Factored& f, const std::vector<double>& dense,
                                          std::int64_t n) {
  double num = 0, den = 0, trace = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    trace += static_cast<float>(dense[static_cast<std::size_t>(i * n + i)]);
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p <= std::min(i, j); ++p)
        s += f.l[static_cast<std::size_t>(i * n + p)] * f.l[static_cast<std::size_t>(j * n + p)];
      const double aij = static_cast<float>(dense[static_cast<std::size_t>(i * n + j)]);
      num += (s - aij) * (s - aij);
      den += aij * aij;
    }
  }
  double used = 0;
  for (const GemmVariant v : all_gemm_variants())
    if (f.report.count(v) > 0) used = std::max(used, test::variant_term(v, n));
  return {std::sqrt(num / den),
          (test::gamma(n + 1, std::ldexp(1.0, -24)) + used) * trace / std::sqrt(den)};
}

// A factorization's input (as stored before) and result, for comparisons entry by entry.
struct Factoring {
  Array before, after;  // host copies of the storage
  CholeskyReport report;
};

inline Factoring factoring(const std::vector<double>& a, std::int64_t n, std::int64_t nb,
                           const CholeskyOptions& opts, Memory memory = Memory::host) {
  TileMatrix t = test::tiled(a, n, nb, memory);
  Factoring f{t.storage.to(Memory::host), {}, {}};
  f.report = cholesky_tiles(t, opts);
  f.after = t.storage.to(Memory::host);
  return f;
}

// Stored entries of `got` that differ from 2^e times `want`'s factor on and below the diagonal,
// or, with `upper_kept`, from got's own input in the strict upper halves of the diagonal tiles
// (the CPU leaves them; the GPU paths use some as scratch): the factor of 4^e A0 against that of
// A0 when the scaling is exact. `first` describes the first.
inline std::int64_t scaled_copy_mismatches(const TileLayout& l, const Factoring& got,
                                           const Factoring& want, int e, bool upper_kept,
                                           std::string* first = nullptr) {
  std::int64_t bad = 0;
  for (std::int64_t j = 0; j < l.tile_cols(); ++j)
    for (std::int64_t i = j; i < l.tile_rows(); ++i) {
      const std::int64_t off = l.tile_offset(i, j), h = l.tile_height(i);
      for (std::int64_t c = 0; c < l.tile_width(j); ++c)
        for (std::int64_t r = 0; r < h; ++r) {
          const std::int64_t x = off + r + c * h;
          const bool upper = i == j && r < c;
          if (upper && !upper_kept) continue;
          const float w = upper ? got.before.data_as<float>()[x]
                                : std::ldexp(want.after.data_as<float>()[x], e);
          const float g = got.after.data_as<float>()[x];
          if (g == w) continue;
          if (bad++ == 0 && first)
            *first = "tile (" + std::to_string(i) + ", " + std::to_string(j) + ") entry (" +
                     std::to_string(r) + ", " + std::to_string(c) + (upper ? ", upper" : "") +
                     "): " + std::to_string(g) + " vs " + std::to_string(w) + " (unscaled want " +
                     std::to_string(want.after.data_as<float>()[x]) + ", input " +
                     std::to_string(got.before.data_as<float>()[x]) + ")";
        }
    }
  return bad;
}

inline double rel_diff(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    num += (x[k] - ref[k]) * (x[k] - ref[k]);
    den += ref[k] * ref[k];
  }
  return std::sqrt(num / den);
}

}  // namespace halfscope::linalg::test
