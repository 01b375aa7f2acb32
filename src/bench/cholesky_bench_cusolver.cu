// cuSOLVER peers of the tile Cholesky benchmarks and the device memory poller
// (src/bench/cholesky_bench_cuda.hpp). Host code only: the library calls do the arithmetic.
//
// Layout: a C-contiguous symmetric matrix read column-major is the same matrix, so the dense
// row-major Cmm goes to cuSOLVER as is (lower fill mode); the row-major m x n Ctm is the
// column-major n x m Ctm^T, the right-hand sides of Cmm R^T = Ctm^T, and the solution left in
// its place is the row-major R.
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench/cholesky_bench_cuda.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/cusolver.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::bench::cholesky_detail {
namespace {

std::int64_t used_bytes() {
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(total - free);
}

void check_square(const Array& a, const char* what) {
  if (!a.on_device() || a.ndim() != 2 || a.dim(0) != a.dim(1) || !a.is_c_contiguous() ||
      (a.dtype() != DType::f32 && a.dtype() != DType::f64))
    throw InvalidInput(std::string(what) +
                       ": expected a square C-contiguous float32 / float64 device matrix, found " +
                       a.describe());
}

void check_info(int info, const char* routine, std::int64_t n) {
  if (info > 0)
    throw NotPositiveDefinite(std::string("cuSOLVER ") + routine + ": the leading minor of order " +
                              std::to_string(info) + " of the " + std::to_string(n) + " x " +
                              std::to_string(n) + " matrix is not positive definite");
  if (info < 0)
    throw CudaError(std::string("cuSOLVER ") + routine + " rejected argument " +
                    std::to_string(-info));
}

// Xpotrf on `a` (n x n, ld n) between the events of `timer`; returns its milliseconds.
double potrf(cuda::CusolverHandle& solver, cudaStream_t s, void* a, std::int64_t n,
             cudaDataType type, const char* routine) {
  std::size_t device_bytes = 0, host_bytes = 0;
  HS_CUSOLVER_CHECK(cusolverDnXpotrf_bufferSize(solver.get(), solver.params(),
                                                CUBLAS_FILL_MODE_LOWER, n, type, a, n, type,
                                                &device_bytes, &host_bytes));
  cuda::StreamScratch work(static_cast<std::int64_t>(device_bytes), s);
  cuda::StreamScratch info(sizeof(int), s);
  std::vector<unsigned char> host_work(host_bytes);
  cuda::EventTimer timer(s);
  timer.start();
  HS_CUSOLVER_CHECK(cusolverDnXpotrf(
      solver.get(), solver.params(), CUBLAS_FILL_MODE_LOWER, n, type, a, n, type, work.get(),
      device_bytes, host_work.empty() ? nullptr : host_work.data(), host_bytes, info.as<int>()));
  const double ms = timer.stop_ms();
  int factor_info = 0;
  HS_CUDA_CHECK(cudaMemcpyAsync(&factor_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  check_info(factor_info, routine, n);
  return ms;
}

}  // namespace

DeviceMemoryPoller::DeviceMemoryPoller() : baseline_(used_bytes()) {
  peak_ = baseline_;
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  thread_ = std::thread([this, device] {
    // The poller must not throw (nothing would catch it): a failed reading is skipped.
    if (cudaSetDevice(device) != cudaSuccess) return;
    while (running_.load(std::memory_order_relaxed)) {
      std::size_t free = 0, total = 0;
      if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
        const auto used = static_cast<std::int64_t>(total - free);
        std::int64_t seen = peak_.load();
        while (used > seen && !peak_.compare_exchange_weak(seen, used)) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
}

DeviceMemoryPoller::~DeviceMemoryPoller() {
  (void)stop();
}

std::int64_t DeviceMemoryPoller::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  return peak_.load();
}

std::int64_t device_free_bytes() {
  std::size_t free = 0, total = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(free);
}

double cusolver_potrf_ms(Array& dense) {
  check_square(dense, "cusolver_potrf_ms");
  cuda::Stream stream;
  cuda::CusolverHandle solver(stream.get());
  const bool f64 = dense.dtype() == DType::f64;
  return potrf(solver, stream.get(), dense.data(), dense.dim(0), f64 ? CUDA_R_64F : CUDA_R_32F,
               f64 ? "dpotrf" : "spotrf");
}

CusolverTorTimes cusolver_reconstructor_f32(Array& cmm, Array& ctm) {
  check_square(cmm, "cusolver_reconstructor_f32");
  const std::int64_t n = cmm.dim(0);
  if (cmm.dtype() != DType::f32 || !ctm.on_device() || ctm.dtype() != DType::f32 ||
      ctm.ndim() != 2 || ctm.dim(1) != n || !ctm.is_c_contiguous())
    throw InvalidInput(
        "cusolver_reconstructor_f32: expected float32 device Cmm (n x n) and Ctm "
        "(m x n, C-contiguous), found " +
        cmm.describe() + " and " + ctm.describe());
  cuda::Stream stream;
  const cudaStream_t s = stream.get();
  cuda::CusolverHandle solver(s);
  CusolverTorTimes t;
  t.potrf_ms = potrf(solver, s, cmm.data(), n, CUDA_R_32F, "spotrf");
  cuda::StreamScratch info(sizeof(int), s);
  cuda::EventTimer timer(s);
  timer.start();
  HS_CUSOLVER_CHECK(cusolverDnXpotrs(solver.get(), solver.params(), CUBLAS_FILL_MODE_LOWER, n,
                                     ctm.dim(0), CUDA_R_32F, cmm.data(), n, CUDA_R_32F, ctm.data(),
                                     n, info.as<int>()));
  t.potrs_ms = timer.stop_ms();
  int solve_info = 0;
  HS_CUDA_CHECK(cudaMemcpyAsync(&solve_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  check_info(solve_info, "spotrs", n);
  return t;
}

}  // namespace halfscope::bench::cholesky_detail
