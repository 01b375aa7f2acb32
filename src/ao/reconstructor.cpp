// The FP64 reference reconstructor R = Ctm Cmm^-1 and the error covariance Cee
// (include/halfscope/ao/evaluation.hpp): input checks, device dispatch and the CPU side (LAPACKE
// dposv, BLAS dsymm / dgemm). The GPU side is reconstructor_cuda.cu.
//
// Layouts: every matrix is row-major. The row-major m x n Ctm is the column-major n x m Ctm^T, so
// "X Cmm = Ctm" is the column-major system Cmm X^T = Ctm^T with m right-hand sides already in
// place, and the row-major lower triangle of the symmetric Cmm is its column-major upper triangle.
// Only that triangle of Cmm is read (as LAPACK does), by the solve and by the Cee products alike.
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "ao/evaluation_backends.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif
#if HALFSCOPE_HAS_LAPACKE
#include <lapacke.h>
#endif

namespace halfscope::ao {

namespace detail {

void throw_not_positive_definite(std::int64_t minor, std::int64_t n, const char* backend) {
  throw NotPositiveDefinite(
      std::string("reconstructor_fp64: Cmm (") + std::to_string(n) + " x " + std::to_string(n) +
      ") is not positive definite: the leading minor of order " + std::to_string(minor) +
      " is not positive (" + backend +
      " Cholesky). Cmm generated without noise is only semi-definite; enable the noise model");
}

void gemm_f64(bool transpose_a, bool transpose_b, std::int64_t rows, std::int64_t cols,
              std::int64_t k, double alpha, const double* a, const double* b, double beta,
              double* c) {
  const std::int64_t lda = transpose_a ? rows : k;
  const std::int64_t ldb = transpose_b ? k : cols;
#if HALFSCOPE_HAS_BLAS
  if (rows <= INT_MAX && cols <= INT_MAX && k <= INT_MAX) {
    cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
                transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                static_cast<int>(cols), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), beta, c, static_cast<int>(cols));
    return;
  }
#endif
  // Without BLAS (or beyond its 32-bit sizes): one output row per iteration, FP64 accumulation.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double av = transpose_a ? a[p * lda + i] : a[i * lda + p];
        const double bv = transpose_b ? b[j * ldb + p] : b[p * ldb + j];
        sum += av * bv;
      }
      c[i * cols + j] = alpha * sum + (beta == 0 ? 0.0 : beta * c[i * cols + j]);
    }
  }
}

void symmetrise(double* a, std::int64_t n) {
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < i; ++j) {
      const double mean = 0.5 * (a[i * n + j] + a[j * n + i]);
      a[i * n + j] = mean;
      a[j * n + i] = mean;
    }
}

}  // namespace detail

namespace {

// A 2-D floating matrix as a C-contiguous FP64 host array: the caller's own array when it already
// is one (no copy: at E-ELT size Cmm alone is 80 GB), else a converted copy. Read-only use; a
// solver that overwrites its input calls owned_copy. `function` and `name` make the messages:
// "reconstructor_fp64: cmm: expected ...".
Array host_f64(const Array& a, const char* function, const char* name) {
  const std::string where = std::string(function) + ": " + name;
  if (a.empty()) throw InvalidInput(where + ": expected a 2-D floating array, found none");
  if (a.ndim() != 2) throw InvalidInput(where + ": expected a 2-D matrix, found " + a.describe());
  // A 0 x n or n x 0 matrix must stop here: LAPACK rejects n = 0 with a leading dimension of 0
  // (printing to stderr), and an empty R or Cee would be no answer.
  if (a.size() == 0)
    throw InvalidInput(where + ": expected a non-empty matrix (at least 1 x 1), found " +
                       a.describe());
  const DType t = a.dtype();
  if (t != DType::f64 && t != DType::f32 && t != DType::f16 && t != DType::bf16)
    throw InvalidInput(where +
                       ": expected a floating dtype (float64, float32, float16, bfloat16), "
                       "found " +
                       a.describe());
  Array host = a.on_device() ? a.to(Memory::host) : a;
  Array out = t == DType::f64 ? host.contiguous() : host.astype(DType::f64);
  const double* p = out.data_as<double>();
  for (std::int64_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(p[i]))
      throw InvalidInput(where + ": element (" + std::to_string(i / out.dim(1)) + ", " +
                         std::to_string(i % out.dim(1)) + ") is not finite (" +
                         std::to_string(p[i]) + ")");
  return out;
}

// `a` (from host_f64 of `original`) as an array the caller may overwrite: copied only when it
// still shares the caller's buffer.
Array owned_copy(Array a, const Array& original) {
  return a.buffer() == original.buffer() ? a.clone(Memory::host) : a;
}

void check_shape(const Array& a, std::int64_t rows, std::int64_t cols, const char* function,
                 const char* name, const char* rule) {
  if (a.dim(0) != rows || a.dim(1) != cols)
    throw InvalidInput(std::string(function) + ": " + name + ": expected " + std::to_string(rows) +
                       " x " + std::to_string(cols) + " (" + rule + "), found " +
                       shape_to_string(a.shape()));
}

void check_finite_result(const Array& a, const char* function) {
  const double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(p[i]))
      throw NumericalError(std::string(function) + ": the FP64 result has a non-finite element " +
                           "at linear index " + std::to_string(i) + " (the inputs were finite)");
}

void solve_cpu(Array& cmm, Array& x) {
#if HALFSCOPE_HAS_LAPACKE
  const std::int64_t n = cmm.dim(0), m = x.dim(0);
  if (n > INT_MAX || m > INT_MAX)
    throw Unsupported("reconstructor_fp64: n = " + std::to_string(n) + ", m = " +
                      std::to_string(m) + " exceed LAPACK's 32-bit sizes; use --device cuda");
  // Column-major view (see the file comment): A = Cmm read in its upper triangle, B = Ctm^T
  // (n x m, ldb = n), overwritten with X^T, i.e. the row-major X.
  const lapack_int info =
      LAPACKE_dposv(LAPACK_COL_MAJOR, 'U', static_cast<lapack_int>(n), static_cast<lapack_int>(m),
                    cmm.data_as<double>(), static_cast<lapack_int>(n), x.data_as<double>(),
                    static_cast<lapack_int>(n));
  if (info > 0) detail::throw_not_positive_definite(info, n, "LAPACK dposv");
  if (info < 0)
    throw Error("reconstructor_fp64: LAPACK dposv rejected argument " + std::to_string(-info));
#else
  (void)cmm;
  (void)x;
  throw Unsupported(
      "reconstructor_fp64: this build has no LAPACKE (CPU solve); use --device cuda "
      "or rebuild with liblapacke-dev installed");
#endif
}

// Cee = Ctt + (R Cmm - 2 Ctm) R^T, which equals Ctt - Ctm R^T - R Ctm^T + R Cmm R^T once
// symmetrised (R Cmm R^T is symmetric and R Ctm^T = (Ctm R^T)^T): one symm and one gemm.
void error_covariance_cpu(const Array& ctt, const Array& ctm, const Array& cmm, const Array& r,
                          Array& cee) {
  const std::int64_t m = r.dim(0), n = r.dim(1);
  Array w = ctm.clone(Memory::host);  // the m x n workspace R Cmm - 2 Ctm (Ctm stays untouched)
  std::copy_n(ctt.data_as<double>(), m * m, cee.data_as<double>());
#if HALFSCOPE_HAS_BLAS
  if (n <= INT_MAX && m <= INT_MAX) {
    // Row-major R (m x n) times the symmetric Cmm read in its row-major lower triangle.
    cblas_dsymm(CblasRowMajor, CblasRight, CblasLower, static_cast<int>(m), static_cast<int>(n),
                1.0, cmm.data_as<double>(), static_cast<int>(n), r.data_as<double>(),
                static_cast<int>(n), -2.0, w.data_as<double>(), static_cast<int>(n));
    detail::gemm_f64(false, true, m, m, n, 1.0, w.data_as<double>(), r.data_as<double>(), 1.0,
                     cee.data_as<double>());
    return;
  }
#endif
  // Without BLAS: W = R Cmm - 2 Ctm with Cmm(k, j) read from the lower triangle (no n x n copy),
  // one output row per iteration, FP64 accumulation.
  const double* f = cmm.data_as<double>();
  const double* rp = r.data_as<double>();
  double* wp = w.data_as<double>();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < n; ++k)
        sum += rp[i * n + k] * (k >= j ? f[k * n + j] : f[j * n + k]);
      wp[i * n + j] = sum - 2.0 * wp[i * n + j];
    }
  detail::gemm_f64(false, true, m, m, n, 1.0, w.data_as<double>(), r.data_as<double>(), 1.0,
                   cee.data_as<double>());
}

}  // namespace

Array reconstructor_fp64(const Array& cmm, const Array& ctm, DeviceKind device) {
  constexpr const char* kFn = "reconstructor_fp64";
  // The solution overwrites x: an owned copy. LAPACK's dposv overwrites Cmm too, so the CPU
  // path copies it; the GPU one uploads it and factors the device copy, reading the caller's
  // Cmm in place (at the E-ELT's n a second host copy is another 80.6 GB).
  const Array a = host_f64(cmm, kFn, "cmm");
  Array x = owned_copy(host_f64(ctm, kFn, "ctm"), ctm);
  const std::int64_t n = a.dim(0), m = x.dim(0);
  check_shape(a, n, n, kFn, "cmm", "Cmm is square");
  check_shape(x, m, n, kFn, "ctm", "Ctm has as many columns as Cmm");
  if (resolve_device(device) == DeviceKind::Cuda) {
#if HALFSCOPE_WITH_CUDA
    detail::reconstructor_solve_cuda(a.data_as<double>(), x.data_as<double>(), n, m);
#else
    throw Unsupported("reconstructor_fp64: this build has no CUDA; use --device cpu");
#endif
  } else {
    Array factored = owned_copy(a, cmm);
    solve_cpu(factored, x);
  }
  check_finite_result(x, kFn);
  return x;
}

Array error_covariance(const Array& ctt, const Array& ctm, const Array& cmm,
                       const Array& reconstructor, DeviceKind device) {
  constexpr const char* kFn = "error_covariance";
  // Read only: the caller's FP64 host arrays are used in place (no n x n copy of Cmm).
  const Array r = host_f64(reconstructor, kFn, "reconstructor");
  const std::int64_t m = r.dim(0), n = r.dim(1);
  const Array tt = host_f64(ctt, kFn, "ctt");
  const Array tm = host_f64(ctm, kFn, "ctm");
  const Array mm = host_f64(cmm, kFn, "cmm");
  check_shape(tt, m, m, kFn, "ctt", "m x m, m = the reconstructor's rows");
  check_shape(tm, m, n, kFn, "ctm", "the reconstructor's shape");
  check_shape(mm, n, n, kFn, "cmm", "n x n, n = the reconstructor's columns");
  Array cee(DType::f64, {m, m});
  if (resolve_device(device) == DeviceKind::Cuda) {
#if HALFSCOPE_WITH_CUDA
    detail::error_covariance_cuda(tt.data_as<double>(), tm.data_as<double>(), mm.data_as<double>(),
                                  r.data_as<double>(), cee.data_as<double>(), n, m);
#else
    throw Unsupported("error_covariance: this build has no CUDA; use --device cpu");
#endif
  } else {
    error_covariance_cpu(tt, tm, mm, r, cee);
  }
  detail::symmetrise(cee.data_as<double>(), m);
  check_finite_result(cee, kFn);
  return cee;
}

}  // namespace halfscope::ao
