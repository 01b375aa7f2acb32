// Detection on a device network stack (backends.hpp): exact per-row medians of |x| for the MAD
// threshold, and the candidate peaks above a per-row threshold, returned to the host, which does
// the final strongest-first declustering (kernels/detect.cuh has the algorithms). Only O(T)
// medians and the candidates cross the bus, never the stack. Also the gather of the detections'
// data windows, so that counting their channels never copies the whole data to the host.
#include <algorithm>
#include <string>
#include <vector>

#include "core/pinned_pool.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/baseline_tuning.hpp"
#include "mfilter/kernels/detect.cuh"

namespace halfscope::mfilter {

namespace {

void check_stack(std::int64_t templates, std::int64_t n_corr, const char* what) {
  if (templates < 0 || n_corr < 1)
    throw InvalidInput(std::string(what) +
                       ": expected a stack of T >= 0 rows of n_corr >= 1 values, found T = " +
                       std::to_string(templates) + ", n_corr = " + std::to_string(n_corr));
}

// Grid of the candidate search: y over rows, x over a row (a block per 8 x 256 elements, at
// most 1024 per row: neighbouring blocks read neighbouring stretches of the same rows).
dim3 row_grid(std::int64_t rows, std::int64_t n) {
  const std::int64_t bx =
      std::min<std::int64_t>((n + tuning::kThreads * 8 - 1) / (tuning::kThreads * 8), 1024);
  return dim3(static_cast<unsigned>(std::max<std::int64_t>(bx, 1)),
              static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
}

}  // namespace

void stack_abs_medians_enqueue(const float* stack, std::int64_t templates, std::int64_t n_corr,
                               double* medians, double factor, double* thresholds,
                               cudaStream_t stream) {
  check_stack(templates, n_corr, "stack_abs_medians_enqueue");
  if (templates == 0) return;
  using kernels::kRadixMaxBins;
  using kernels::RadixTarget;
  const std::int64_t targets = 2 * templates;
  // Stream-ordered scratch: freed behind the kernels, so nothing here waits for them.
  cuda::StreamScratch state(targets * static_cast<std::int64_t>(sizeof(RadixTarget)), stream);
  cuda::StreamScratch hist(targets * kRadixMaxBins * 8, stream);
  const int row_blocks = cuda::grid_blocks(templates, tuning::kThreads, 1);
  kernels::radix_init_kernel<<<row_blocks, tuning::kThreads, 0, stream>>>(templates, n_corr,
                                                                          state.as<RadixTarget>());
  HS_CHECK_LAUNCH();
  // At least 64 elements per thread, so clearing and flushing the block's bins stays small.
  const std::int64_t per_row = std::clamp<std::int64_t>(n_corr / (tuning::kThreads * 64), 1, 1024);
  const dim3 grid(static_cast<unsigned>(per_row),
                  static_cast<unsigned>(std::min<std::int64_t>(templates, 65535)));
  constexpr int kScanWarps = tuning::kThreads / 32;
  for (const kernels::RadixDigit digit : kernels::kRadixDigits) {
    HS_CUDA_CHECK(cudaMemsetAsync(hist.get(), 0, targets * kRadixMaxBins * 8, stream));
    kernels::radix_histogram_kernel<<<grid, tuning::kThreads, 0, stream>>>(
        stack, templates, n_corr, state.as<RadixTarget>(), digit, hist.as<unsigned long long>());
    HS_CHECK_LAUNCH();
    kernels::radix_scan_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(
                                     (templates + kScanWarps - 1) / kScanWarps, 65535)),
                                 tuning::kThreads, 0, stream>>>(
        templates, digit, hist.as<unsigned long long>(), state.as<RadixTarget>());
    HS_CHECK_LAUNCH();
  }
  kernels::radix_finish_kernel<<<row_blocks, tuning::kThreads, 0, stream>>>(
      templates, state.as<RadixTarget>(), factor, medians, thresholds);
  HS_CHECK_LAUNCH();
}

void stack_abs_medians_cuda(const float* stack, std::int64_t templates, std::int64_t n_corr,
                            double* medians, cudaStream_t stream) {
  check_stack(templates, n_corr, "stack_abs_medians_cuda");
  if (templates == 0) return;
  cuda::StreamScratch dev(templates * 8, stream);
  stack_abs_medians_enqueue(stack, templates, n_corr, dev.as<double>(), 0.0, nullptr, stream);
  HS_CUDA_CHECK(cudaMemcpyAsync(medians, dev.get(), static_cast<std::size_t>(templates) * 8,
                                cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `medians` may be pageable
}

struct CandidateSearch::State {
  cudaStream_t stream;
  std::shared_ptr<Buffer> count, out;  // device: the exact count, up to `capacity` candidates
  std::shared_ptr<Buffer> box;         // pinned: the count read back
  std::int64_t capacity = 0;
  // The queued search, kept for a rerun with more room.
  const float* stack = nullptr;
  std::int64_t templates = 0, n_corr = 0, separation = 0;
  const double* thresholds = nullptr;
  bool pending = false;

  void enqueue() {
    using kernels::Candidate;
    HS_CUDA_CHECK(cudaMemsetAsync(count->data(), 0, sizeof(unsigned long long), stream));
    kernels::candidates_kernel<<<row_grid(templates, n_corr), tuning::kThreads, 0, stream>>>(
        stack, templates, n_corr, thresholds, separation, static_cast<Candidate*>(out->data()),
        capacity, static_cast<unsigned long long*>(count->data()));
    HS_CHECK_LAUNCH();
    HS_CUDA_CHECK(cudaMemcpyAsync(box->data(), count->data(), sizeof(unsigned long long),
                                  cudaMemcpyDeviceToHost, stream));
  }
};

CandidateSearch::CandidateSearch(cudaStream_t stream) : s_(std::make_unique<State>()) {
  s_->stream = stream;
  s_->capacity = tuning::kCandidateCapacity;
  s_->count = Buffer::allocate(sizeof(unsigned long long), Memory::device);
  s_->out = Buffer::allocate(s_->capacity * static_cast<std::int64_t>(sizeof(kernels::Candidate)),
                             Memory::device);
  s_->box = cuda::acquire_pinned(sizeof(unsigned long long));  // cached across calls
}

CandidateSearch::~CandidateSearch() {
  // A search still queued (an exception between launch and collect) must not outlive its buffers.
  if (s_->pending && cudaStreamSynchronize(s_->stream) != cudaSuccess) (void)cudaGetLastError();
}

void CandidateSearch::launch(const float* stack, std::int64_t templates, std::int64_t n_corr,
                             const double* thresholds, std::int64_t min_separation) {
  check_stack(templates, n_corr, "CandidateSearch");
  if (min_separation < 0)
    throw InvalidInput("CandidateSearch: expected min_separation >= 0, found " +
                       std::to_string(min_separation));
  State& s = *s_;
  s.stack = stack;
  s.templates = templates;
  s.n_corr = n_corr;
  s.thresholds = thresholds;
  s.separation = min_separation;
  s.pending = templates > 0;
  if (s.pending) s.enqueue();
}

std::vector<Detection> CandidateSearch::collect() {
  using kernels::Candidate;
  State& s = *s_;
  if (!s.pending) return {};
  auto n = static_cast<std::int64_t>(*static_cast<const unsigned long long*>(s.box->data()));
  if (n > s.capacity) {  // the count is exact: rerun once with room for all of them
    s.capacity = n;
    s.out = Buffer::allocate(n * static_cast<std::int64_t>(sizeof(Candidate)), Memory::device);
    s.enqueue();
    HS_CUDA_CHECK(cudaStreamSynchronize(s.stream));
    n = static_cast<std::int64_t>(*static_cast<const unsigned long long*>(s.box->data()));
  }
  std::vector<Candidate> found(static_cast<std::size_t>(n));
  HS_CUDA_CHECK(cudaMemcpyAsync(found.data(), s.out->data(), found.size() * sizeof(Candidate),
                                cudaMemcpyDeviceToHost, s.stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  s.pending = false;
  // Atomic slots come in any order: sort by (template, time) so results are reproducible.
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.t != b.t ? a.t < b.t : a.i < b.i;
  });
  std::vector<Detection> result;
  result.reserve(found.size());
  for (const Candidate& c : found) {
    Detection d;
    d.template_index = c.t;
    d.correlation_index = c.i;
    d.value = c.value;
    result.push_back(d);  // threshold, sample (i * step) and channels_used are the caller's
  }
  return result;
}

std::vector<Detection> stack_candidates_cuda(const float* stack, std::int64_t templates,
                                             std::int64_t n_corr, const double* thresholds,
                                             std::int64_t min_separation, cudaStream_t stream) {
  CandidateSearch search(stream);
  search.launch(stack, templates, n_corr, thresholds, min_separation);  // checks the arguments
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<Detection> result = search.collect();
  if (result.empty()) return result;
  std::vector<double> thr(static_cast<std::size_t>(templates));
  HS_CUDA_CHECK(cudaMemcpyAsync(thr.data(), thresholds, thr.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (Detection& d : result) d.threshold = thr[static_cast<std::size_t>(d.template_index)];
  return result;
}

std::vector<float> gather_windows_cuda(const float* data, const std::vector<std::int64_t>& starts,
                                       std::int64_t length) {
  if (length < 1)
    throw InvalidInput("gather_windows_cuda: expected a window length >= 1, found " +
                       std::to_string(length));
  const auto windows = static_cast<std::int64_t>(starts.size());
  std::vector<float> out(static_cast<std::size_t>(windows * length));
  if (windows == 0) return out;
  // The data may have been written on any stream (the caller's, or prepare's legacy-stream
  // scaling, which does not wait), and this stream orders after none of them.
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  const cuda::Stream stream;
  const cudaStream_t s = stream.get();
  // Batches of at most 64 MiB of windows (and 65535 grid rows), so the scratch stays small
  // whatever the number of detections or the template length.
  const std::int64_t batch =
      std::clamp<std::int64_t>((std::int64_t{16} << 20) / length, 1, std::int64_t{65535});
  cuda::StreamScratch offsets(std::min(batch, windows) * 8, s);
  cuda::StreamScratch values(std::min(batch, windows) * length * 4, s);
  static_assert(sizeof(long long) == sizeof(std::int64_t));
  for (std::int64_t w0 = 0; w0 < windows; w0 += batch) {
    const std::int64_t n = std::min(batch, windows - w0);
    HS_CUDA_CHECK(cudaMemcpyAsync(offsets.get(), starts.data() + w0,
                                  static_cast<std::size_t>(n) * 8, cudaMemcpyHostToDevice, s));
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(
                        (length + tuning::kThreads - 1) / tuning::kThreads, 64)),
                    static_cast<unsigned>(n));
    kernels::gather_windows_kernel<<<grid, tuning::kThreads, 0, s>>>(data, offsets.as<long long>(),
                                                                     n, length, values.as<float>());
    HS_CHECK_LAUNCH();
    HS_CUDA_CHECK(cudaMemcpyAsync(out.data() + w0 * length, values.get(),
                                  static_cast<std::size_t>(n * length) * 4, cudaMemcpyDeviceToHost,
                                  s));
    HS_CUDA_CHECK(cudaStreamSynchronize(s));  // the pageable starts and the scratch are reused
  }
  return out;
}

}  // namespace halfscope::mfilter
