// Tensor-core matched filtering (backends.hpp: tensor_cuda): host side. Design, floors and
// measured numbers: docs/mfilter-tensor.md; device code: kernels/tensor_mf.cuh.
//
// One call: window statistics (window_stats_cuda, FP64), template preparation (FP64 statistics,
// power-of-two scaling, FP16 / BF16 operands in mma fragment order), then one GEMM-shaped kernel
// whose blocks each own 16 templates x 512 correlation times and loop over the channels. Floors
// for the study's case (T = 16, K = 256, C = 1, L = 4.32e6, FP32 output) on an H200: output
// 276 MB + data 17 MB at 4.2 TB/s = 70 us; 35.4 GFLOP per product at 778 TFLOP/s = 45 us
// (mixed, bf16) or 136 us (split: three products).
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/env.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/tensor_mf.cuh"
#include "mfilter/kernels/tensor_scan.cuh"
#include "mfilter/kernels/tensor_tuning.hpp"
#include "mfilter/tensor_cuda.hpp"

namespace halfscope::mfilter {
namespace {

using tensor::Operand;

/// The tiling Auto runs (docs/mfilter-tensor.md, v5 and v6, all four tilings pass the same
/// tests): mixed / bf16 WidePairs (16 n-blocks per A fragment; per channel 2-4 % ahead of
/// DeepPairs, network 16 % since its stack moved to shared memory); split DeepPairs per channel
/// (3-6 % ahead) and WidePairs in network mode (1-4 % ahead since v6, H100).
TensorTiling default_tiling(Precision precision, bool network) {
  return precision != Precision::Split || network ? TensorTiling::WidePairs
                                                  : TensorTiling::DeepPairs;
}

template <Operand O, class Tl, bool kNetwork>
void launch_main(const tensor::KernelArgs& args, std::int64_t smem, cudaStream_t stream) {
  auto* kernel = args.mean != nullptr ? tensor::tensor_mf_kernel<O, Tl, kNetwork, true>
                                      : tensor::tensor_mf_kernel<O, Tl, kNetwork, false>;
  HS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  // Persistent blocks: as many as fit on the device at once (registers and shared memory
  // decide; at least Tiling::min_blocks per SM by the launch bounds), never more than the tiles
  // (whose count depends on the moveout spread found on the device: 64 outputs is the least).
  int per_sm = 0;
  HS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tl::kThreads,
                                                              static_cast<std::size_t>(smem)));
  const std::int64_t max_tiles = args.groups * ((args.n_corr + 63) / 64);
  const int grid = cuda::grid_blocks(max_tiles * Tl::kThreads, Tl::kThreads, std::max(per_sm, 1));
  kernel<<<grid, Tl::kThreads, static_cast<std::size_t>(smem), stream>>>(args);
  HS_CHECK_LAUNCH();
}

/// Launches tiling Tl (run() sized its shared memory: a.pairs == Tl::kPairs).
template <Operand O, class Tl>
void launch_tiling(const tensor::KernelArgs& a, std::int64_t smem, cudaStream_t stream,
                   bool network) {
  if (network)
    launch_main<O, Tl, true>(a, smem, stream);
  else
    launch_main<O, Tl, false>(a, smem, stream);
}

template <Operand O>
void run(const DeviceProblem& p, TensorPhaseTimes* times, TensorTiling tiling) {
  const Dims& d = p.dims;
  constexpr int parts = tensor::kParts<O>;
  if (d.templates < 1 || d.channels < 1 || d.length < 1 || d.samples < d.length || d.step < 1)
    throw InvalidInput(
        "matched filtering (tensor): expected T, C, K >= 1, L >= K and step >= 1, "
        "found T = " +
        std::to_string(d.templates) + ", C = " + std::to_string(d.channels) +
        ", K = " + std::to_string(d.length) + ", L = " + std::to_string(d.samples) +
        ", step = " + std::to_string(d.step));
  const std::int64_t windows = d.samples - d.length + 1;
  if (d.n_corr < 1 || d.n_corr > (windows - 1) / d.step + 1)
    throw InvalidInput("matched filtering (tensor): expected 1 <= n_corr <= (L - K) / step + 1 = " +
                       std::to_string((windows - 1) / d.step + 1) + ", found " +
                       std::to_string(d.n_corr));
  if (d.step > tensor::kMaxStep)
    throw Unsupported("matched filtering (tensor): step " + std::to_string(d.step) +
                      " exceeds the tensor method's limit of " + std::to_string(tensor::kMaxStep) +
                      " samples; use the naive method");
  // The network stack goes to the wgmma kernel where it qualifies (it says so by returning);
  // HALFSCOPE_MF_TENSOR_WGMMA=0 keeps Auto off it, for the benchmark's comparison on one build.
  if (tiling == TensorTiling::Wgmma ||
      (tiling == TensorTiling::Auto && !env_is_zero("HALFSCOPE_MF_TENSOR_WGMMA"))) {
    constexpr Precision precision = O == Operand::Split
                                        ? Precision::Split
                                        : (O == Operand::BF16 ? Precision::BF16 : Precision::Mixed);
    if (network_wgmma_cuda(p, precision, times)) return;
    tiling = TensorTiling::Auto;
  }
  const bool full = d.normalize == MfNormalize::Full;
  tensor::KernelArgs a;
  a.T = d.templates, a.C = d.channels, a.L = d.samples, a.step = d.step, a.n_corr = d.n_corr;
  a.windows = windows;
  a.groups = (d.templates + tensor::kTemplatesPerTile - 1) / tensor::kTemplatesPerTile;
  a.chunks = (d.length + 15) / 16;
  a.words = (tensor::kTileLags + 16 * a.chunks + tensor::kTilePad) / 2;
  // +16 words: the odd copy starts 16 banks away from the even one (conflict-free reads).
  a.copy_stride = (a.words + 31) / 32 * 32 + 16;
  // Pairs P[x] for x + 9 < 2 * words (the last samples pair reads), rounded up to a multiple of
  // 4 so the areas after them stay 16-byte aligned.
  a.pair_count = (2 * a.words - 9 + 3) / 4 * 4;
  if (tiling == TensorTiling::Auto)
    tiling =
        default_tiling(O == Operand::Split ? Precision::Split : Precision::Mixed, d.network_sum);
  a.pairs = tiling == TensorTiling::WidePairs || tiling == TensorTiling::DeepPairs;
  a.network = d.network_sum;
  // Direct epilogues (stores from the accumulators, or the network stack added to from them) need
  // step 1 (one output per window start); the variable exists so the benchmark can measure the
  // staged path on the same build.
  a.direct = d.step == 1 && !env_is_zero("HALFSCOPE_MF_TENSOR_DIRECT");
  a.segs = (d.samples + tensor::kSegment - 1) / tensor::kSegment;
  // Template fragments go through shared memory (prefetched per step) while two blocks still
  // fit on an SM; longer templates read them through L1.
  a.frags_in_shared = tensor::SharedLayout(a, parts, full).total <= tensor::kMaxSharedBytes / 2;
  const std::int64_t smem = tensor::SharedLayout(a, parts, full).total;
  if (smem > tensor::kMaxSharedBytes)
    throw Unsupported("matched filtering (tensor): templates of K = " + std::to_string(d.length) +
                      " samples need " + std::to_string(smem) +
                      " bytes of shared memory per "
                      "block, more than the " +
                      std::to_string(tensor::kMaxSharedBytes) +
                      " available; use the fft method for templates this long");
  const std::int64_t t_pad = a.groups * tensor::kTemplatesPerTile;
  cudaStream_t stream = p.stream;

  // One stream-ordered allocation carved into every scratch array (256-byte aligned), and one
  // memset for the two counters: each cudaMallocAsync / memset is host time spent before the
  // first kernel is queued, which the whole call pays.
  cuda::ScratchCarve carve;
  const std::int64_t counters_at = carve.add(16);  // int bad at +0, unsigned long long spread at +8
  const std::int64_t inv_at = carve.add(d.channels * windows * 4);
  const std::int64_t mean_at = carve.add(full ? d.channels * windows * 4 : 0);
  const std::int64_t row_factor_at = carve.add(d.channels * t_pad * 4);
  const std::int64_t row_sum_at = carve.add(d.channels * t_pad * 4);
  const std::int64_t frags_at = carve.add(d.channels * t_pad * a.chunks * 16 * parts * 2);
  const std::int64_t seg_max_at = carve.add(d.channels * a.segs * 4);
  cuda::StreamScratch scratch(carve.total(), stream);
  const auto at = [&](std::int64_t offset) { return scratch.as<unsigned char>() + offset; };
  int* bad = reinterpret_cast<int*>(at(counters_at));
  auto* spread = reinterpret_cast<unsigned long long*>(at(counters_at + 8));
  float* inv_norm = reinterpret_cast<float*>(at(inv_at));
  float* mean = full ? reinterpret_cast<float*>(at(mean_at)) : nullptr;
  float* row_factor = reinterpret_cast<float*>(at(row_factor_at));
  float* row_sum = reinterpret_cast<float*>(at(row_sum_at));
  auto* frags = reinterpret_cast<std::uint16_t*>(at(frags_at));
  auto* seg_max = reinterpret_cast<unsigned*>(at(seg_max_at));
  HS_CUDA_CHECK(cudaMemsetAsync(bad, 0, 16, stream));
  if (p.tile_spread_floor > 0) {  // a group of a call over several devices: the call's spread
    const auto floor = static_cast<unsigned long long>(p.tile_spread_floor);
    HS_CUDA_CHECK(cudaMemcpyAsync(spread, &floor, sizeof floor, cudaMemcpyHostToDevice, stream));
    HS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `floor` is read before it goes
  }

  // Phase events only when timing is asked for: the plain path creates none.
  PhaseMarks marks(times, stream);
  marks.mark(0);
  window_stats_cuda(d, p.data, inv_norm, mean, stream);

  marks.mark(1);
  constexpr int prep_threads = 128;
  tensor::prepare_templates_kernel<O>
      <<<cuda::grid_blocks(d.channels * t_pad * 32, prep_threads, 8), prep_threads, 0, stream>>>(
          p.templates, d.templates, d.channels, d.length, t_pad, a.chunks, full, frags, row_factor,
          row_sum, bad);
  HS_CHECK_LAUNCH();
  tensor::
      segment_max_kernel<<<cuda::grid_blocks(d.channels * a.segs * 32, 256, 8), 256, 0, stream>>>(
          p.data, d.channels, d.samples, a.segs, tensor::kSegment, seg_max, bad);
  HS_CHECK_LAUNCH();
  tensor::
      moveout_spread_kernel<<<cuda::grid_blocks(a.groups * d.channels, 128, 4), 128, 0, stream>>>(
          p.moveouts, d.templates, d.channels, a.groups, spread);
  HS_CHECK_LAUNCH();

  a.data = p.data;
  a.frags = reinterpret_cast<const uint4*>(frags);
  a.row_factor = row_factor;
  a.row_sum = row_sum;
  a.inv_norm = inv_norm;
  a.mean = mean;
  a.moveouts = p.moveouts;
  a.weights = p.weights;
  a.out = p.out;
  a.bad = bad;
  a.spread = spread;
  a.seg_max = seg_max;
  marks.mark(2);
  switch (tiling) {
    case TensorTiling::Wide:
      launch_tiling<O, tensor::TilingWide>(a, smem, stream, d.network_sum);
      break;
    case TensorTiling::WidePairs:
      launch_tiling<O, tensor::TilingWidePairs>(a, smem, stream, d.network_sum);
      break;
    case TensorTiling::DeepPairs:
      launch_tiling<O, tensor::TilingDeepPairs>(a, smem, stream, d.network_sum);
      break;
    default:
      launch_tiling<O, tensor::TilingDeep>(a, smem, stream, d.network_sum);
      break;
  }
  marks.mark(3);

  throw_if_not_finite(bad, stream, "tensor");
  marks.read();
}

}  // namespace

void PhaseMarks::mark(int k) {
  if (times_ == nullptr) return;
  at_[k].emplace();
  at_[k]->record(stream_);
}

void PhaseMarks::read() const {
  if (times_ == nullptr) return;
  HS_CUDA_CHECK(cudaEventElapsedTime(&times_->window_stats_ms, at_[0]->get(), at_[1]->get()));
  HS_CUDA_CHECK(cudaEventElapsedTime(&times_->prepare_ms, at_[1]->get(), at_[2]->get()));
  HS_CUDA_CHECK(cudaEventElapsedTime(&times_->kernel_ms, at_[2]->get(), at_[3]->get()));
}

void throw_if_not_finite(const int* bad, cudaStream_t stream, const std::string& kernel) {
  int* mailbox = static_cast<int*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(cudaMemcpyAsync(mailbox, bad, sizeof(int), cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (*mailbox != 0)
    throw NumericalError("matched filtering (" + kernel + "): " + std::to_string(*mailbox) +
                         " template channels or data segments hold inf or NaN, or operands that "
                         "are not finite in FP16/BF16 after power-of-two scaling (validation "
                         "rejects non-finite input)");
}

void tensor_cuda(const DeviceProblem& problem, Precision precision) {
  tensor_cuda_timed(problem, precision, nullptr);
}

void tensor_cuda_timed(const DeviceProblem& problem, Precision precision, TensorPhaseTimes* times,
                       TensorTiling tiling) {
  if (times != nullptr) times->wgmma = false;
  switch (precision) {
    case Precision::Mixed:
      return run<Operand::Mixed>(problem, times, tiling);
    case Precision::BF16:
      return run<Operand::BF16>(problem, times, tiling);
    case Precision::Split:
      return run<Operand::Split>(problem, times, tiling);
    default:
      throw InvalidInput("matched filtering: the tensor method runs mixed, bf16 or split, found " +
                         std::string(precision_name(precision)));
  }
}

}  // namespace halfscope::mfilter
