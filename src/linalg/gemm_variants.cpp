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
  return std::string(where.subject) + " (" + std::to_string(where.ti) + ", " +
         std::to_string(where.tj) + ")";
}

std::string hint(TileLabel where) {
  return where.recoverable ? "use a higher-precision policy for this tile or --recover"
                           : "use a higher-precision policy for this tile";
}

[[noreturn]] void overflow(GemmVariant v, TileLabel where, const char* operand, float value) {
  throw NumericalError("GEMM " + std::string(gemm_variant_name(v)) + " " + tile_text(where) + ": " +
                       operand + " entry " + std::to_string(value) +
                       " does not fit the variant's format (FP16 holds |x| <= 65504); " +
                       hint(where));
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

// An operand as stored: its pointer, leading dimension and whether it is used transposed.
// element(i, l) is entry (i, l) of op(X).
struct Operand {
  const float* p;
  std::int64_t ld;
  Op op;
  [[nodiscard]] float element(std::int64_t i, std::int64_t l) const {
    return op == Op::N ? p[i + l * ld] : p[l + i * ld];
  }
};

// C -= op(A) op(B) in FP32 arithmetic (the summation order of the BLAS, or of the loop below).
void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, Operand a, Operand b, float* c,
           std::int64_t ldc) {
#if HALFSCOPE_HAS_BLAS
  cblas_sgemm(CblasColMajor, a.op == Op::N ? CblasNoTrans : CblasTrans,
              b.op == Op::N ? CblasNoTrans : CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), -1.0f, a.p, static_cast<int>(a.ld), b.p, static_cast<int>(b.ld),
              1.0f, c, static_cast<int>(ldc));
#else
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l) {
      const float blj = b.element(l, j);
      for (std::int64_t i = 0; i < m; ++i) c[i + j * ldc] -= a.element(i, l) * blj;
    }
#endif
}

// DP: every product and sum in FP64 (exact products of FP32 inputs), one rounding to FP32.
void dgemm_round_once(std::int64_t m, std::int64_t n, std::int64_t k, Operand a, Operand b,
                      float* c, std::int64_t ldc) {
  std::vector<double> acc(static_cast<std::size_t>(m * n));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i)
      acc[static_cast<std::size_t>(i + j * m)] = static_cast<double>(c[i + j * ldc]);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l) {
      const double blj = static_cast<double>(b.element(l, j));
      double* col = acc.data() + j * m;
      for (std::int64_t i = 0; i < m; ++i) col[i] -= static_cast<double>(a.element(i, l)) * blj;
    }
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i)
      c[i + j * ldc] = static_cast<float>(acc[static_cast<std::size_t>(i + j * m)]);
}

// HP3: C, A, B in FP16 and c = c - a * b with the product and the difference each rounded to
// FP16, as an FP16-compute GEMM (alpha = -1, beta = 1) does. An overflow anywhere leaves a
// non-finite value in the chain (inf stays inf or becomes NaN), so checking the end suffices.
// a16, b16 are the rounded operands as stored (packed, ld = their row count).
void hgemm_all_half(std::int64_t m, std::int64_t n, std::int64_t k, Operand a16, Operand b16,
                    float* c, std::int64_t ldc, TileLabel where) {
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      const float c0 = c[i + j * ldc];
      Half acc(c0);
      if (!std::isfinite(static_cast<float>(acc))) overflow(GemmVariant::HP3, where, "C", c0);
      for (std::int64_t l = 0; l < k; ++l)
        acc = acc - Half(a16.element(i, l)) * Half(b16.element(l, j));
      const float r = static_cast<float>(acc);
      if (!std::isfinite(r))
        throw NumericalError("GEMM HP3 " + tile_text(where) +
                             ": an FP16 product or partial sum overflowed (|x| > 65504) at "
                             "element (" +
                             std::to_string(i) + ", " + std::to_string(j) + "); " + hint(where));
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
  gemm_update(variant, Op::N, Op::T, m, n, k, a, lda, b, ldb, c, ldc, where);
}

void gemm_update(GemmVariant variant, Op op_a, Op op_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float* c, std::int64_t ldc, TileLabel where) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  // Stored shapes of the operands: the rounded copies keep them (packed), so the transposes
  // apply to the copies as to the originals.
  const std::int64_t a_rows = op_a == Op::N ? m : k, a_cols = op_a == Op::N ? k : m;
  const std::int64_t b_rows = op_b == Op::N ? k : n, b_cols = op_b == Op::N ? n : k;
  const Operand a_in{a, lda, op_a}, b_in{b, ldb, op_b};
  switch (variant) {
    case GemmVariant::DP:
      dgemm_round_once(m, n, k, a_in, b_in, c, ldc);
      return;
    case GemmVariant::SP:
      sgemm(m, n, k, a_in, b_in, c, ldc);
      return;
    case GemmVariant::TF32:
    case GemmVariant::HP1:
    case GemmVariant::BF16: {
      float (*round)(float) = variant == GemmVariant::TF32  ? round_to_tf32
                              : variant == GemmVariant::HP1 ? round_half
                                                            : round_bf16;
      const std::vector<float> ar =
          rounded_copy(a, a_rows, a_cols, lda, round, variant, where, "A");
      const std::vector<float> br =
          rounded_copy(b, b_rows, b_cols, ldb, round, variant, where, "B");
      sgemm(m, n, k, {ar.data(), a_rows, op_a}, {br.data(), b_rows, op_b}, c, ldc);
      return;
    }
    case GemmVariant::HP2: {
      const std::vector<float> ar =
          rounded_copy(a, a_rows, a_cols, lda, round_half, variant, where, "A");
      const std::vector<float> br =
          rounded_copy(b, b_rows, b_cols, ldb, round_half, variant, where, "B");
      std::vector<float> cr = rounded_copy(c, m, n, ldc, round_half, variant, where, "C");
      sgemm(m, n, k, {ar.data(), a_rows, op_a}, {br.data(), b_rows, op_b}, cr.data(), m);
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
      const std::vector<float> ar =
          rounded_copy(a, a_rows, a_cols, lda, round_half, variant, where, "A");
      const std::vector<float> br =
          rounded_copy(b, b_rows, b_cols, ldb, round_half, variant, where, "B");
      // Work on a copy so that an overflow part-way leaves C untouched.
      std::vector<float> cr(static_cast<std::size_t>(m * n));
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          cr[static_cast<std::size_t>(i + j * m)] = c[i + j * ldc];
      hgemm_all_half(m, n, k, {ar.data(), a_rows, op_a}, {br.data(), b_rows, op_b}, cr.data(), m,
                     where);
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          c[i + j * ldc] = cr[static_cast<std::size_t>(i + j * m)];
      return;
    }
  }
}

}  // namespace halfscope::linalg::detail
