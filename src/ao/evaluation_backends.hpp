// Internal pieces of the tomographic evaluation (public API: include/halfscope/ao/evaluation.hpp):
// the GPU halves of the FP64 reconstructor solve and of the error covariance
// (reconstructor_cuda.cu), and the shared FP64 matrix helpers of the CPU side (reconstructor.cpp).
//
// Layout convention of every matrix here: dense, row-major, FP64, on the host. A row-major m x n
// matrix is the column-major n x m matrix of its transpose, which is how LAPACK, BLAS, cuSOLVER and
// cuBLAS (all column-major) see it; the comments at each call spell the mapping out.
#pragma once

#include <cstdint>

#include "halfscope/config.hpp"

namespace halfscope::ao::detail {

/// Throws NotPositiveDefinite for a Cholesky factorisation of an n x n Cmm that met a non-positive
/// pivot at leading minor `minor` (1-based, as LAPACK's info), naming `backend`.
[[noreturn]] void throw_not_positive_definite(std::int64_t minor, std::int64_t n,
                                              const char* backend);

/// C (rows x cols) = alpha op(A) op(B) + beta C, all row-major FP64, op(A) rows x k, op(B) k x
/// cols. With `transpose_a` A is stored k x rows and op(A) = A^T; likewise B (cols x k) with
/// `transpose_b`. BLAS dgemm where the build has it, else an OpenMP loop with FP64 accumulation.
void gemm_f64(bool transpose_a, bool transpose_b, std::int64_t rows, std::int64_t cols,
              std::int64_t k, double alpha, const double* a, const double* b, double beta,
              double* c);

/// Replaces the n x n row-major matrix by (A + A^T) / 2.
void symmetrise(double* a, std::int64_t n);

#if HALFSCOPE_WITH_CUDA
/// GPU half of reconstructor_fp64: `ctm_then_x` holds Ctm (m x n row-major) on entry and X =
/// Ctm Cmm^-1 on return; `cmm` is n x n (read only). cuSOLVER Xpotrf + Xpotrs (64-bit API).
void reconstructor_solve_cuda(const double* cmm, double* ctm_then_x, std::int64_t n,
                              std::int64_t m);

/// GPU half of error_covariance: Cee = Ctt + (R Cmm - 2 Ctm) R^T (not yet symmetrised; the caller
/// symmetrises), m x m, with cuBLAS dsymm + dgemm in FP64.
void error_covariance_cuda(const double* ctt, const double* ctm, const double* cmm, const double* r,
                           double* cee, std::int64_t n, std::int64_t m);
#endif

}  // namespace halfscope::ao::detail
