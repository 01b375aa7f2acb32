// Internal (CUDA builds with cuDNN only): cuDNN handles and descriptors as RAII types for the
// `cudnn` convolution method. A handle costs milliseconds to create, so handles are pooled per
// device and leased to one call at a time, bound to its stream, like core's cuda::CublasLease.
//
// The convolution uses cuDNN's legacy API (cudnnConvolutionForward and its descriptors), which
// cuDNN 9 marks deprecated in favour of the graph API; the legacy API is what PyTorch's conv2d
// peer in the benchmark calls too, so the two are the same library path.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>

#include "halfscope/core/cuda.hpp"

/// Checks a cuDNN status (success is 0); throws halfscope::CudaError naming the call.
#define HS_CUDNN_CHECK(expr) HS_CUDA_LIBRARY_CHECK("cuDNN", expr)

namespace halfscope::conv::cudnn {

/// A cuDNN descriptor owned by one object: `Create` on construction, `Destroy` on destruction.
template <class D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Descriptor {
 public:
  Descriptor() { HS_CUDNN_CHECK(Create(&desc_)); }
  ~Descriptor() {
    if (desc_) (void)Destroy(desc_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  [[nodiscard]] D get() const noexcept { return desc_; }

 private:
  D desc_ = nullptr;
};

using TensorDescriptor =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
               cudnnDestroyConvolutionDescriptor>;

/// A pooled cuDNN handle of the current device, leased for one call and bound to `stream`. The
/// destructor returns it to the pool without waiting: the legacy convolution keeps no per-call
/// state in the handle once enqueued (its workspace is the caller's stream-ordered scratch), so
/// the next lease may enqueue behind it on any stream.
class HandleLease {
 public:
  explicit HandleLease(cudaStream_t stream);
  ~HandleLease();
  HandleLease(const HandleLease&) = delete;
  HandleLease& operator=(const HandleLease&) = delete;
  [[nodiscard]] cudnnHandle_t get() const noexcept { return handle_; }

 private:
  int device_ = 0;
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace halfscope::conv::cudnn
