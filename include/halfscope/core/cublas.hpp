// cuBLAS handles for backend code (CUDA builds only): an RAII handle and a per-device pool that
// leases a handle to one call at a time, bound to the call's stream (creating a handle costs
// milliseconds; a handle must not be used by two threads at once).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>

#include "halfscope/core/cuda.hpp"

namespace halfscope::cuda {

/// One cuBLAS handle of the current device, default math mode (no TF32 unless asked for).
class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

/// A pooled handle of the current device leased for one call and bound to `stream`. The
/// destructor synchronises the stream and returns the handle to the pool (a handle whose stream
/// failed is dropped instead). The math mode is reset to the default on lease.
class CublasLease {
 public:
  explicit CublasLease(cudaStream_t stream);
  ~CublasLease();
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_->get(); }

 private:
  cudaStream_t stream_;
  int device_ = 0;
  std::unique_ptr<CublasHandle> handle_;
};

/// Destroys the idle pooled handles (handles in use are released when their call ends).
void clear_cublas_handles();

}  // namespace halfscope::cuda
