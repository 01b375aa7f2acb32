// Power-of-two scaling before a tile Cholesky with FP16 variants (src/linalg/scaling.hpp); the
// device loops are in scaling_cuda.cu.
#include "linalg/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "linalg/scaling_cuda.hpp"
#endif

namespace halfscope::linalg::detail {
namespace {

// The tile columns' pieces for the loops below: where tile column j starts (its diagonal tile),
// its width and where it ends, in elements.
struct Columns {
  std::vector<std::int64_t> start, width, end;
};

Columns columns(const TileLayout& l) {
  Columns c;
  const std::int64_t nt = l.tile_cols();
  for (std::int64_t j = 0; j < nt; ++j) {
    c.start.push_back(l.tile_offset(j, j));
    c.width.push_back(l.tile_width(j));
    c.end.push_back(j + 1 < nt ? l.tile_offset(j + 1, j + 1) : l.element_count());
  }
  return c;
}

}  // namespace

bool rounds_to_fp16(const std::vector<GemmVariant>& variants) {
  return std::any_of(variants.begin(), variants.end(), gemm_variant_uses_fp16);
}

int fp16_scaling_exponent(double max_diagonal, double max_entry) {
  if (!(max_diagonal > 0.0) || !std::isfinite(max_diagonal)) return 0;
  if (max_diagonal >= std::ldexp(1.0, kUnscaledLow) &&
      max_diagonal <= std::ldexp(1.0, kUnscaledHigh))
    return 0;
  int e = 0;
  (void)std::frexp(max_diagonal, &e);  // d = m 2^e, m in [0.5, 1): 4^-k d in [1, 4) for k below
  const int k = std::clamp((e - 1) >> 1, -63, 63);
  // Scaling up (k < 0) must leave every entry finite in FP32.
  if (k < 0 &&
      !(std::ldexp(max_entry, -2 * k) < static_cast<double>(std::numeric_limits<float>::max())))
    return 0;
  return k;
}

std::string scaled_policy_text(const std::string& policy, int k) {
  return k == 0 ? policy : policy + " on A scaled by 2^" + std::to_string(-2 * k);
}

double tile_diagonal_max(const float* tile, std::int64_t h) {
  double d = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < h; ++i)
    if (tile[i * (h + 1)] > d) d = tile[i * (h + 1)];  // false for NaN
  return d;
}

double max_diagonal(const TileMatrix& a) {
  const TileLayout& l = a.layout;
  const std::int64_t nt = l.tile_rows();
  if (a.storage.on_device()) {
#if HALFSCOPE_WITH_CUDA
    const Columns c = columns(l);
    return max_diagonal_cuda(a.storage.data_as<float>(), c.start, c.width);
#else
    throw Unsupported("max_diagonal: device memory in a build without CUDA");
#endif
  }
  double d = -std::numeric_limits<double>::infinity();
  for (std::int64_t t = 0; t < nt; ++t)
    d = std::max(
        d, tile_diagonal_max(a.storage.data_as<float>() + l.tile_offset(t, t), l.tile_height(t)));
  return d;
}

double max_abs_lower(const TileMatrix& a) {
  const Columns c = columns(a.layout);
  const float* base = a.storage.data_as<float>();
  double m = 0.0;
  const auto nt = static_cast<std::int64_t>(c.start.size());
#pragma omp parallel for schedule(dynamic) reduction(max : m)
  for (std::int64_t j = 0; j < nt; ++j) {
    const std::int64_t w = c.width[static_cast<std::size_t>(j)];
    const std::int64_t start = c.start[static_cast<std::size_t>(j)];
    const std::int64_t end = c.end[static_cast<std::size_t>(j)];
    float x = 0.0f;
    for (std::int64_t col = 0; col < w; ++col)  // the diagonal tile's lower triangle
      for (std::int64_t row = col; row < w; ++row)
        x = std::max(x, std::fabs(base[start + row + col * w]));
    for (std::int64_t e = start + w * w; e < end; ++e) x = std::max(x, std::fabs(base[e]));
    m = std::max(m, static_cast<double>(x));
  }
  return m;
}

void scale_lower_tile(float* tile, std::int64_t h, std::int64_t w, bool diagonal, int e) {
  // 2^e as a float multiplier: one rounding, as ldexp, and exact for normal results (|e| <= 126).
  const float f = std::ldexp(1.0f, e);
  for (std::int64_t col = 0; col < w; ++col)
    for (std::int64_t row = diagonal ? col : 0; row < h; ++row) tile[row + col * h] *= f;
}

void scale_lower(TileMatrix& a, int e) {
  if (e == 0) return;
  const Columns c = columns(a.layout);
  float* base = a.storage.data_as<float>();
  if (a.storage.on_device()) {
#if HALFSCOPE_WITH_CUDA
    scale_lower_cuda(base, c.start, c.width, c.end, e);
    return;
#else
    throw Unsupported("scale_lower: device memory in a build without CUDA");
#endif
  }
  const float f = std::ldexp(1.0f, e);
  const auto nt = static_cast<std::int64_t>(c.start.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t j = 0; j < nt; ++j) {
    const std::int64_t w = c.width[static_cast<std::size_t>(j)];
    const std::int64_t start = c.start[static_cast<std::size_t>(j)];
    scale_lower_tile(base + start, w, w, true, e);
    for (std::int64_t x = start + w * w; x < c.end[static_cast<std::size_t>(j)]; ++x) base[x] *= f;
  }
}

}  // namespace halfscope::linalg::detail
