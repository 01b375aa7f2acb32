// GPU side of the FP64 reference reconstructor and of the error covariance
// (evaluation_backends.hpp): cuSOLVER's 64-bit Xpotrf / Xpotrs for X Cmm = Ctm, cuBLAS dsymm +
// dgemm for Cee. Host code only (no kernels): the library calls do all the arithmetic, in FP64
// throughout.
//
// Layouts (see reconstructor.cpp): the row-major m x n Ctm is the column-major n x m Ctm^T, i.e.
// the right-hand sides of Cmm X^T = Ctm^T, already in place; the row-major lower triangle of Cmm is
// the column-major upper triangle, hence CUBLAS_FILL_MODE_UPPER everywhere.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ao/evaluation_backends.hpp"
#include "halfscope/core/cublas.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::ao::detail {

namespace {

std::int64_t bytes_of(std::int64_t rows, std::int64_t cols) {
  return rows * cols * static_cast<std::int64_t>(sizeof(double));
}

void upload(double* device, const double* host, std::int64_t count, cudaStream_t stream) {
  HS_CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<std::size_t>(count) * sizeof(double),
                                cudaMemcpyHostToDevice, stream));
}

}  // namespace

void reconstructor_solve_cuda(const double* cmm, double* ctm_then_x, std::int64_t n,
                              std::int64_t m) {
  cuda::Stream stream;
  const cudaStream_t s = stream.get();
  cuda::CusolverHandle solver(s);
  cuda::StreamScratch a(bytes_of(n, n), s);
  cuda::StreamScratch b(bytes_of(m, n), s);
  cuda::StreamScratch info(sizeof(int), s);
  upload(a.as<double>(), cmm, n * n, s);
  upload(b.as<double>(), ctm_then_x, m * n, s);

  std::size_t device_bytes = 0, host_bytes = 0;
  HS_CUSOLVER_CHECK(cusolverDnXpotrf_bufferSize(solver.get(), solver.params(),
                                                CUBLAS_FILL_MODE_UPPER, n, CUDA_R_64F, a.get(), n,
                                                CUDA_R_64F, &device_bytes, &host_bytes));
  cuda::StreamScratch work(static_cast<std::int64_t>(device_bytes), s);
  std::vector<unsigned char> host_work(host_bytes);
  HS_CUSOLVER_CHECK(cusolverDnXpotrf(solver.get(), solver.params(), CUBLAS_FILL_MODE_UPPER, n,
                                     CUDA_R_64F, a.get(), n, CUDA_R_64F, work.get(), device_bytes,
                                     host_work.empty() ? nullptr : host_work.data(), host_bytes,
                                     info.as<int>()));
  int factor_info = 0;
  HS_CUDA_CHECK(cudaMemcpyAsync(&factor_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
  stream.synchronize();
  if (factor_info > 0) throw_not_positive_definite(factor_info, n, "cuSOLVER Xpotrf");
  if (factor_info < 0)
    throw CudaError("reconstructor_fp64: cuSOLVER Xpotrf rejected argument " +
                    std::to_string(-factor_info));

  HS_CUSOLVER_CHECK(cusolverDnXpotrs(solver.get(), solver.params(), CUBLAS_FILL_MODE_UPPER, n, m,
                                     CUDA_R_64F, a.get(), n, CUDA_R_64F, b.get(), n,
                                     info.as<int>()));
  int solve_info = 0;
  HS_CUDA_CHECK(cudaMemcpyAsync(&solve_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaMemcpyAsync(ctm_then_x, b.get(), static_cast<std::size_t>(bytes_of(m, n)),
                                cudaMemcpyDeviceToHost, s));
  stream.synchronize();
  if (solve_info != 0)
    throw CudaError("reconstructor_fp64: cuSOLVER Xpotrs rejected argument " +
                    std::to_string(-solve_info));
}

void error_covariance_cuda(const double* ctt, const double* ctm, const double* cmm, const double* r,
                           double* cee, std::int64_t n, std::int64_t m) {
  cuda::Stream stream;
  const cudaStream_t s = stream.get();
  cuda::StreamScratch d_cmm(bytes_of(n, n), s);
  cuda::StreamScratch d_r(bytes_of(m, n), s);
  cuda::StreamScratch d_w(bytes_of(m, n), s);
  cuda::StreamScratch d_cee(bytes_of(m, m), s);
  upload(d_cmm.as<double>(), cmm, n * n, s);
  upload(d_r.as<double>(), r, m * n, s);
  upload(d_w.as<double>(), ctm, m * n, s);
  upload(d_cee.as<double>(), ctt, m * m, s);
  {
    cuda::CublasLease blas(s);  // default math mode: true FP64, no emulation
    // Column-major: W^T (n x m) = Cmm R^T - 2 Ctm^T, Cmm symmetric read in its upper triangle.
    const double one = 1.0, minus_two = -2.0;
    HS_CUBLAS_CHECK(cublasDsymm_64(blas.get(), CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, n, m, &one,
                                   d_cmm.as<double>(), n, d_r.as<double>(), n, &minus_two,
                                   d_w.as<double>(), n));
    // Column-major: Cee^T (m x m) += R W^T, with R = (the n x m buffer R^T)^T.
    HS_CUBLAS_CHECK(cublasDgemm_64(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, &one,
                                   d_r.as<double>(), n, d_w.as<double>(), n, &one,
                                   d_cee.as<double>(), m));
  }
  HS_CUDA_CHECK(cudaMemcpyAsync(cee, d_cee.get(), static_cast<std::size_t>(bytes_of(m, m)),
                                cudaMemcpyDeviceToHost, s));
  stream.synchronize();
}

}  // namespace halfscope::ao::detail
