// Detection on a device network stack (backends.hpp): exact per-row medians of |x| for the MAD
// threshold, and the candidate peaks above a per-row threshold, returned to the host, which does
// the final strongest-first declustering (kernels/detect.cuh has the algorithms). Only O(T)
// medians and the candidates cross the bus, never the stack.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

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

dim3 row_grid(std::int64_t rows, std::int64_t n) {
  const std::int64_t bx =
      std::min<std::int64_t>((n + tuning::kThreads * 8 - 1) / (tuning::kThreads * 8), 1024);
  return dim3(static_cast<unsigned>(std::max<std::int64_t>(bx, 1)),
              static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
}

}  // namespace

void stack_abs_medians_cuda(const float* stack, std::int64_t templates, std::int64_t n_corr,
                            double* medians, cudaStream_t stream) {
  check_stack(templates, n_corr, "stack_abs_medians_cuda");
  if (templates == 0) return;
  using kernels::kRadixBins;
  using kernels::RadixTarget;
  const std::int64_t targets = 2 * templates;
  std::vector<RadixTarget> init(static_cast<std::size_t>(targets));
  for (std::int64_t t = 0; t < templates; ++t) {
    init[2 * t] = {0u, static_cast<long long>((n_corr - 1) / 2)};
    init[2 * t + 1] = {0u, static_cast<long long>(n_corr / 2)};
  }
  cuda::StreamScratch state(targets * static_cast<std::int64_t>(sizeof(RadixTarget)), stream);
  cuda::StreamScratch hist(targets * kRadixBins * 8, stream);
  HS_CUDA_CHECK(cudaMemcpyAsync(state.get(), init.data(), init.size() * sizeof(RadixTarget),
                                cudaMemcpyHostToDevice, stream));
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    const unsigned int known = pass == 0 ? 0u : ~0u << (32 - 8 * pass);
    HS_CUDA_CHECK(cudaMemsetAsync(hist.get(), 0, targets * kRadixBins * 8, stream));
    kernels::radix_histogram_kernel<<<row_grid(templates, n_corr), tuning::kThreads, 0, stream>>>(
        stack, templates, n_corr, state.as<RadixTarget>(), known, shift,
        hist.as<unsigned long long>());
    HS_CHECK_LAUNCH();
    kernels::radix_scan_kernel<<<cuda::grid_blocks(targets, tuning::kThreads, 1), tuning::kThreads,
                                 0, stream>>>(targets, shift, hist.as<unsigned long long>(),
                                              state.as<RadixTarget>());
    HS_CHECK_LAUNCH();
  }
  // The host copy must not wait on `init` going out of scope first: synchronise before return.
  HS_CUDA_CHECK(cudaMemcpyAsync(init.data(), state.get(), init.size() * sizeof(RadixTarget),
                                cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::int64_t t = 0; t < templates; ++t) {
    float lo = 0, hi = 0;
    const unsigned int blo = init[2 * t].prefix, bhi = init[2 * t + 1].prefix;
    std::memcpy(&lo, &blo, sizeof lo);
    std::memcpy(&hi, &bhi, sizeof hi);
    medians[t] = 0.5 * (static_cast<double>(lo) + static_cast<double>(hi));
  }
}

std::vector<Detection> stack_candidates_cuda(const float* stack, std::int64_t templates,
                                             std::int64_t n_corr, const double* thresholds,
                                             std::int64_t min_separation, cudaStream_t stream) {
  check_stack(templates, n_corr, "stack_candidates_cuda");
  if (min_separation < 0)
    throw InvalidInput("stack_candidates_cuda: expected min_separation >= 0, found " +
                       std::to_string(min_separation));
  if (templates == 0) return {};
  using kernels::Candidate;
  cuda::StreamScratch count(sizeof(unsigned long long), stream);
  std::int64_t capacity = tuning::kCandidateCapacity;
  auto* box = static_cast<unsigned long long*>(cuda::pinned_mailbox());
  std::vector<Candidate> found;
  for (;;) {
    cuda::StreamScratch out(capacity * static_cast<std::int64_t>(sizeof(Candidate)), stream);
    HS_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), stream));
    const std::int64_t work = templates * n_corr;
    kernels::candidates_kernel<<<cuda::grid_blocks(work, tuning::kThreads, tuning::kBlocksPerSm),
                                 tuning::kThreads, 0, stream>>>(
        stack, templates, n_corr, thresholds, min_separation, out.as<Candidate>(), capacity,
        count.as<unsigned long long>());
    HS_CHECK_LAUNCH();
    HS_CUDA_CHECK(cudaMemcpyAsync(box, count.get(), sizeof(unsigned long long),
                                  cudaMemcpyDeviceToHost, stream));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto n = static_cast<std::int64_t>(*box);
    if (n > capacity) {  // the count is exact: rerun once with room for all of them
      capacity = n;
      continue;
    }
    found.resize(static_cast<std::size_t>(n));
    HS_CUDA_CHECK(cudaMemcpyAsync(found.data(), out.get(), found.size() * sizeof(Candidate),
                                  cudaMemcpyDeviceToHost, stream));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));
    break;
  }
  // Atomic slots come in any order: sort by (template, time) so results are reproducible.
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return a.t != b.t ? a.t < b.t : a.i < b.i;
  });
  std::vector<double> thr(static_cast<std::size_t>(templates));
  HS_CUDA_CHECK(cudaMemcpyAsync(thr.data(), thresholds, thr.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<Detection> result;
  result.reserve(found.size());
  for (const Candidate& c : found) {
    Detection d;
    d.template_index = c.t;
    d.correlation_index = c.i;
    d.value = c.value;
    d.threshold = thr[static_cast<std::size_t>(c.t)];
    result.push_back(d);  // sample (i * step) and channels_used are the caller's
  }
  return result;
}

}  // namespace halfscope::mfilter
