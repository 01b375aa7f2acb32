// The precision-independent pieces of the CUDA deconvolution backend (backend_cuda.hpp).
#include <cufftXt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "deconv/backend_cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::deconv::detail::cudab {

const char* op_name(unsigned op) {
  switch (op) {
    case kOpNormal:
      return "normal operator";
    case kOpRhs:
      return "right-hand side";
    case kOpCriterion:
      return "criterion";
    case kOpDot:
      return "dot product";
    case kOpAxpby:
      return "axpby";
    case kOpAssign:
      return "assign";
    default:
      return "operation";
  }
}

Grid make_grid(const Problem& problem, bool pow2) {
  Grid g;
  g.rows = problem.rows();
  g.cols = problem.cols();
  g.gr = grid_extent(g.rows, problem.boundary, pow2);
  g.gc = grid_extent(g.cols, problem.boundary, pow2);
  g.circular = problem.boundary == Boundary::Circular;
  return g;
}

void check_half_grid(const Problem& problem) {
  const auto pow2 = [](std::int64_t n) { return n > 0 && (n & (n - 1)) == 0; };
  const Grid g = make_grid(problem, true);
  // Only the circular boundary can fail: the zero boundary's grid is rounded up to powers of 2.
  // The message is the CPU backend's (backend_cpu_half.cpp), so both devices say the same.
  const auto fail = [](std::int64_t n, const char* axis) {
    throw InvalidInput(
        "deconvolve: precision half runs its FFTs on power-of-two grids; the image's " +
        std::string(axis) + " count " + std::to_string(n) +
        " is not a power of two (circular boundary); use mixed or split, or crop "
        "or pad the image to a power of two");
  };
  if (!pow2(g.gr)) fail(g.rows, "row");
  if (!pow2(g.gc)) fail(g.cols, "column");
}

std::unique_ptr<PlanPair> make_plans(const Grid& grid, cudaDataType real_type,
                                     cudaStream_t stream) {
  auto plans = std::make_unique<PlanPair>();
  long long n[2] = {grid.gr, grid.gc};
  const cudaDataType complex_type = real_type == CUDA_R_64F   ? CUDA_C_64F
                                    : real_type == CUDA_R_16F ? CUDA_C_16F
                                                              : CUDA_C_32F;
  std::size_t work = 0;
  HS_CUFFT_CHECK(cufftXtMakePlanMany(plans->forward.get(), 2, n, nullptr, 1, 0, real_type, nullptr,
                                     1, 0, complex_type, 1, &work, complex_type));
  HS_CUFFT_CHECK(cufftXtMakePlanMany(plans->inverse.get(), 2, n, nullptr, 1, 0, complex_type,
                                     nullptr, 1, 0, real_type, 1, &work, complex_type));
  HS_CUFFT_CHECK(cufftSetStream(plans->forward.get(), stream));
  HS_CUFFT_CHECK(cufftSetStream(plans->inverse.get(), stream));
  return plans;
}

void exec(const conv::gpufft::CufftPlan& plan, const void* in, void* out, bool inverse) {
  // cuFFT takes a non-const input; an out-of-place R2C only reads it (C2R inputs are scratch).
  HS_CUFFT_CHECK(
      cufftXtExec(plan.get(), const_cast<void*>(in), out, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
}

std::shared_ptr<Buffer> device_buffer(std::int64_t bytes) {
  return Buffer::allocate(std::max<std::int64_t>(bytes, 16), Memory::device);
}

std::shared_ptr<Buffer> psf_spectrum64(const Problem& problem, const Grid& grid,
                                       const PlanPair* plans, cudaStream_t stream) {
  const Array h = psf_on_grid(problem.psf, grid.gr, grid.gc).to(Memory::device);
  auto spec = device_buffer(grid.spectrum() * static_cast<std::int64_t>(sizeof(double2)));
  std::unique_ptr<PlanPair> own;
  if (!plans) {
    own = make_plans(grid, CUDA_R_64F, stream);
    plans = own.get();
  }
  exec(plans->forward, h.data(), spec->data(), false);
  // `h` is freed at return: the transform must have read it by then.
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return spec;
}

cudak::DeviceBox read_box(const cudak::DeviceBox* dbox, cudaStream_t stream) {
  static_assert(sizeof(cudak::DeviceBox) <= 256, "the pinned mailbox holds 256 bytes");
  auto* host = static_cast<cudak::DeviceBox*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(
      cudaMemcpyAsync(host, dbox, sizeof(cudak::DeviceBox), cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *host;
}

void throw_if_overflow(Precision p, const cudak::DeviceBox& box, cudak::DeviceBox* dbox,
                       cudaStream_t stream) {
  if (box.status.op == kOpNone) return;
  const cudak::DeviceStatus clear{};
  HS_CUDA_CHECK(
      cudaMemcpyAsync(&dbox->status, &clear, sizeof(clear), cudaMemcpyHostToDevice, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `clear` lives on this stack frame
  float largest = 0;
  static_assert(sizeof(largest) == sizeof(box.status.largest_bits));
  std::memcpy(&largest, &box.status.largest_bits, sizeof(largest));
  char value[32];
  std::snprintf(value, sizeof(value), "%.2g", static_cast<double>(largest));
  if (storage_dtype(p) != DType::f16)  // FP32 / FP64 storage: only inf or NaN is reported
    throw NumericalError(std::string(precision_name(p)) + ": " + op_name(box.status.op) +
                         " produced a non-finite value (" + value + ")");
  throw NumericalError(std::string(precision_name(p)) + ": " + op_name(box.status.op) +
                       " overflowed FP16 (largest " + value +
                       "; FP16 holds magnitudes up to 65504)");
}

int blocks_for(std::int64_t n) {
  return cuda::grid_blocks(n, cudak::kThreads, cudak::kBlocksPerSm);
}

int reduce_blocks(std::int64_t n) {
  return std::min(cudak::kMaxReduceBlocks, cuda::grid_blocks(n, cudak::kThreads, 4));
}

void check_device_image(const Array& a, std::int64_t rows, std::int64_t cols, const char* what) {
  const bool dtype_ok =
      a.dtype() == DType::f64 || a.dtype() == DType::f32 || a.dtype() == DType::f16;
  if (a.empty() || !a.on_device() || !dtype_ok || !a.is_c_contiguous() || a.ndim() != 2 ||
      a.dim(0) != rows || a.dim(1) != cols)
    throw InvalidInput(std::string(what) +
                       ": expected a C-contiguous device float64, float32 or "
                       "float16 [" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "] array, found " +
                       (a.empty() ? std::string("an empty array") : a.describe()));
}

}  // namespace halfscope::deconv::detail::cudab
