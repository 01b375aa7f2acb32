// Naive FP32 GPU matched filter (backends.hpp: naive_cuda): Fast Matched Filter's design, one
// thread per (template, correlation time) with the network sum fused in registers
// (kernels/naive.cuh); FP64 window and template statistics give the denominators.
//
// Floors (study case, 16 x 256 x 4.32e6, one channel, H100): 35.4 GFLOP of FP32 FMA -> ~0.7 ms
// at ~51 TFLOP/s (not reached: every FMA also reads shared memory, ~2 loads per FMA, so ~1.4 ms
// at shared-memory rate); output 276 MB -> ~0.08 ms at 3.35 TB/s. Compute-bound by design, the
// reference point the tensor kernel is measured against.
#include <algorithm>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/baseline_cuda.cuh"
#include "mfilter/kernels/naive.cuh"

namespace halfscope::mfilter {

void naive_cuda(const DeviceProblem& p) {
  const Dims& d = p.dims;
  if (d.templates == 0 || d.n_corr == 0) return;
  baseline::WindowStats ws(p);
  baseline::TemplateOperands tmpl(p, /*half=*/false);
  if (!d.network_sum) baseline::clear_output(p);  // windows outside the data stay 0

  kernels::NaiveArgs a;
  a.templates = d.templates;
  a.channels = d.channels;
  a.k = d.length;
  a.samples = d.samples;
  a.n_corr = d.n_corr;
  a.step = d.step;
  a.tmpl = static_cast<const float*>(tmpl.operand());
  a.data = p.data;
  a.moveouts = p.moveouts;
  a.weights = p.weights;
  a.inv_wnorm = ws.inv_norm();
  a.wmean = ws.mean();
  a.inv_tnorm = tmpl.inv_norm();
  a.tsum = tmpl.sum();
  a.network = d.network_sum;
  a.out = p.out;
  const baseline::NonfiniteFlag flag(p.stream);
  a.nonfinite = flag.get();
  const std::int64_t tile = (tuning::kNaiveThreads - 1) * d.step + tuning::kNaivePass;
  a.tiled = tile <= tuning::kNaiveTileCap;
  const std::size_t smem =
      sizeof(float) * static_cast<std::size_t>(tuning::kNaivePass + (a.tiled ? tile : 0));
  const std::int64_t bx = (d.n_corr + tuning::kNaiveThreads - 1) / tuning::kNaiveThreads;
  if (bx > 2147483647)
    throw InvalidInput("naive_cuda: expected at most 2^31 - 1 blocks of correlation times, found " +
                       std::to_string(bx) + " (the dispatch chunks time; this chunk is too long)");
  const dim3 grid(static_cast<unsigned>(bx),
                  static_cast<unsigned>(std::min<std::int64_t>(d.templates, 65535)));
  kernels::naive_kernel<<<grid, tuning::kNaiveThreads, smem, p.stream>>>(a);
  HS_CHECK_LAUNCH();
  // Synchronizes the stream; the scratch above is freed in stream order.
  flag.check(p.stream, "naive");
}

}  // namespace halfscope::mfilter
