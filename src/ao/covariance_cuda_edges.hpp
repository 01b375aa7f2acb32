// Internal pieces of the GPU covariance generator shared by covariance_cuda.cu and
// covariance_cuda_edges.cu (CUDA translation units only): device copies of host vectors, the
// target checks and the edge-point path (kernels/covariance_edges.cuh) of the direct sensor pairs
// whose lenslet arrays are both unrotated.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "ao/covariance_cuda.hpp"
#include "ao/kernels/covariance_elements.cuh"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"

namespace halfscope::ao::detail {

/// A host vector copied to stream-ordered device scratch.
template <class T>
class DeviceCopy {
 public:
  DeviceCopy(const std::vector<T>& v, cudaStream_t stream)
      : scratch_(static_cast<std::int64_t>(v.size() * sizeof(T)) + 16, stream) {
    if (!v.empty())
      HS_CUDA_CHECK(cudaMemcpyAsync(scratch_.get(), v.data(), v.size() * sizeof(T),
                                    cudaMemcpyHostToDevice, stream));
  }
  [[nodiscard]] const T* get() const noexcept { return scratch_.as<T>(); }

 private:
  cuda::StreamScratch scratch_;
};

/// Throws InvalidInput unless `t` is a rows x cols, f32 / f64 device target the slope maps can
/// address.
void check_covariance_target(const CovariancePlan& plan, const CovarianceTarget& t,
                             std::int64_t rows, std::int64_t cols);

/// The distinct x-edge and y-edge points (covariance_edges.cuh) of every sensor that can use the
/// edge-point path: unrotated lenslet array (rotation exactly 0, as the CPU backend requires) with
/// grid indices in [0, grid). Points are in the pupil (m), sensor by sensor.
struct EdgeSensors {
  std::vector<char> ok;                                          // per plan sensor
  std::vector<std::int64_t> x_begin, x_count, y_begin, y_count;  // per sensor, into the points
  std::vector<double> xe_x, xe_y, ye_x, ye_y;                    // x-edge / y-edge points
  std::vector<int4> edges;  // per plan subaperture: (left, right, bottom, top), sensor-local
};

/// Builds the edge points of the plan's sensors (those not `ok` have none).
[[nodiscard]] EdgeSensors edge_sensors(const CovariancePlan& plan);

/// Writes every stored element of the ordered blocks (row sensor, column sensor) of the unordered
/// pairs `pairs` (a < b, both `ok`), pair by pair: the four tables into one reused scratch buffer,
/// then the gathers. `row_sensors` / `col_sensors` are the plan sensors along each side of the
/// target in slope order. Returns the device scratch it used (bytes).
std::int64_t covariance_edge_pairs(const CovariancePlan& plan, const EdgeSensors& es,
                                   const std::vector<int2>& pairs,
                                   const std::vector<int>& row_sensors,
                                   const std::vector<int>& col_sensors, const CovKernelArgs& args,
                                   const CovOutput& out, bool f64, cudaStream_t stream);

}  // namespace halfscope::ao::detail
