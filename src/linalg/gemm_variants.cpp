// Exact CPU emulation of the tile-Cholesky GEMM variants (src/linalg/gemm_variants.hpp).
#include "linalg/gemm_variants.hpp"

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif

namespace halfscope::linalg::detail {
namespace {

std::string tile_text(TileLabel where) {
  return "(" + std::to_string(where.ti) + ", " + std::to_string(where.tj) + ")";
}

[[noreturn]] void overflow(GemmVariant v, TileLabel where, const char* operand, float value) {
  throw NumericalError("GEMM " + std::string(gemm_variant_name(v)) + " updating tile " +
                       tile_text(where) + ": " + operand + " entry " + std::to_string(value) +
                       " does not fit the variant's format (FP16 holds |x| <= 65504); use a "
                       "higher-precision policy for this tile or --recover");
}

float round_half(float x) noexcept {
  return static_cast<float>(Half(x));
}
float round_bf16(float x) noexcept {
  return static_cast<float>(BFloat16(x));
}

// Copies an rows x cols column-major operand into a packed (ld = rows) buffer, rounded by `round`;
// a finite entry that rounds to a non-finite value is an overflow of the format.
template <typename Round>
std::vector<float> rounded_copy(const float* src, std::int64_t rows, std::int64_t cols,
                                std::int64_t ld, Round round, GemmVariant v, TileLabel where,
                                const char* operand) {
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) {
      const float x = src[i + j * ld];
      const float r = round(x);
      if (!std::isfinite(r)) overflow(v, where, operand, x);
      out[static_cast<std::size_t>(i + j * rows)] = r;
    }
  return out;
}

// C -= A B^T in FP32 arithmetic (the summation order of the BLAS, or of the loop below).
void sgemm_nt(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float* c, std::int64_t ldc) {
#if HALFSCOPE_HAS_BLAS
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), -1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 1.0f,
              c, static_cast<int>(ldc));
#else
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l) {
      const float bjl = b[j + l * ldb];
      for (std::int64_t i = 0; i < m; ++i) c[i + j * ldc] -= a[i + l * lda] * bjl;
    }
#endif
}

// DP: every product and sum in FP64 (exact products of FP32 inputs), one rounding to FP32.
void dgemm_nt_round_once(std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                         std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                         std::int64_t ldc) {
  std::vector<double> acc(static_cast<std::size_t>(m * n));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i)
      acc[static_cast<std::size_t>(i + j * m)] = static_cast<double>(c[i + j * ldc]);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l) {
      const double bjl = static_cast<double>(b[j + l * ldb]);
      double* col = acc.data() + j * m;
      for (std::int64_t i = 0; i < m; ++i) col[i] -= static_cast<double>(a[i + l * lda]) * bjl;
    }
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i)
      c[i + j * ldc] = static_cast<float>(acc[static_cast<std::size_t>(i + j * m)]);
}

// HP3: C, A, B in FP16 and c = c - a * b with the product and the difference each rounded to
// FP16, as an FP16-compute GEMM (alpha = -1, beta = 1) does. An overflow anywhere leaves a
// non-finite value in the chain (inf stays inf or becomes NaN), so checking the end suffices.
void hgemm_nt_all_half(std::int64_t m, std::int64_t n, std::int64_t k, const float* a16,
                       const float* b16, float* c, std::int64_t ldc, TileLabel where) {
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      const float c0 = c[i + j * ldc];
      Half acc(c0);
      if (!std::isfinite(static_cast<float>(acc))) overflow(GemmVariant::HP3, where, "C", c0);
      for (std::int64_t l = 0; l < k; ++l) acc = acc - Half(a16[i + l * m]) * Half(b16[j + l * n]);
      const float r = static_cast<float>(acc);
      if (!std::isfinite(r))
        throw NumericalError("GEMM HP3 updating tile " + tile_text(where) +
                             ": an FP16 product or partial sum overflowed (|x| > 65504) at "
                             "element (" +
                             std::to_string(i) + ", " + std::to_string(j) +
                             "); use a higher-precision policy for this tile or --recover");
      c[i + j * ldc] = r;
    }
}

}  // namespace

float round_to_tf32(float x) noexcept {
  if (!std::isfinite(x)) return x;
  // Round to nearest even on the 13 dropped mantissa bits; a carry into the exponent is the
  // correct rounding up (and gives inf past the largest TF32 value).
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  return std::bit_cast<float>(rounded);
}

void gemm_nt_update(GemmVariant variant, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                    std::int64_t ldc, TileLabel where) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  switch (variant) {
    case GemmVariant::DP:
      dgemm_nt_round_once(m, n, k, a, lda, b, ldb, c, ldc);
      return;
    case GemmVariant::SP:
      sgemm_nt(m, n, k, a, lda, b, ldb, c, ldc);
      return;
    case GemmVariant::TF32:
    case GemmVariant::HP1:
    case GemmVariant::BF16: {
      float (*round)(float) = variant == GemmVariant::TF32  ? round_to_tf32
                              : variant == GemmVariant::HP1 ? round_half
                                                            : round_bf16;
      const std::vector<float> ar = rounded_copy(a, m, k, lda, round, variant, where, "A");
      const std::vector<float> br = rounded_copy(b, n, k, ldb, round, variant, where, "B");
      sgemm_nt(m, n, k, ar.data(), m, br.data(), n, c, ldc);
      return;
    }
    case GemmVariant::HP2: {
      const std::vector<float> ar = rounded_copy(a, m, k, lda, round_half, variant, where, "A");
      const std::vector<float> br = rounded_copy(b, n, k, ldb, round_half, variant, where, "B");
      std::vector<float> cr = rounded_copy(c, m, n, ldc, round_half, variant, where, "C");
      sgemm_nt(m, n, k, ar.data(), m, br.data(), n, cr.data(), m);
      // Check every result before writing any, so a failed update leaves C as it was.
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i) {
          float& x = cr[static_cast<std::size_t>(i + j * m)];
          const float r = round_half(x);
          if (!std::isfinite(r)) overflow(variant, where, "result", x);
          x = r;
        }
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          c[i + j * ldc] = cr[static_cast<std::size_t>(i + j * m)];
      return;
    }
    case GemmVariant::HP3: {
      const std::vector<float> ar = rounded_copy(a, m, k, lda, round_half, variant, where, "A");
      const std::vector<float> br = rounded_copy(b, n, k, ldb, round_half, variant, where, "B");
      // Work on a copy so that an overflow part-way leaves C untouched.
      std::vector<float> cr(static_cast<std::size_t>(m * n));
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          cr[static_cast<std::size_t>(i + j * m)] = c[i + j * ldc];
      hgemm_nt_all_half(m, n, k, ar.data(), br.data(), cr.data(), m, where);
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          c[i + j * ldc] = cr[static_cast<std::size_t>(i + j * m)];
      return;
    }
  }
}

}  // namespace halfscope::linalg::detail
