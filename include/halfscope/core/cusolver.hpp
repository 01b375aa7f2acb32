// RAII cuSOLVER dense handle for backend code (CUDA builds only): one per call, bound to the call's
// stream, with the parameter object of the 64-bit API. Creating one costs milliseconds, nothing
// next to the factorizations it serves.
#pragma once

#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "halfscope/core/cuda.hpp"

namespace halfscope::cuda {

/// A cuSOLVER dense handle on `stream` and its cusolverDnParams_t.
class CusolverHandle {
 public:
  explicit CusolverHandle(cudaStream_t stream) {
    HS_CUSOLVER_CHECK(cusolverDnCreate(&handle_));
    cusolverStatus_t status = cusolverDnSetStream(handle_, stream);
    if (status == CUSOLVER_STATUS_SUCCESS) status = cusolverDnCreateParams(&params_);
    if (status != CUSOLVER_STATUS_SUCCESS) {
      (void)cusolverDnDestroy(handle_);  // the destructor will not run: release here, then throw
      HS_CUSOLVER_CHECK(status);
    }
  }
  ~CusolverHandle() {
    (void)cusolverDnDestroyParams(params_);
    (void)cusolverDnDestroy(handle_);
  }
  CusolverHandle(const CusolverHandle&) = delete;
  CusolverHandle& operator=(const CusolverHandle&) = delete;
  [[nodiscard]] cusolverDnHandle_t get() const noexcept { return handle_; }
  [[nodiscard]] cusolverDnParams_t params() const noexcept { return params_; }

 private:
  cusolverDnHandle_t handle_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
};

}  // namespace halfscope::cuda
