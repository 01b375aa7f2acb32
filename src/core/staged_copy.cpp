// Copies between pageable host memory and a device through pinned staging on several host
// threads (staged_copy.hpp).
#include "core/staged_copy.hpp"

#if HALFSCOPE_WITH_CUDA

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include "core/host_threads.hpp"
#include "core/pinned_pool.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::cuda {

namespace {

// Each thread's pinned blocks: large enough to amortize a DMA's start, small enough that the
// cache holds every thread's pair (16 threads x 2 x 8 MiB = 256 MiB of its 1 GiB).
constexpr std::int64_t kBlockBytes = std::int64_t{8} << 20;
// Parts start on this boundary, so every DMA but the last of a part moves whole pages.
constexpr std::int64_t kPartAlign = std::int64_t{64} << 10;

}  // namespace

namespace {

// Runs `copy_part(begin, end, stream)` for contiguous parts of [0, bytes) on up to `threads` host
// threads (each with `device` current), parts aligned to kPartAlign; one stream for all the
// threads: the copies share one DMA engine anyway, and creating a stream per thread cost 2.5 ms
// each when two devices' threads created theirs at once (the driver serializes it).
template <class CopyPart>
void on_parts(std::int64_t bytes, int threads, CopyPart copy_part) {
  if (bytes <= 0) return;
  const int device = current_device();
  const std::int64_t units = (bytes + kPartAlign - 1) / kPartAlign;
  const auto n = static_cast<std::size_t>(std::clamp<std::int64_t>(threads, 1, units));
  const Stream stream;
  const auto errors = halfscope::detail::on_threads(n, [&](std::size_t i) {
    HS_CUDA_CHECK(cudaSetDevice(device));
    const auto k = static_cast<std::int64_t>(i), parts = static_cast<std::int64_t>(n);
    const std::int64_t begin = std::min(bytes, units * k / parts * kPartAlign);
    const std::int64_t end = std::min(bytes, units * (k + 1) / parts * kPartAlign);
    try {
      copy_part(begin, end, stream.get());
    } catch (...) {
      // The blocks go back to the cache only after their DMAs, even when one failed.
      if (cudaStreamSynchronize(stream.get()) != cudaSuccess) (void)cudaGetLastError();
      throw;
    }
  });
  stream.synchronize();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void upload_staged(void* dst, const void* src, std::int64_t bytes, int threads) {
  on_parts(bytes, threads, [&](std::int64_t begin, std::int64_t end, cudaStream_t stream) {
    const std::array<std::shared_ptr<Buffer>, 2> stage{acquire_pinned(kBlockBytes),
                                                       acquire_pinned(kBlockBytes)};
    const std::array<Event, 2> copied;
    int j = 0;
    for (std::int64_t at = begin; at < end; at += kBlockBytes, j ^= 1) {
      const auto m = static_cast<std::size_t>(std::min(kBlockBytes, end - at));
      // The block's previous DMA must be done before it is filled again (a never-recorded
      // event counts as complete).
      HS_CUDA_CHECK(cudaEventSynchronize(copied[j].get()));
      std::memcpy(stage[j]->data(), static_cast<const std::byte*>(src) + at, m);
      HS_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(dst) + at, stage[j]->data(), m,
                                    cudaMemcpyHostToDevice, stream));
      copied[j].record(stream);
    }
    // This thread's last DMA (the stream may still hold other threads' later copies).
    HS_CUDA_CHECK(cudaEventSynchronize(copied[j ^ 1].get()));
  });
}

void download_staged(void* dst, const void* src, std::int64_t bytes, int threads) {
  on_parts(bytes, threads, [&](std::int64_t begin, std::int64_t end, cudaStream_t stream) {
    const std::array<std::shared_ptr<Buffer>, 2> stage{acquire_pinned(kBlockBytes),
                                                       acquire_pinned(kBlockBytes)};
    const std::array<Event, 2> copied;
    // Block b's DMA goes into stage[b % 2]; it is copied out while block b + 1's DMA runs.
    const auto copy_out = [&](std::int64_t at, int j) {
      HS_CUDA_CHECK(cudaEventSynchronize(copied[j].get()));
      std::memcpy(static_cast<std::byte*>(dst) + at, stage[j]->data(),
                  static_cast<std::size_t>(std::min(kBlockBytes, end - at)));
    };
    int j = 0;
    for (std::int64_t at = begin; at < end; at += kBlockBytes, j ^= 1) {
      const auto m = static_cast<std::size_t>(std::min(kBlockBytes, end - at));
      HS_CUDA_CHECK(cudaMemcpyAsync(stage[j]->data(), static_cast<const std::byte*>(src) + at, m,
                                    cudaMemcpyDeviceToHost, stream));
      copied[j].record(stream);
      if (at > begin) copy_out(at - kBlockBytes, j ^ 1);
    }
    if (end > begin) copy_out(begin + (end - begin - 1) / kBlockBytes * kBlockBytes, j ^ 1);
  });
}

int staging_threads(int devices) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(hardware / std::max(1, devices), 1, 8);
}

}  // namespace halfscope::cuda

#endif  // HALFSCOPE_WITH_CUDA
