// The GPU path of matched filtering: uploads, time chunks sized from free device memory, the
// backend calls of backends.hpp, and detection on the device. Host data are streamed through in
// time chunks (chunking.hpp), each a self-contained Problem: when one chunk holds everything it is
// copied straight from the caller's memory; otherwise two pipeline slots (stream, device buffers,
// pinned staging) alternate so the upload, compute and download of consecutive chunks overlap.
// Device data are computed in place in one Problem with the result on the device.
#include "halfscope/config.hpp"

#if HALFSCOPE_WITH_CUDA

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pinned_pool.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/chunking.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mfilter {

namespace {

std::atomic<std::int64_t> g_chunk_override{0};
std::atomic<std::int64_t> g_detect_chunk_override{0};

// Correlation times per time chunk of a detection with an absolute threshold. A fixed count, not
// one sized from free memory, so a call cuts time the same way on any device and in every group
// of a call spread over devices (the stack's rounding depends on where chunks start, so their
// detections then equal one device's bit for bit); 2^18 holds each chunk's stack in 1 GiB per
// 1000 templates (the whole day's stack of the network case was 17 GB) while the per-chunk work
// (window statistics, launches, the candidates' search) stays near 1 % of a chunk's kernels.
inline constexpr std::int64_t kDetectChunkCorrelations = std::int64_t{1} << 18;

void call_backend(const Prepared& p, const DeviceProblem& dp) {
  switch (p.method) {
    case MfMethod::Naive:
      return naive_cuda(dp);
    case MfMethod::Cublas1:
      return cublas_cuda(dp, 1);
    case MfMethod::Cublas2:
      return cublas_cuda(dp, 2);
    case MfMethod::Cublas3:
      return cublas_cuda(dp, 3);
    case MfMethod::Cublas4:
      return cublas_cuda(dp, 4);
    case MfMethod::FFT:
      return fft_cuda(dp);
    case MfMethod::Tensor:
      return tensor_cuda(dp, p.precision);
    default:
      break;
  }
  throw Unsupported("matched_filter: method " + std::string(mf_method_name(p.method)) +
                    " has no GPU backend");
}

// Device bytes one correlation time of a chunk costs, all buffers of the call counted: the data
// (step samples per channel), the window statistics (inverse norm and mean per sample), the output
// column, and the method's own working set: the explicit Hankel observation matrix of the cuBLAS
// variants (K samples per window, FP32 and an FP16 copy, and the T x n_corr GEMM result) and
// cuFFT's complex spectra (about 4 floats per sample and channel, plus one per output).
std::int64_t bytes_per_correlation(const Prepared& p) {
  const Dims& d = p.dims;
  const std::int64_t rows = d.network_sum ? d.templates : d.templates * d.channels;
  std::int64_t b = 4 * d.channels * d.step * 3 + 4 * rows;
  switch (p.method) {
    case MfMethod::Cublas1:
    case MfMethod::Cublas2:
    case MfMethod::Cublas3:
    case MfMethod::Cublas4:
      b += d.channels * (6 * d.length + 4 * d.templates);
      break;
    case MfMethod::FFT:
      b += 4 * d.channels * d.step * 4 + 8 * rows;
      break;
    default:
      break;
  }
  return b;
}

// Correlation times per chunk: a third of the free device memory (the rest stays for the
// backend's scratch, the pool's fragmentation and other work on the device), divided among the
// processes sharing the device (Prepared::device_share), at least one. A shortage is a runtime
// condition of this device (exit 1), not bad input.
std::int64_t chunk_correlations(const Prepared& p, std::int64_t fixed_bytes, std::int64_t spread) {
  if (const std::int64_t forced = g_chunk_override.load(); forced > 0) return forced;
  std::size_t free_bytes = 0, total_bytes = 0;
  HS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const auto share = static_cast<std::size_t>(std::max(1, p.device_share));
  const std::int64_t budget = static_cast<std::int64_t>(free_bytes / 3 / share) - fixed_bytes;
  const std::int64_t per = bytes_per_correlation(p);
  if (budget < per)
    throw CudaError("matched_filter: " + std::to_string(free_bytes >> 20) +
                    " MiB of free device memory (a third of it usable" +
                    (share > 1 ? ", shared by " + std::to_string(share) + " processes" : "") +
                    ") cannot hold the templates, "
                    "one correlation time and the " +
                    std::to_string(p.dims.length + spread) +
                    " samples (K = " + std::to_string(p.dims.length) + " plus the moveout spread " +
                    std::to_string(spread) + ") every chunk needs on each of " +
                    std::to_string(p.dims.channels) + " channels");
  return std::max<std::int64_t>(1, budget / per);
}

// Pinned staging per pipeline slot and direction is capped so that page-locking stays cheap
// (pinning costs about a second per GiB); chunks of this size already amortize launches.
inline constexpr std::int64_t kMaxStagingBytes = std::int64_t{256} << 20;

// The device copies every chunk shares: templates, weights and the channel offsets.
struct Shared {
  cuda::StreamScratch templates, weights, offsets;  // offsets: Dims::channel_offsets
  Shared(const Prepared& p, cudaStream_t s)
      : templates(p.templates.size() * 4, s),
        weights(static_cast<std::int64_t>(p.weights.size()) * 4, s),
        offsets(static_cast<std::int64_t>(p.channel_offsets.size()) * 8, s) {
    if (!p.channel_offsets.empty())
      HS_CUDA_CHECK(cudaMemcpyAsync(offsets.get(), p.channel_offsets.data(),
                                    p.channel_offsets.size() * 8, cudaMemcpyHostToDevice, s));
    HS_CUDA_CHECK(cudaMemcpyAsync(templates.get(), p.templates.data(),
                                  static_cast<std::size_t>(p.templates.size()) * 4,
                                  cudaMemcpyHostToDevice, s));
    HS_CUDA_CHECK(cudaMemcpyAsync(weights.get(), p.weights.data(), p.weights.size() * 4,
                                  cudaMemcpyHostToDevice, s));
  }
};

// One pipeline slot: a stream, the device buffers of one chunk (data, moveouts, output) and
// pinned staging for what goes up (data rows, then the chunk's moveouts) and comes down (the
// output). Two slots alternate, so one chunk's upload and the CPU's staging of the next overlap
// the other's compute and download. The destructor waits for the slot's work, so nothing is
// freed under a pending copy when a backend throws.
struct Slot {
  cuda::Stream stream;
  std::shared_ptr<Buffer> up, down;  // pinned; null on the single-chunk path
  std::optional<cuda::StreamScratch> data, out, moveouts;
  TimeChunk chunk;
  bool busy = false;
  // The caller's per-slot state (detection's candidate search): destroyed before the stream and
  // after the destructor has waited for the stream, so it may hold work queued on it.
  std::shared_ptr<void> state;
  Slot() = default;
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() {
    if (cudaStreamSynchronize(stream.get()) != cudaSuccess) (void)cudaGetLastError();
  }
};

DeviceProblem problem_of(const Prepared& p, const Shared& sh, const Slot& sl, const float* data,
                         float* out) {
  DeviceProblem dp;
  dp.dims = p.dims;
  dp.dims.samples = sl.chunk.samples();
  dp.dims.n_corr = sl.chunk.n_corr();
  dp.dims.channel_offsets = p.channel_offsets.empty() ? nullptr : sh.offsets.as<double>();
  dp.tile_spread_floor = p.tile_spread_floor;
  dp.template_group = p.template_group;
  dp.wgmma_aligned = p.wgmma_aligned;
  dp.wgmma_kp_floor = p.wgmma_kp_floor;
  dp.templates = sh.templates.as<float>();
  dp.data = data;
  dp.moveouts = sl.moveouts->as<std::int64_t>();
  dp.weights = sh.weights.as<float>();
  dp.out = out;
  dp.stream = sl.stream.get();
  return dp;
}

// Runs the backend over the time chunks of a host-data call (or of a device-data call, written
// to `device_out` when given). After each backend call `enqueue(chunk, device output, stream,
// pinned output staging or null, slot state)` queues what the caller needs on the slot's stream;
// once that stream has finished, `complete(chunk, staging, slot state)` runs on the host. The
// slot state (null at first) is the caller's, one per pipeline slot.
// `detect`: the output never leaves the device (no output staging, so its cap does not limit
// the chunks) and every chunk carries a one-correlation halo (chunking.hpp) for the peak search.
// `corr_cap` > 0 (detection with an absolute threshold) cuts time into chunks of exactly that
// many correlation times wherever memory allows, device data included (their chunks are copied
// on the device), so no stack has to be held whole.
template <class Enqueue, class Complete>
void for_each_chunk(const Prepared& p, float* device_out, bool detect, std::int64_t corr_cap,
                    const Enqueue& enqueue, const Complete& complete) {
  const Dims& d = p.dims;
  const std::int64_t rows = d.network_sum ? d.templates : d.templates * d.channels;
  const std::int64_t n_mo = static_cast<std::int64_t>(p.moveouts.size());
  const bool device_src = p.data_on_device;
  const bool capped = corr_cap > 0 && d.n_corr > corr_cap;
  // Declared before the slots so they are destroyed after them: a slot's destructor waits for
  // its kernels, which read `shared`.
  const cuda::Stream upload;
  const Shared shared(p, upload.get());
  HS_CUDA_CHECK(cudaStreamSynchronize(upload.get()));  // both slots read `shared`
  Slot slots[2];
  // The caller's device data may have been written on any stream, and prepare's upload is a
  // pageable cudaMemcpy on the legacy stream that can return before its DMA ends; the slot
  // streams are non-blocking, so nothing else orders them (the public API takes no stream).
  if (device_src) HS_CUDA_CHECK(cudaDeviceSynchronize());
  if (device_src && !capped) {
    Slot& sl = slots[0];
    const cudaStream_t s = sl.stream.get();
    sl.chunk = TimeChunk{0, d.n_corr, 0, d.samples};
    sl.moveouts.emplace(n_mo * 8, s);
    HS_CUDA_CHECK(cudaMemcpyAsync(sl.moveouts->get(), p.moveouts.data(),
                                  static_cast<std::size_t>(n_mo) * 8, cudaMemcpyHostToDevice, s));
    if (!device_out) sl.out.emplace(rows * d.n_corr * 4, s);
    float* out = device_out ? device_out : sl.out->as<float>();
    call_backend(p, problem_of(p, shared, sl, p.data.data_as<float>(), out));
    enqueue(sl.chunk, static_cast<const float*>(out), s, static_cast<float*>(nullptr), sl.state);
    HS_CUDA_CHECK(cudaStreamSynchronize(s));
    complete(sl.chunk, static_cast<const float*>(nullptr), sl.state);
    return;
  }
  assert(!device_src || (detect && !device_out));  // only detection chunks device data
  // A group of a call over several devices plans with the whole call's range (Prepared).
  const auto [mo_min, mo_max] =
      p.chunk_moveout_range ? *p.chunk_moveout_range : contributing_moveout_range(p);
  const std::int64_t spread = mo_max - mo_min;
  const std::int64_t halo = detect ? 1 : 0;
  const std::int64_t fixed = p.templates.size() * 4 + 4 * d.channels * (d.length + spread);
  std::int64_t max_corr = chunk_correlations(p, fixed, spread);
  // One chunk: pageable copies, nothing to overlap.
  const bool single = !device_src && !capped && max_corr >= d.n_corr;
  if (!single && g_chunk_override.load() == 0) {
    // Two slots share the budget and each chunk computes its halo too; host staging stays under
    // its cap (uploads only in detection: its output stays on the device; device data are not
    // staged).
    const std::int64_t per_corr_staged =
        device_src ? 0 : 4 * (detect ? d.channels * d.step : std::max(d.channels * d.step, rows));
    std::int64_t fit = max_corr / 2;
    if (per_corr_staged > 0) fit = std::min(fit, kMaxStagingBytes / per_corr_staged);
    max_corr = std::max<std::int64_t>(1, fit - 2 * halo);
    if (corr_cap > 0) max_corr = std::min(max_corr, corr_cap);
  }
  const auto chunks = plan_time_chunks(d.samples, d.length, d.step, d.n_corr, mo_min, mo_max,
                                       max_corr, single ? 0 : halo);
  std::int64_t max_samples = 0, max_n = 0;
  for (const auto& ch : chunks) {
    max_samples = std::max(max_samples, ch.samples());
    max_n = std::max(max_n, ch.n_corr());
  }
  // Moveouts follow the data rows in the upload staging, 8-byte aligned (device data: moveouts
  // only).
  const std::int64_t mo_offset = device_src ? 0 : (d.channels * max_samples * 4 + 7) / 8 * 8;
  for (Slot& sl : slots) {
    sl.data.emplace(d.channels * max_samples * 4, sl.stream.get());
    sl.out.emplace(rows * max_n * 4, sl.stream.get());
    sl.moveouts.emplace(n_mo * 8, sl.stream.get());
    if (!single) {
      sl.up = cuda::acquire_pinned(mo_offset + n_mo * 8);  // cached across calls (pinned_pool.hpp)
      if (!detect) sl.down = cuda::acquire_pinned(rows * max_n * 4);
    }
    if (single) break;
  }
  const float* source = p.data.data_as<float>();
  std::vector<std::int64_t> mo_pageable(static_cast<std::size_t>(n_mo));
  for (std::size_t j = 0; j < chunks.size(); ++j) {
    Slot& sl = slots[single ? 0 : j % 2];
    const cudaStream_t s = sl.stream.get();
    if (sl.busy) {  // the slot's previous chunk: wait, hand it over, reuse the buffers
      HS_CUDA_CHECK(cudaStreamSynchronize(s));
      complete(sl.chunk, sl.down ? static_cast<const float*>(sl.down->data()) : nullptr, sl.state);
      sl.busy = false;
    }
    const TimeChunk& ch = chunks[j];
    // plan_time_chunks widens every chunk to (n_corr - 1) * step + K <= L samples.
    assert(ch.samples() >= d.length);
    sl.chunk = ch;
    const std::size_t row_bytes = static_cast<std::size_t>(ch.samples()) * 4;
    std::int64_t* mo =
        sl.up ? reinterpret_cast<std::int64_t*>(static_cast<std::byte*>(sl.up->data()) + mo_offset)
              : mo_pageable.data();
    for (std::int64_t k = 0; k < n_mo; ++k)
      mo[k] = chunk_moveout(p.moveouts[static_cast<std::size_t>(k)], ch, d.step);
    if (device_src || !sl.up) {  // device rows, or pageable host rows in the one chunk
      HS_CUDA_CHECK(cudaMemcpy2DAsync(
          sl.data->get(), row_bytes, source + ch.sample_begin,
          static_cast<std::size_t>(d.samples) * 4, row_bytes, static_cast<std::size_t>(d.channels),
          device_src ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, s));
    } else {
      auto* stage = static_cast<float*>(sl.up->data());
      // Channels in parallel: one thread copies pageable memory at 6-9 GB/s, and a chunk of the
      // network case (30 channels, 31 MB) took a third of its kernels' time in mixed.
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < d.channels; ++c)
        std::copy_n(source + c * d.samples + ch.sample_begin, ch.samples(),
                    stage + c * ch.samples());
      HS_CUDA_CHECK(cudaMemcpyAsync(sl.data->get(), stage, row_bytes * d.channels,
                                    cudaMemcpyHostToDevice, s));
    }
    HS_CUDA_CHECK(cudaMemcpyAsync(sl.moveouts->get(), mo, static_cast<std::size_t>(n_mo) * 8,
                                  cudaMemcpyHostToDevice, s));
    call_backend(p, problem_of(p, shared, sl, sl.data->as<float>(), sl.out->as<float>()));
    enqueue(ch, static_cast<const float*>(sl.out->as<float>()), s,
            sl.down ? static_cast<float*>(sl.down->data()) : nullptr, sl.state);
    sl.busy = true;
    if (!sl.up) HS_CUDA_CHECK(cudaStreamSynchronize(s));  // pageable `mo` is read by now
  }
  for (Slot& sl : slots)
    if (sl.busy) {
      HS_CUDA_CHECK(cudaStreamSynchronize(sl.stream.get()));
      complete(sl.chunk, sl.down ? static_cast<const float*>(sl.down->data()) : nullptr, sl.state);
      sl.busy = false;
    }
}

}  // namespace

void set_chunk_correlations_for_testing(std::int64_t max_corr) {
  g_chunk_override.store(max_corr);
}

bool chunks_forced_for_testing() {
  return g_chunk_override.load() > 0;
}

void set_detect_chunk_for_testing(std::int64_t max_corr) {
  g_detect_chunk_override.store(max_corr);
}

std::int64_t detect_chunk_correlations() {
  const std::int64_t forced = g_detect_chunk_override.load();
  return forced > 0 ? forced : kDetectChunkCorrelations;
}

// Leaving channels out changes no result: a window inside a chunk is inside the whole data
// (chunking.hpp), so an excluded channel stays outside. Moveouts were clamped to +-(L + 1) by
// prepare.
std::pair<std::int64_t, std::int64_t> contributing_moveout_range(const Prepared& p) {
  const Dims& d = p.dims;
  std::int64_t lo = 0, hi = 0;
  bool any = false;
  for (std::size_t j = 0; j < p.moveouts.size(); ++j) {
    const std::int64_t m = p.moveouts[j];
    if (d.network_sum && p.weights[j] == 0.0f) continue;
    if (m > d.samples - d.length || (d.n_corr - 1) * d.step + m < 0) continue;
    lo = any ? std::min(lo, m) : m;
    hi = any ? std::max(hi, m) : m;
    any = true;
  }
  return {lo, hi};
}

void run_cuda_into(const Prepared& p, float* host) {
  const Dims& d = p.dims;
  const std::int64_t rows = d.network_sum ? d.templates : d.templates * d.channels;
  for_each_chunk(
      p, nullptr, false, 0,
      [&](const TimeChunk& ch, const float* out, cudaStream_t s, float* staging,
          std::shared_ptr<void>&) {
        const std::size_t row_bytes = static_cast<std::size_t>(ch.n_corr()) * 4;
        if (staging) {  // contiguous download into pinned memory; scattered in `complete`
          HS_CUDA_CHECK(cudaMemcpyAsync(staging, out, row_bytes * static_cast<std::size_t>(rows),
                                        cudaMemcpyDeviceToHost, s));
        } else {  // rows of the chunk into their columns of the (rows, n_corr) result
          HS_CUDA_CHECK(cudaMemcpy2DAsync(
              host + ch.corr_begin, static_cast<std::size_t>(d.n_corr) * 4, out, row_bytes,
              row_bytes, static_cast<std::size_t>(rows), cudaMemcpyDeviceToHost, s));
        }
      },
      [&](const TimeChunk& ch, const float* staging, std::shared_ptr<void>&) {
        if (!staging) return;
        for (std::int64_t r = 0; r < rows; ++r)
          std::copy_n(staging + r * ch.n_corr(), ch.n_corr(), host + r * d.n_corr + ch.corr_begin);
      });
}

Array run_cuda(const Prepared& p) {
  if (p.data_on_device) {
    Array result(DType::f32, p.out_shape, Memory::device);  // the backend writes it in place
    for_each_chunk(
        p, result.data_as<float>(), false, 0,
        [](const TimeChunk&, const float*, cudaStream_t, float*, std::shared_ptr<void>&) {},
        [](const TimeChunk&, const float*, std::shared_ptr<void>&) {});
    return result;
  }
  Array result = Array::zeros(DType::f32, p.out_shape);
  run_cuda_into(p, result.data_as<float>());
  return result;
}

namespace {

// The candidate search of one pipeline slot: local maxima of |x| above each row's threshold
// (CandidateSearch with a separation of 1, so no candidate that the exact declustering would
// keep is lost), queued behind a chunk's kernels and collected once its stream has finished.
// A MAD threshold is computed on the device too, so queuing a chunk's search never waits for
// its stack: the host goes on staging the next chunk while this one computes.
class ChunkSearch {
 public:
  ChunkSearch(std::int64_t templates, const DetectOptions& o, cudaStream_t s)
      : o_(o),
        stream_(s),
        thr_(static_cast<std::size_t>(templates), o.threshold),
        thr_dev_(Buffer::allocate(std::max<std::int64_t>(templates, 1) * 8, Memory::device)),
        search_(s) {
    if (o.type == ThresholdType::Mad) {
      med_dev_ = Buffer::allocate(std::max<std::int64_t>(templates, 1) * 8, Memory::device);
      med_host_ = cuda::acquire_pinned(std::max<std::int64_t>(templates, 1) * 8);
    } else {
      upload_thresholds();  // absolute thresholds are the same for every chunk: uploaded once
    }
  }

  // Queues the search of `stack` (T rows of n correlation times) on the stream. A MAD threshold
  // is the median of each row of this stack: computed behind it, read back in collect().
  void launch(const float* stack, std::int64_t n) {
    const auto T = static_cast<std::int64_t>(thr_.size());
    auto* thresholds = static_cast<double*>(thr_dev_->data());
    if (o_.type == ThresholdType::Mad) {
      stack_abs_medians_enqueue(stack, T, n, static_cast<double*>(med_dev_->data()), o_.threshold,
                                thresholds, stream_);
      HS_CUDA_CHECK(cudaMemcpyAsync(med_host_->data(), med_dev_->data(),
                                    static_cast<std::size_t>(T) * 8, cudaMemcpyDeviceToHost,
                                    stream_));
    }
    search_.launch(stack, T, n, thresholds, 1);
  }

  // After the stream has finished: the candidates of a stack of n correlation times starting at
  // global index `corr_begin`, of which the first `halo_before` and the last `halo_after` belong
  // to neighbouring chunks. Those only serve as the true neighbours of this chunk's edge values
  // (a value on a rising slope at an edge is no local maximum); candidates there are left to
  // their own chunk. A zero MAD median is reported here, before the (then unbounded) candidates
  // are read.
  std::vector<Detection> collect(std::int64_t n, std::int64_t step, std::int64_t corr_begin,
                                 std::int64_t halo_before, std::int64_t halo_after) {
    if (o_.type == ThresholdType::Mad) {
      const auto* medians = static_cast<const double*>(med_host_->data());
      for (std::size_t t = 0; t < thr_.size(); ++t) {
        check_mad_median(medians[t], static_cast<std::int64_t>(t), n, o_);
        thr_[t] = o_.threshold * medians[t];  // what the device computed for the search
      }
    }
    std::vector<Detection> own;
    for (Detection& d : search_.collect()) {
      if (d.correlation_index < halo_before || d.correlation_index >= n - halo_after) continue;
      d.correlation_index += corr_begin;
      d.sample = d.correlation_index * step;
      d.threshold = thr_[static_cast<std::size_t>(d.template_index)];
      own.push_back(d);
    }
    return own;
  }

 private:
  // A copy on the legacy stream, not queued behind the slot's kernels (the slot streams do not
  // block on it), so the host never waits for a chunk here. A pageable cudaMemcpy returns once
  // `thr_` is staged but its DMA can still run: the slot's stream waits for the legacy stream
  // before its search reads the thresholds.
  void upload_thresholds() {
    HS_CUDA_CHECK(
        cudaMemcpy(thr_dev_->data(), thr_.data(), thr_.size() * 8, cudaMemcpyHostToDevice));
    const cuda::Event uploaded;
    uploaded.record(cudaStreamLegacy);
    HS_CUDA_CHECK(cudaStreamWaitEvent(stream_, uploaded.get(), 0));
  }

  DetectOptions o_;
  cudaStream_t stream_;
  std::vector<double> thr_;
  std::shared_ptr<Buffer> thr_dev_, med_dev_, med_host_;
  CandidateSearch search_;
};

std::vector<Detection> decluster_all(std::vector<Detection> c, std::int64_t T,
                                     std::int64_t separation) {
  std::vector<std::vector<Detection>> per(static_cast<std::size_t>(T));
  for (const Detection& d : c) per[static_cast<std::size_t>(d.template_index)].push_back(d);
  std::vector<Detection> out;
  for (auto& v : per) {
    auto kept = decluster(std::move(v), separation);
    out.insert(out.end(), kept.begin(), kept.end());
  }
  return out;
}

}  // namespace

std::vector<Detection> detect_device_stack(const float* stack, std::int64_t T, std::int64_t n,
                                           const DetectOptions& o, std::int64_t step,
                                           cudaStream_t s) {
  ChunkSearch search(T, o, s);
  search.launch(stack, n);
  HS_CUDA_CHECK(cudaStreamSynchronize(s));
  return decluster_all(search.collect(n, step, 0, 0, 0), T,
                       separation_in_correlations(o.min_separation, step));
}

std::vector<Detection> detect_candidates_cuda(const Prepared& p, const DetectOptions& o) {
  const std::int64_t T = p.dims.templates, step = p.dims.step;
  std::vector<Detection> all;
  // An absolute threshold is searched in chunks of kDetectChunkCorrelations. The MAD threshold
  // is taken over each chunk's stack, its halo included: over the whole row when one chunk holds
  // all the data, the default whenever it fits in device memory (the chunks are of equal size,
  // docs/mfilter.md). Each slot's search is collected before the slot takes its next chunk.
  const std::int64_t cap = o.type == ThresholdType::Absolute ? detect_chunk_correlations() : 0;
  for_each_chunk(
      p, nullptr, true, cap,
      [&](const TimeChunk& ch, const float* out, cudaStream_t s, float*,
          std::shared_ptr<void>& state) {
        if (!state) state = std::make_shared<ChunkSearch>(T, o, s);
        static_cast<ChunkSearch*>(state.get())->launch(out, ch.n_corr());
      },
      [&](const TimeChunk& ch, const float*, std::shared_ptr<void>& state) {
        auto c = static_cast<ChunkSearch*>(state.get())
                     ->collect(ch.n_corr(), step, ch.corr_begin, ch.halo_before, ch.halo_after);
        all.insert(all.end(), c.begin(), c.end());
      });
  return all;
}

std::vector<Detection> detect_cuda(const Prepared& p, const DetectOptions& o) {
  return decluster_all(detect_candidates_cuda(p, o), p.dims.templates,
                       separation_in_correlations(o.min_separation, p.dims.step));
}

}  // namespace halfscope::mfilter

#endif  // HALFSCOPE_WITH_CUDA
