// cuFFT overlap-save matched filter in FP32 (backends.hpp: fft_cuda), for long templates where
// the direct methods' O(K) work per output loses to O(log N). Per channel: the spectra of the
// zero-padded (demeaned) templates once, then batches of data blocks of a power-of-two length
// N >= 2K (and >= kFftMinLength): R2C of the blocks, products with every template's conjugate
// spectrum, one batched C2R, and the normalization / network sum reading the valid V = N - K + 1
// outputs of each block in place (kernels/fft.cuh, kernels/normalize.cuh).
//
// Plans are cached per (device, N, batch, direction) in a small pool of this file: conv's cache
// (conv/fft_plan_cache_cuda.hpp) keys single transforms of rank 1 or 2 with no batch count, and
// these transforms are batched. Batches always have the same block count (blocks past the data are
// zeros), so one call needs three plans.
//
// Error: FP32 transforms of length N add ~u32 * log2(N) * ||T|| ||seg|| per output, relative to
// the normalized CC a few u32 * log2(N) * sqrt(N / K) (the segment holds N / K windows' energy).
#include "mfilter/fft_cuda.hpp"

#include <cufft.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"
#include "mfilter/baseline_cuda.cuh"
#include "mfilter/kernels/fft.cuh"

namespace halfscope::mfilter {

namespace {

struct PlanKey {
  int device;
  std::int64_t n, batch;
  bool inverse;
  bool operator==(const PlanKey&) const = default;
};

/// One cuFFT plan (RAII).
struct Plan {
  PlanKey key;
  cufftHandle handle = 0;
  explicit Plan(const PlanKey& k) : key(k) {
    HS_CUFFT_CHECK(cufftCreate(&handle));
    long long len = k.n;
    std::size_t work = 0;
    const cufftResult r = cufftMakePlanMany64(handle, 1, &len, nullptr, 1, 0, nullptr, 1, 0,
                                              k.inverse ? CUFFT_C2R : CUFFT_R2C, k.batch, &work);
    if (r != CUFFT_SUCCESS) {
      (void)cufftDestroy(handle);
      HS_CUFFT_CHECK(r);
    }
  }
  ~Plan() { (void)cufftDestroy(handle); }  // a destructor must not throw
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

/// Idle plans, most recently returned first; created on first use and never destroyed (freeing
/// CUDA resources from a static destructor races the runtime's teardown at exit).
struct Pool {
  std::mutex mutex;
  std::list<std::unique_ptr<Plan>> idle;
};
Pool& pool() {
  static auto* p = new Pool;
  return *p;
}

/// A plan leased for one call, bound to its stream; returned to the pool after the stream is
/// synchronised (its work area must not be reused while still in flight).
class PlanLease {
 public:
  PlanLease(const PlanKey& key, cudaStream_t stream) : stream_(stream) {
    {
      std::lock_guard lock(pool().mutex);
      auto& idle = pool().idle;
      auto it = std::find_if(idle.begin(), idle.end(), [&](auto& p) { return p->key == key; });
      if (it != idle.end()) {
        plan_ = std::move(*it);
        idle.erase(it);
      }
    }
    if (!plan_) plan_ = std::make_unique<Plan>(key);
    HS_CUFFT_CHECK(cufftSetStream(plan_->handle, stream));
  }
  ~PlanLease() {
    if (cudaStreamSynchronize(stream_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;  // the plan's stream failed: drop it
    }
    std::lock_guard lock(pool().mutex);
    auto& idle = pool().idle;
    idle.push_front(std::move(plan_));
    while (idle.size() > tuning::kFftMaxIdlePlans) idle.pop_back();
  }
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;
  [[nodiscard]] cufftHandle get() const { return plan_->handle; }

 private:
  cudaStream_t stream_;
  std::unique_ptr<Plan> plan_;
};

std::atomic<std::int64_t> g_budget{tuning::kFftBatchBudgetBytes};

int blocks_for(std::int64_t work) {
  return cuda::grid_blocks(work, tuning::kThreads, tuning::kBlocksPerSm);
}

}  // namespace

std::int64_t set_fft_batch_budget_bytes(std::int64_t bytes) {
  if (bytes < 1)
    throw InvalidInput("set_fft_batch_budget_bytes: expected a positive byte count, found " +
                       std::to_string(bytes));
  return g_budget.exchange(bytes);
}

std::int64_t fft_transform_length(std::int64_t k) {
  std::int64_t n = tuning::kFftMinLength;
  while (n < 2 * k) n *= 2;
  return n;
}

void fft_cuda(const DeviceProblem& p) {
  const Dims& d = p.dims;
  if (d.templates == 0 || d.n_corr == 0) return;
  const std::int64_t windows = baseline::window_count(d);
  const std::int64_t n = fft_transform_length(d.length);
  const std::int64_t v = n - d.length + 1, bins = n / 2 + 1;
  const std::int64_t total_blocks = (windows + v - 1) / v;
  // Bytes per block of a batch: its segment and spectrum, every template's product and output.
  const std::int64_t per_block = n * 4 + bins * 8 + d.templates * (bins * 8 + n * 4);
  const std::int64_t batch = std::clamp<std::int64_t>(g_budget.load() / per_block, 1, total_blocks);

  baseline::WindowStats ws(p);
  baseline::TemplateOperands tmpl(p, /*half=*/false);
  baseline::NonfiniteFlag flag(p.stream);
  baseline::clear_output(p);
  int device = 0;
  HS_CUDA_CHECK(cudaGetDevice(&device));
  PlanLease tplan({device, n, d.templates, false}, p.stream);
  PlanLease fwd({device, n, batch, false}, p.stream);
  PlanLease inv({device, n, d.templates * batch, true}, p.stream);

  cuda::StreamScratch tpad(d.templates * n * 4, p.stream);
  cuda::StreamScratch tspec(d.templates * bins * 8, p.stream);
  cuda::StreamScratch seg(batch * n * 4, p.stream);
  cuda::StreamScratch xspec(batch * bins * 8, p.stream);
  cuda::StreamScratch prod(d.templates * batch * bins * 8, p.stream);
  cuda::StreamScratch y(d.templates * batch * n * 4, p.stream);

  kernels::NormalizeArgs a = baseline::normalize_args(p, ws, tmpl, flag);
  a.dot_scale = 1.0f / static_cast<float>(n);  // cuFFT's inverse is unnormalized; n = 2^m: exact
  for (std::int64_t c = 0; c < d.channels; ++c) {
    kernels::pad_templates_kernel<<<blocks_for(d.templates * n), tuning::kThreads, 0, p.stream>>>(
        static_cast<const float*>(tmpl.operand()), d.templates, d.channels, c, d.length, n,
        tpad.as<float>());
    HS_CHECK_LAUNCH();
    HS_CUFFT_CHECK(cufftExecR2C(tplan.get(), tpad.as<cufftReal>(), tspec.as<cufftComplex>()));
    for (std::int64_t first = 0; first < total_blocks; first += batch) {
      kernels::segments_kernel<<<blocks_for(batch * n), tuning::kThreads, 0, p.stream>>>(
          p.data + c * d.samples, d.samples, first, batch, v, n, seg.as<float>());
      HS_CHECK_LAUNCH();
      HS_CUFFT_CHECK(cufftExecR2C(fwd.get(), seg.as<cufftReal>(), xspec.as<cufftComplex>()));
      kernels::spectra_product_kernel<<<blocks_for(d.templates * batch * bins), tuning::kThreads, 0,
                                        p.stream>>>(xspec.as<cufftComplex>(),
                                                    tspec.as<cufftComplex>(), d.templates, batch,
                                                    bins, prod.as<cufftComplex>());
      HS_CHECK_LAUNCH();
      HS_CUFFT_CHECK(cufftExecC2R(inv.get(), prod.as<cufftComplex>(), y.as<cufftReal>()));
      a.channel = c;
      a.s0 = first * v;
      a.rows = std::min(batch * v, windows - a.s0);
      baseline::launch_normalize(a, kernels::OverlapSaveDot{y.as<float>(), batch, n, v}, p.stream);
    }
  }
  flag.check(p.stream, "fft");
}

}  // namespace halfscope::mfilter
