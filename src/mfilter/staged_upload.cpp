// Host -> device copies through pinned staging on several host threads (staged_upload.hpp).
#include "mfilter/staged_upload.hpp"

#if HALFSCOPE_WITH_CUDA

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include "core/host_threads.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/pinned_pool.hpp"

namespace halfscope::mfilter {

namespace {

// Each thread's pinned blocks: large enough to amortize a DMA's start, small enough that the
// cache holds every thread's pair (16 threads x 2 x 8 MiB = 256 MiB of its 1 GiB).
constexpr std::int64_t kBlockBytes = std::int64_t{8} << 20;
// Parts start on this boundary, so every DMA but the last of a part moves whole pages.
constexpr std::int64_t kPartAlign = std::int64_t{64} << 10;

}  // namespace

void upload_staged(void* dst, const void* src, std::int64_t bytes, int threads) {
  if (bytes <= 0) return;
  const int device = cuda::current_device();
  const std::int64_t units = (bytes + kPartAlign - 1) / kPartAlign;
  const auto n = static_cast<std::size_t>(std::clamp<std::int64_t>(threads, 1, units));
  // One stream for all the threads: the copies share one DMA engine anyway, and creating a stream
  // per thread cost 2.5 ms each when two devices' threads created theirs at once (the driver
  // serializes it).
  const cuda::Stream stream;
  const auto errors = halfscope::detail::on_threads(n, [&](std::size_t i) {
    HS_CUDA_CHECK(cudaSetDevice(device));
    const auto k = static_cast<std::int64_t>(i), parts = static_cast<std::int64_t>(n);
    const std::int64_t begin = std::min(bytes, units * k / parts * kPartAlign);
    const std::int64_t end = std::min(bytes, units * (k + 1) / parts * kPartAlign);
    const std::array<std::shared_ptr<Buffer>, 2> stage{acquire_pinned(kBlockBytes),
                                                       acquire_pinned(kBlockBytes)};
    const std::array<cuda::Event, 2> copied;
    int j = 0;
    try {
      for (std::int64_t at = begin; at < end; at += kBlockBytes, j ^= 1) {
        const auto m = static_cast<std::size_t>(std::min(kBlockBytes, end - at));
        // The block's previous DMA must be done before it is filled again (a never-recorded
        // event counts as complete).
        HS_CUDA_CHECK(cudaEventSynchronize(copied[j].get()));
        std::memcpy(stage[j]->data(), static_cast<const std::byte*>(src) + at, m);
        HS_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(dst) + at, stage[j]->data(), m,
                                      cudaMemcpyHostToDevice, stream.get()));
        copied[j].record(stream.get());
      }
    } catch (...) {
      // The blocks go back to the cache only after their DMAs, even when one failed.
      if (cudaStreamSynchronize(stream.get()) != cudaSuccess) (void)cudaGetLastError();
      throw;
    }
    // This thread's last DMA (the stream may still hold other threads' later copies).
    HS_CUDA_CHECK(cudaEventSynchronize(copied[j ^ 1].get()));
  });
  stream.synchronize();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

int staging_threads(int devices) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(hardware / std::max(1, devices), 1, 8);
}

}  // namespace halfscope::mfilter

#endif  // HALFSCOPE_WITH_CUDA
