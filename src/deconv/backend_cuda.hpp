// Internal (CUDA builds only, included by src/deconv/backend_cuda*.cu): what the CUDA backend,
// evaluator and Wiener filter share. The backend itself (backend_cuda.cu) is a class template over
// the precision's types; the pieces here are precision-independent: the transform grid, cuFFT
// plans bound to a stream, the FP64 PSF spectrum, and the mailbox through which every scalar and
// the FP16 overflow status come back with one stream synchronisation.
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>
#include <library_types.h>

#include <cstdint>
#include <memory>

#include "conv/fft_plan_cache_cuda.hpp"
#include "deconv/backend.hpp"
#include "deconv/backend_cuda_kernels.cuh"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::deconv::detail::cudab {

/// The operations that report FP16 overflow (DeviceStatus::op), for the error message.
enum Op : unsigned { kOpNone = 0, kOpNormal, kOpRhs, kOpCriterion, kOpDot, kOpAxpby, kOpAssign };
/// "normal operator", "right-hand side", "criterion", "dot product", "axpby", "assign".
const char* op_name(unsigned op);

/// The transform grid of a problem: the image (rows x cols) and the FFT grid (gr x gc).
struct Grid {
  std::int64_t rows = 0, cols = 0, gr = 0, gc = 0;
  bool circular = true;
  [[nodiscard]] std::int64_t points() const { return gr * gc; }
  [[nodiscard]] std::int64_t spectrum() const { return gr * (gc / 2 + 1); }
  [[nodiscard]] std::int64_t pixels() const { return rows * cols; }
};
/// grid_extent per axis (pow2: power-of-two grids, as FP16 transforms need).
Grid make_grid(const Problem& problem, bool pow2);

/// Precision half needs power-of-two FFT grids (cuFFT's FP16 transforms): InvalidInput naming the
/// image shape and the grid otherwise.
void check_half_grid(const Problem& problem);

/// A forward (R2C) and an inverse (C2R) cuFFT plan on the grid for `real_type` (CUDA_R_16F /
/// 32F / 64F), made once and bound to `stream`.
struct PlanPair {
  conv::gpufft::CufftPlan forward;
  conv::gpufft::CufftPlan inverse;
};
std::unique_ptr<PlanPair> make_plans(const Grid& grid, cudaDataType real_type, cudaStream_t stream);
/// Runs a plan (cufftXtExec, checked).
void exec(const conv::gpufft::CufftPlan& plan, const void* in, void* out, bool inverse);

/// Device memory of `bytes`, owned (one cudaMalloc, freed with the last reference).
std::shared_ptr<Buffer> device_buffer(std::int64_t bytes);

/// h^ (unnormalised DFT of the PSF on the grid, origin at (0, 0)) in FP64: gr x (gc / 2 + 1)
/// double2 on the device, by D2Z on `stream` (`plans`: FP64 plans of this grid, or null to make a
/// temporary forward plan).
std::shared_ptr<Buffer> psf_spectrum64(const Problem& problem, const Grid& grid,
                                       const PlanPair* plans, cudaStream_t stream);

/// Copies the device box (result and status) to the pinned mailbox, synchronises once, returns it.
cudak::DeviceBox read_box(const cudak::DeviceBox* dbox, cudaStream_t stream);
/// Throws NumericalError for a pending overflow in `box` ("half: normal operator overflowed FP16
/// (largest 7.1e+04)"), after clearing the device status so the backend stays usable.
void throw_if_overflow(Precision p, const cudak::DeviceBox& box, cudak::DeviceBox* dbox,
                       cudaStream_t stream);

/// Threads and blocks of an element-wise kernel over `n` items.
int blocks_for(std::int64_t n);
/// Blocks of a one-pass reduction over `n` items (at most cudak::kMaxReduceBlocks).
int reduce_blocks(std::int64_t n);

/// `a`: a rows x cols C-contiguous device array of dtype f64, f32 or f16, else InvalidInput naming
/// `what` and what was found.
void check_device_image(const Array& a, std::int64_t rows, std::int64_t cols, const char* what);

}  // namespace halfscope::deconv::detail::cudab
