// Host side of the pieces shared by the GPU matched-filter baselines (baseline_cuda.cuh).
#include <cuda_fp16.h>

#include <string>

#include "halfscope/core/error.hpp"
#include "mfilter/baseline_cuda.cuh"
#include "mfilter/kernels/template_stats.cuh"

namespace halfscope::mfilter::baseline {

namespace {
std::int64_t window_bytes(const Dims& d) {
  return d.channels * window_count(d) * static_cast<std::int64_t>(sizeof(float));
}
}  // namespace

WindowStats::WindowStats(const DeviceProblem& p)
    : full_(p.dims.normalize == MfNormalize::Full),
      inv_(window_bytes(p.dims), p.stream),
      mean_(full_ ? window_bytes(p.dims) : 0, p.stream) {
  window_stats_cuda(p.dims, p.data, inv_.as<float>(), full_ ? mean_.as<float>() : nullptr,
                    p.stream);
}

TemplateOperands::TemplateOperands(const DeviceProblem& p, bool half)
    : inv_(p.dims.templates * p.dims.channels * static_cast<std::int64_t>(sizeof(float)), p.stream),
      mean_(p.dims.templates * p.dims.channels * static_cast<std::int64_t>(sizeof(double)),
            p.stream),
      sum_(p.dims.templates * p.dims.channels * static_cast<std::int64_t>(sizeof(double)),
           p.stream),
      absmax_(sizeof(float), p.stream),
      op_(p.dims.templates * p.dims.channels * p.dims.length *
              static_cast<std::int64_t>(half ? sizeof(__half) : sizeof(float)),
          p.stream) {
  const Dims& d = p.dims;
  const std::int64_t rows = d.templates * d.channels;
  const int blocks = static_cast<int>(std::min<std::int64_t>(rows, 65535));
  HS_CUDA_CHECK(cudaMemsetAsync(absmax_.get(), 0, sizeof(float), p.stream));
  if (rows == 0) return;  // no template rows: nothing to launch
  const bool full = d.normalize == MfNormalize::Full;
  kernels::template_stats_kernel<<<blocks, tuning::kThreads, 0, p.stream>>>(
      p.templates, rows, d.length, full, inv_.as<float>(), mean_.as<double>(), absmax_.as<float>());
  HS_CHECK_LAUNCH();
  if (half) {
    kernels::template_operand_kernel<__half><<<blocks, tuning::kThreads, 0, p.stream>>>(
        p.templates, rows, d.length, mean_.as<double>(), absmax_.as<float>(), op_.as<__half>(),
        sum_.as<double>());
  } else {
    kernels::template_operand_kernel<float>
        <<<blocks, tuning::kThreads, 0, p.stream>>>(p.templates, rows, d.length, mean_.as<double>(),
                                                    nullptr, op_.as<float>(), sum_.as<double>());
  }
  HS_CHECK_LAUNCH();
}

DataAbsMax::DataAbsMax(const DeviceProblem& p) : max_(sizeof(float), p.stream) {
  HS_CUDA_CHECK(cudaMemsetAsync(max_.get(), 0, sizeof(float), p.stream));
  const std::int64_t n = p.dims.channels * p.dims.samples;
  if (n == 0) return;
  kernels::absmax_kernel<<<cuda::grid_blocks(n, tuning::kThreads, tuning::kBlocksPerSm),
                           tuning::kThreads, 0, p.stream>>>(p.data, n, max_.as<float>());
  HS_CHECK_LAUNCH();
}

NonfiniteFlag::NonfiniteFlag(cudaStream_t stream) : flag_(sizeof(int), stream) {
  HS_CUDA_CHECK(cudaMemsetAsync(flag_.get(), 0, sizeof(int), stream));
}

void NonfiniteFlag::check(cudaStream_t stream, const char* method) const {
  auto* box = static_cast<int*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(cudaMemcpyAsync(box, flag_.get(), sizeof(int), cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (*box == 0) return;
  const std::string m(method);
  // Only cublas3 and cublas4 round products or sums to FP16; the other methods work in FP32 on
  // operands dispatch scaled (unit-energy templates, data below 1), so there inf or NaN is not
  // an FP16 overflow and advising another method would mislead.
  if (m == "cublas3" || m == "cublas4")
    throw NumericalError("matched filtering (" + m +
                         "): a correlation product overflowed FP16 (inf or NaN); use a method "
                         "with FP32 accumulation and output (cublas1, cublas2, tensor)");
  throw NumericalError("matched filtering (" + m +
                       "): a correlation value was inf or NaN in FP32; expected finite values "
                       "(the operands are scaled by dispatch, so this indicates a defect)");
}

void clear_output(const DeviceProblem& p) {
  const Dims& d = p.dims;
  const std::int64_t n = d.templates * (d.network_sum ? 1 : d.channels) * d.n_corr;
  HS_CUDA_CHECK(cudaMemsetAsync(p.out, 0, static_cast<std::size_t>(n) * sizeof(float), p.stream));
}

kernels::NormalizeArgs normalize_args(const DeviceProblem& p, const WindowStats& ws,
                                      const TemplateOperands& tmpl, const NonfiniteFlag& flag) {
  const Dims& d = p.dims;
  kernels::NormalizeArgs a;
  a.templates = d.templates;
  a.channels = d.channels;
  a.k = d.length;
  a.windows = window_count(d);
  a.n_corr = d.n_corr;
  a.step = d.step;
  a.moveouts = p.moveouts;
  a.weights = p.weights;
  a.inv_wnorm = ws.inv_norm();
  a.wmean = ws.mean();
  a.inv_tnorm = tmpl.inv_norm();
  a.tsum = tmpl.sum();
  a.network = d.network_sum;
  a.out = p.out;
  a.nonfinite = flag.get();
  return a;
}

}  // namespace halfscope::mfilter::baseline
