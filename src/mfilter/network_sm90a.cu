// The wgmma network kernel's host side (tensor_cuda.hpp: network_wgmma_cuda; device code and
// design: kernels/network_wgmma.cuh). This file alone is compiled for sm_90a (src/CMakeLists.txt):
// wgmma and TMA bulk copies exist only there. One call: the groups' moveout spans (read back:
// they size the shared memory, or send the call back to the other kernels), the window statistics,
// the shifted template operands, then one launch.
#include <algorithm>
#include <cstdint>
#include <string>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/kernels/network_wgmma.cuh"
#include "mfilter/tensor_cuda.hpp"
#include "mfilter/wgmma_plan.hpp"

namespace halfscope::mfilter {
namespace {

using tensor::Operand;

/// The kernel for this precision and normalization.
template <Operand O>
auto* kernel_of(bool full) {
  return full ? tensor::network_wgmma_kernel<O, true> : tensor::network_wgmma_kernel<O, false>;
}

/// True on a device of compute capability 9.0 whose driver loads this file's sm_90a code.
template <Operand O>
bool device_runs_sm90a(bool full) {
  int device = 0, major = 0, minor = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  HS_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) return false;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel_of<O>(full)) != cudaSuccess) {
    (void)cudaGetLastError();  // no loadable image: not an error of the call
    return false;
  }
  return true;
}

template <Operand O>
bool run(const DeviceProblem& p, TensorPhaseTimes* times) {
  const Dims& d = p.dims;
  const bool full = d.normalize == MfNormalize::Full;
  const std::int64_t groups = (d.templates + tensor::kWgTemplates - 1) / tensor::kWgTemplates;
  const std::int64_t tiles = (d.n_corr + tensor::kWgBlockTimes - 1) / tensor::kWgBlockTimes;
  // A template group of a call over several devices computes the whole call's rows only when the
  // groups are aligned to this kernel's 64 templates (Prepared::wgmma_aligned).
  if ((p.template_group && !p.wgmma_aligned) || groups > 65535 ||
      tiles > std::int64_t{0x7fffffff} || !device_runs_sm90a<O>(full))
    return false;
  cudaStream_t stream = p.stream;
  const std::int64_t windows = d.samples - d.length + 1, gcs = groups * d.channels;

  // Spans first: K' decides the shared memory, and a spread too long sends the call back.
  cuda::ScratchCarve span_plan;
  const std::int64_t need_at = span_plan.add(16);  // unsigned long long kp_need, int bad
  const std::int64_t base_at = span_plan.add(gcs * 8);
  const std::int64_t ks_at = span_plan.add(gcs * 4);
  cuda::StreamScratch spans(span_plan.total(), stream);
  auto* at0 = spans.as<unsigned char>();
  auto* kp_need = reinterpret_cast<unsigned long long*>(at0 + need_at);
  int* bad = reinterpret_cast<int*>(at0 + need_at + 8);
  auto* base = reinterpret_cast<std::int64_t*>(at0 + base_at);
  int* ksteps = reinterpret_cast<int*>(at0 + ks_at);
  HS_CUDA_CHECK(cudaMemsetAsync(kp_need, 0, 16, stream));
  PhaseMarks marks(times, stream);  // window statistics: the spans and the window statistics
  marks.mark(0);
  tensor::network_spans_kernel<<<cuda::grid_blocks(gcs, 128, 4), 128, 0, stream>>>(
      p.moveouts, p.weights, d.templates, d.channels, d.length, groups, base, ksteps, kp_need);
  HS_CHECK_LAUNCH();
  auto* mailbox = static_cast<unsigned long long*>(cuda::pinned_mailbox());
  HS_CUDA_CHECK(cudaMemcpyAsync(mailbox, kp_need, sizeof *mailbox, cudaMemcpyDeviceToHost, stream));
  HS_CUDA_CHECK(cudaStreamSynchronize(stream));
  // A template group of a call over several devices takes the whole call's K' (it sizes the
  // shared memory only), so it falls back to the other kernel exactly when the whole call does.
  const std::int64_t kp =
      std::max({static_cast<std::int64_t>(*mailbox), (d.length + 15) / 16 * 16, p.wgmma_kp_floor});
  int device = 0, smem_limit = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  HS_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (kp > (1 << 16) || d.channels > (1 << 14)) return false;
  const tensor::WgLayout lay(static_cast<int>(kp), static_cast<int>(d.length), full, d.channels);
  if (lay.total > smem_limit) return false;

  cuda::ScratchCarve plan;
  const std::int64_t inv_at = plan.add(d.channels * windows * 4);
  const std::int64_t mean_at = plan.add(full ? d.channels * windows * 4 : 0);
  const std::int64_t a_at = plan.add(gcs * tensor::kWgTemplates * kp * 2);
  const std::int64_t rows_at = plan.add(gcs * tensor::kWgTemplates * 16);
  cuda::StreamScratch scratch(plan.total(), stream);
  auto* at = scratch.as<unsigned char>();
  auto* inv = reinterpret_cast<float*>(at + inv_at);
  float* mean = full ? reinterpret_cast<float*>(at + mean_at) : nullptr;
  tensor::WgArgs a;
  a.data = p.data, a.inv = inv, a.mean = mean;
  auto* ops = reinterpret_cast<std::uint16_t*>(at + a_at);
  auto* rows = reinterpret_cast<float4*>(at + rows_at);
  a.a = ops, a.rows = rows, a.base = base, a.ksteps = ksteps, a.out = p.out, a.bad = bad;
  a.T = d.templates, a.C = d.channels, a.L = d.samples, a.windows = windows, a.n_corr = d.n_corr;
  a.K = static_cast<int>(d.length), a.kp = static_cast<int>(kp);

  window_stats_cuda(d, p.data, inv, mean, stream);
  marks.mark(1);
  HS_CUDA_CHECK(cudaMemsetAsync(
      ops, 0, static_cast<std::size_t>(gcs * tensor::kWgTemplates * kp * 2), stream));
  tensor::network_templates_kernel<O>
      <<<cuda::grid_blocks(gcs * tensor::kWgTemplates * 32, 128, 8), 128, 0, stream>>>(
          p.templates, p.moveouts, p.weights, d.templates, d.channels, d.length, groups,
          static_cast<int>(kp), full, base, ops, rows, bad);
  HS_CHECK_LAUNCH();
  marks.mark(2);
  auto* kernel = kernel_of<O>(full);
  HS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, lay.total));
  kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(groups)),
           tensor::kWgBlockThreads, static_cast<std::size_t>(lay.total), stream>>>(a);
  HS_CHECK_LAUNCH();
  marks.mark(3);
  throw_if_not_finite(bad, stream, "tensor, wgmma");
  marks.read();
  if (times != nullptr) times->wgmma = true;
  return true;
}

}  // namespace

bool network_wgmma_cuda(const DeviceProblem& problem, Precision precision,
                        TensorPhaseTimes* times) {
  // Split takes the other kernels (three products of hi / lo parts); per-channel output and
  // step > 1 too.
  if (!wgmma_network_call(problem.dims, precision)) return false;
  return precision == Precision::BF16 ? run<Operand::BF16>(problem, times)
                                      : run<Operand::Mixed>(problem, times);
}

}  // namespace halfscope::mfilter
