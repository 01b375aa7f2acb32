// CPU tile Cholesky as an OpenMP task graph (src/linalg/cholesky_cpu.hpp).
//
// Right-looking Algorithm 1 of study 002: step k factors diagonal tile (k, k) (POTRF), solves the
// tiles below it (TRSM), and updates the trailing matrix: SYRK on the diagonal tiles, GEMM on the
// others. Every kernel is a task whose depend clauses name the tiles it reads and writes, so
// step k + 1's panel starts as soon as its own tiles are updated (look-ahead), with no barrier
// between steps. A failing task records the first exception and every later task returns at
// once; the exception is rethrown after the task graph drains.
#include "linalg/cholesky_cpu.hpp"

#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"
#include "linalg/gemm_variants.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif
#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::linalg::detail {

std::string tile_text(std::int64_t ti, std::int64_t tj) {
  // Appended piecewise: GCC 12's -Wrestrict misfires on "(" + std::to_string(...) here.
  std::string text("(");
  text += std::to_string(ti);
  text += ", ";
  text += std::to_string(tj);
  text += ")";
  return text;
}

NotPositiveDefinite pivot_failure(const std::string& policy, std::int64_t k, std::int64_t nb,
                                  std::int64_t info) {
  return NotPositiveDefinite("Cholesky with policy " + policy + ": tile " + tile_text(k, k) +
                             " is not positive definite: leading minor of order " +
                             std::to_string(k * nb + info) + " (global pivot index " +
                             std::to_string(k * nb + info - 1) + ", 0-based)");
}
// Lower Cholesky of an n x n column-major FP32 tile; returns LAPACK's info (0, or the order of
// the first leading minor that is not positive definite).
std::int64_t potrf_lower(std::int64_t n, float* a, std::int64_t lda) {
#if HALFSCOPE_HAS_LAPACKE
  return LAPACKE_spotrf(LAPACK_COL_MAJOR, 'L', static_cast<lapack_int>(n), a,
                        static_cast<lapack_int>(lda));
#else
  for (std::int64_t j = 0; j < n; ++j) {
    float d = a[j + j * lda];
    for (std::int64_t l = 0; l < j; ++l) d -= a[j + l * lda] * a[j + l * lda];
    if (!(d > 0.0f)) return j + 1;  // also catches NaN
    d = std::sqrt(d);
    a[j + j * lda] = d;
    for (std::int64_t i = j + 1; i < n; ++i) {
      float s = a[i + j * lda];
      for (std::int64_t l = 0; l < j; ++l) s -= a[i + l * lda] * a[j + l * lda];
      a[i + j * lda] = s / d;
    }
  }
  return 0;
#endif
}

// B (m x n) := B L^-T with L the n x n lower factor of a diagonal tile.
void trsm_right_lower_trans(std::int64_t m, std::int64_t n, const float* l, std::int64_t ldl,
                            float* b, std::int64_t ldb) {
#if HALFSCOPE_HAS_BLAS
  cblas_strsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, static_cast<int>(m),
              static_cast<int>(n), 1.0f, l, static_cast<int>(ldl), b, static_cast<int>(ldb));
#else
  // Column j of X = B L^-T satisfies X(:, j) = (B(:, j) - sum_{p<j} X(:, p) L(j, p)) / L(j, j).
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t p = 0; p < j; ++p)
      for (std::int64_t i = 0; i < m; ++i) b[i + j * ldb] -= b[i + p * ldb] * l[j + p * ldl];
    for (std::int64_t i = 0; i < m; ++i) b[i + j * ldb] /= l[j + j * ldl];
  }
#endif
}

// Lower triangle of C (n x n) -= A A^T, A n x k.
void syrk_lower(std::int64_t n, std::int64_t k, const float* a, std::int64_t lda, float* c,
                std::int64_t ldc) {
#if HALFSCOPE_HAS_BLAS
  cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, static_cast<int>(n), static_cast<int>(k),
              -1.0f, a, static_cast<int>(lda), 1.0f, c, static_cast<int>(ldc));
#else
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t i = j; i < n; ++i) c[i + j * ldc] -= a[i + l * lda] * a[j + l * lda];
#endif
}

// Whether a column-major rows x cols tile holds an entry FP16 cannot (rounds to +-Inf).
bool exceeds_half(const float* t, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t e = 0; e < rows * cols; ++e)
    if (!std::isfinite(static_cast<float>(Half(t[e])))) return true;
  return false;
}

namespace {

// First exception thrown by any task; the others see `failed` and skip their work.
struct FailureSlot {
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::exception_ptr error;
  FailedTile tile;

  void record(std::exception_ptr e, FailedTile where) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!error) {
      error = std::move(e);
      tile = where;
    }
    failed.store(true);
  }
};

// Runs the task body for tile (i, j) unless an earlier task failed; records its failure.
// `classify` refines the failed tile's description after a NumericalError (error path only).
template <typename Work, typename Classify>
void guarded(FailureSlot& slot, std::int64_t i, std::int64_t j, Work&& work, Classify&& classify) {
  if (slot.failed.load()) return;
  try {
    work();
  } catch (const NumericalError&) {
    slot.record(std::current_exception(), classify());
  } catch (...) {
    slot.record(std::current_exception(), FailedTile{i, j});
  }
}

template <typename Work>
void guarded(FailureSlot& slot, std::int64_t i, std::int64_t j, Work&& work) {
  guarded(slot, i, j, std::forward<Work>(work), [i, j] { return FailedTile{i, j}; });
}

}  // namespace

void cholesky_cpu(TileMatrix& a, const std::vector<GemmVariant>& variants,
                  const std::string& policy_name, FailedTile* failed) {
  const TileLayout& layout = a.layout;
  const std::int64_t nt = layout.tile_rows();
  const std::int64_t nb = layout.tile_size();
  float* base = a.storage.data_as<float>();
  auto tile = [&](std::int64_t i, std::int64_t j) { return base + layout.tile_offset(i, j); };
  auto height = [&](std::int64_t i) { return layout.tile_height(i); };
  // One dependence token per tile: the depend clauses name these, not the tile data.
  std::vector<char> token(static_cast<std::size_t>(nt * nt));
  // GCC does not count depend clauses as uses of the variable, hence maybe_unused.
  [[maybe_unused]] char* dep = token.data();
  FailureSlot slot;

#pragma omp parallel default(shared)
#pragma omp single
  {
    for (std::int64_t k = 0; k < nt; ++k) {
      const std::int64_t kk = k * nt + k;
#pragma omp task depend(inout : dep[kk]) firstprivate(k)
      guarded(slot, k, k, [&, k] {
        const std::int64_t info = potrf_lower(height(k), tile(k, k), height(k));
        if (info > 0) throw pivot_failure(policy_name, k, nb, info);
        // A rejected argument is a bug, not the matrix's: not a NumericalError, so that
        // --recover does not retry it with promoted precisions.
        if (info < 0) throw Error("LAPACKE_spotrf rejected argument " + std::to_string(-info));
      });
      for (std::int64_t i = k + 1; i < nt; ++i) {
        const std::int64_t ik = i * nt + k;
#pragma omp task depend(in : dep[kk]) depend(inout : dep[ik]) firstprivate(i, k)
        guarded(slot, i, k, [&, i, k] {
          trsm_right_lower_trans(height(i), height(k), tile(k, k), height(k), tile(i, k),
                                 height(i));
        });
      }
      for (std::int64_t i = k + 1; i < nt; ++i) {
        const std::int64_t ik = i * nt + k, ii = i * nt + i;
#pragma omp task depend(in : dep[ik]) depend(inout : dep[ii]) firstprivate(i, k)
        guarded(slot, i, i, [&, i, k] {
          syrk_lower(height(i), height(k), tile(i, k), height(i), tile(i, i), height(i));
        });
        for (std::int64_t j = k + 1; j < i; ++j) {
          const std::int64_t jk = j * nt + k, ij = i * nt + j;
          const GemmVariant v = variants[static_cast<std::size_t>(i * nt + j)];
#pragma omp task depend(in : dep[ik], dep[jk]) depend(inout : dep[ij]) firstprivate(i, j, k, v)
          guarded(
              slot, i, j,
              [&, i, j, k, v] {
                gemm_nt_update(v, height(i), height(j), height(k), tile(i, k), height(i),
                               tile(j, k), height(j), tile(i, j), height(i), TileLabel{i, j});
              },
              [&, i, j, k, v] {
                // Which input did not fit FP16 (the emulation rounds A and B before C)? Only the
                // FP16 variants can overflow an input: BF16 / TF32 keep FP32's exponent range.
                FailedTile f{i, j};
                for (const std::int64_t o : {i, j}) {
                  if (!gemm_variant_uses_fp16(v) || !exceeds_half(tile(o, k), height(o), height(k)))
                    continue;
                  f.part = FailedPart::operand, f.oi = o, f.ok = k;
                  return f;
                }
                if ((v == GemmVariant::HP2 || v == GemmVariant::HP3) &&
                    exceeds_half(tile(i, j), height(i), height(j)))
                  f.part = FailedPart::c_entry;
                return f;
              });
        }
      }
    }
  }
  if (slot.error) {
    if (failed) *failed = slot.tile;
    std::rethrow_exception(slot.error);
  }
}

}  // namespace halfscope::linalg::detail
