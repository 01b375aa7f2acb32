// A GPU rank's copy of the factor and its solve (rank_solve.hpp).
#include "linalg/rank_solve.hpp"

#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include <future>

#include "core/staged_copy.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "linalg/solve_cuda.hpp"
#endif

namespace halfscope::linalg::detail {

#if HALFSCOPE_WITH_CUDA

namespace {

class CudaFactor final : public DeviceFactor {
 public:
  CudaFactor(int device, const TileLayout& layout, int threads)
      : device_(device), threads_(threads), l_(allocate(device, layout)) {}

  // A copy still running reads the caller's buffers and writes l_: it must end before either
  // goes (its error no longer matters then).
  ~CudaFactor() override {
    if (pending_.valid()) pending_.wait();
  }
  CudaFactor(const CudaFactor&) = delete;
  CudaFactor& operator=(const CudaFactor&) = delete;

  void load_column(std::int64_t k, const std::vector<const float*>& tiles) override {
    wait();
    const TileLayout& layout = l_.layout;
    // Runs of tiles contiguous both in the caller's buffer and in the column (a 1 x Q grid's
    // panel is one run), each one staged copy.
    std::vector<Run> runs;
    const std::int64_t w = layout.tile_width(k);
    for (std::int64_t i = k; i < layout.tile_rows(); ++i) {
      const float* from = tiles[static_cast<std::size_t>(i - k)];
      const std::int64_t at = layout.tile_offset(i, k), count = layout.tile_height(i) * w;
      if (!runs.empty() && runs.back().from + runs.back().count == from &&
          runs.back().at + runs.back().count == at)
        runs.back().count += count;
      else
        runs.push_back({from, at, count});
    }
    pending_ = std::async(std::launch::async, [this, runs = std::move(runs)] {
      HS_CUDA_CHECK(cudaSetDevice(device_));
      float* base = l_.storage.data_as<float>();
      for (const Run& run : runs)
        cuda::upload_staged(base + run.at, run.from,
                            run.count * static_cast<std::int64_t>(sizeof(float)), threads_);
    });
  }

  void solve(Array& rows, const std::vector<GemmVariant>& variants) override {
    wait();
    const cuda::DeviceGuard restore;
    HS_CUDA_CHECK(cudaSetDevice(device_));
    if (rows.on_device()) {
      if (cuda::device_of(rows.data()) != device_)
        throw InvalidInput("MPI solve: b: a GPU rank's rows must be on its CUDA device " +
                           std::to_string(device_) + ", found device " +
                           std::to_string(cuda::device_of(rows.data())));
      HS_CUDA_CHECK(cudaDeviceSynchronize());  // rows written on any stream of the device
      solve_right_cuda(l_, rows, variants);
      return;
    }
    Array b(DType::f32, rows.shape(), Memory::device);
    cuda::upload_staged(b.data(), rows.data(), b.nbytes(), threads_);
    solve_right_cuda(l_, b, variants);
    cuda::download_staged(rows.data(), b.data(), b.nbytes(), threads_);
  }

 private:
  struct Run {
    const float* from;
    std::int64_t at, count;
  };

  static TileMatrix allocate(int device, const TileLayout& layout) {
    const cuda::DeviceGuard restore;
    HS_CUDA_CHECK(cudaSetDevice(device));
    try {
      return TileMatrix(layout, DType::f32, Memory::device);
    } catch (const CudaError& e) {
      throw CudaError("GPU rank on CUDA device " + std::to_string(device) +
                      ": no room for its copy of the factor (" +
                      std::to_string(layout.element_count() * 4) + " bytes): " + e.what());
    }
  }

  void wait() {
    if (pending_.valid()) pending_.get();  // rethrows the copy's error
  }

  int device_, threads_;
  TileMatrix l_;
  std::future<void> pending_;
};

}  // namespace

std::unique_ptr<DeviceFactor> make_device_factor(int device, const TileLayout& layout,
                                                 int threads) {
  return std::make_unique<CudaFactor>(device, layout, threads);
}

#else

std::unique_ptr<DeviceFactor> make_device_factor(int device, const TileLayout&, int) {
  throw Unsupported("MPI solve: a GPU rank (CUDA device " + std::to_string(device) +
                    ") in a build without CUDA");
}

#endif

}  // namespace halfscope::linalg::detail
