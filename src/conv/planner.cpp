#include "conv/planner.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "conv/backends.hpp"
#include "conv/overflow_check.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::conv {

void run_method(ConvMethod m, const Geometry& g, Precision p, const Array& image,
                const Array& kernel, Array& out, const SeparableFactors* factors) {
  switch (m) {
    case ConvMethod::Direct:
      direct_cpu(g, p, image, kernel, out);
      return;
    case ConvMethod::FFT:
      if (!out.on_device()) {
        fft_cpu(g, p, image, kernel, out);
        return;
      }
      break;
    default:
      break;
  }
#if HALFSCOPE_WITH_CUDA
  cudaStream_t s = nullptr;  // the legacy default stream: ordered with the caller's later copies
  switch (m) {
    case ConvMethod::Naive:
      naive_cuda(g, p, image, kernel, out, s);
      break;
    case ConvMethod::Register:
      register_cuda(g, p, image, kernel, out, s);
      break;
    case ConvMethod::FFT:
      fft_cuda(g, p, image, kernel, out, s);
      break;
    case ConvMethod::Gemm:
      gemm_cuda(g, p, image, kernel, out, s);
      break;
    case ConvMethod::Tensor:
      tensor_cuda(g, p, image, kernel, out, s);
      break;
    case ConvMethod::Separable:
      separable_cuda(g, p, image, kernel, out, s, factors);
      break;
#if HALFSCOPE_WITH_CUDNN
    case ConvMethod::Cudnn:
      cudnn_cuda(g, p, image, kernel, out, s);
      break;
#endif
    default:
      throw Unsupported("convolve2d: method " + std::string(conv_method_name(m)) +
                        " is not a GPU method");
  }
#else
  throw Unsupported("convolve2d: method " + std::string(conv_method_name(m)) +
                    " needs CUDA; this halfscope was built without it");
#endif
}

namespace {

// The GPU plan without measuring: Separable for a low-rank kernel (auto passes factors only when
// they are worth running), else conv_heuristic_method.
Plan heuristic_plan(const Geometry& g, Precision p, const SeparableFactors* factors) {
  if (factors) return {ConvMethod::Separable, separable_precision(p)};
  return {conv_heuristic_method(g.krows, g.kcols, p, DeviceKind::Cuda), p};
}

bool measuring_disabled_by_env() {
  return env_is_zero("HALFSCOPE_CONV_MEASURE");
}

#if HALFSCOPE_WITH_CUDA
// Key of a planned problem: everything that changes which method is fastest.
using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                           std::int64_t, int, int, int>;

Plan measure_fastest(const Geometry& g, Precision p, const SeparableFactors* factors) {
  // Candidates: every GPU method that delivers this precision's accuracy. Single may also run as
  // split on tensor cores: the same FP32 storage and FP32-grade error (docs/conv.md). cudnn is
  // not a candidate: its own algorithm search costs more than this whole measurement, and on one
  // channel it has been 4-90x slower than register (docs/conv.md, "The cudnn method").
  std::vector<std::pair<ConvMethod, Precision>> candidates;
  for (ConvMethod m :
       {ConvMethod::Register, ConvMethod::FFT, ConvMethod::Tensor, ConvMethod::Naive}) {
    const auto ps = conv_supported_precisions(m, DeviceKind::Cuda);
    if (std::find(ps.begin(), ps.end(), p) != ps.end()) candidates.emplace_back(m, p);
  }
  if (p == Precision::Single) candidates.emplace_back(ConvMethod::Tensor, Precision::Split);
  // Separable for a low-rank kernel; split requests run it in single (FP32 storage and grade).
  if (factors) candidates.emplace_back(ConvMethod::Separable, separable_precision(p));
  Array img(storage_dtype(p), {g.rows, g.cols}, Memory::device);
  Array ker(storage_dtype(p), {g.krows, g.kcols}, Memory::device);
  Array out(storage_dtype(p), {g.out_rows, g.out_cols}, Memory::device);
  HS_CUDA_CHECK(
      cudaMemset(img.data(), 0x3c, static_cast<std::size_t>(img.nbytes())));  // ~1 in FP16
  HS_CUDA_CHECK(cudaMemset(ker.data(), 0x20, static_cast<std::size_t>(ker.nbytes())));
  Plan best = heuristic_plan(g, p, factors);
  float best_ms = 1e30f;
  cuda::EventTimer timer;
  // Immediate overflow checks whatever the caller chose: a candidate whose planning data
  // overflows must throw here, inside the catch below that drops it, not later in the caller.
  const OverflowDeferralScope immediate(false);
  for (const auto& [m, prec] : candidates) {
    try {
      // Separable times the real rank with the planning kernel's factors (its time does not
      // depend on their values).
      const SeparableFactors* f = m == ConvMethod::Separable ? factors : nullptr;
      run_method(m, g, prec, img, ker, out, f);  // warm-up: plans, constant memory, caches
      float ms[3];
      for (float& t : ms) {
        timer.start();
        run_method(m, g, prec, img, ker, out, f);
        t = timer.stop_ms();
      }
      std::sort(ms, ms + 3);
      if (ms[1] < best_ms) best_ms = ms[1], best = {m, prec};  // the median of three
    } catch (const NumericalError&) {
      // The planning data overflowed this method's storage: it is simply not chosen.
    } catch (const Unsupported&) {
      // A size limit of this method (grid, tile, index range): another candidate serves.
    } catch (const CudaError&) {
      // Typically out of memory for this method's workspace: skip it, clear the sticky state.
      (void)cudaGetLastError();
    }
  }
  return best;
}
#endif

}  // namespace

Plan plan_method(const Geometry& g, Precision p, DeviceKind device, bool measure,
                 const SeparableFactors* factors) {
  if (device != DeviceKind::Cuda) return {conv_heuristic_method(g.krows, g.kcols, p, device), p};
  if (!measure || measuring_disabled_by_env()) return heuristic_plan(g, p, factors);
#if HALFSCOPE_WITH_CUDA
  static std::mutex mutex;
  static std::map<PlanKey, Plan> plans;
  const PlanKey key{g.rows,
                    g.cols,
                    g.krows,
                    g.kcols,
                    g.out_rows,
                    g.out_cols,
                    static_cast<int>(g.boundary),
                    static_cast<int>(p),
                    factors ? factors->rank : 0};
  std::lock_guard lock(mutex);
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  const Plan plan = measure_fastest(g, p, factors);
  plans.emplace(key, plan);
  return plan;
#else
  return heuristic_plan(g, p, factors);
#endif
}

}  // namespace halfscope::conv
