// The cuFFT plan pool and the kernel-spectrum cache of the GPU FFT convolution
// (fft_plan_cache_cuda.hpp says what each holds and why).
#include "conv/fft_plan_cache_cuda.hpp"

#include <cufftXt.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "conv/kernels/fft_tuning.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::conv::gpufft {

namespace {

struct IdlePlan {
  PlanKey key;
  std::unique_ptr<CufftPlan> plan;
};

struct Caches {
  std::mutex mutex;
  std::list<IdlePlan> idle;                           // most recently returned first
  std::list<std::shared_ptr<SpectrumEntry>> spectra;  // most recently used first
  std::int64_t spectrum_bytes = 0;
  bool spectrum_enabled = true;
  FftCacheStats stats;
};

// Never destroyed: see the header.
Caches& caches() {
  static Caches* c = new Caches;
  return *c;
}

std::int64_t entry_bytes(const SpectrumEntry& e) {
  return (e.spectrum ? e.spectrum->size() : 0) + (e.kernel_copy ? e.kernel_copy->size() : 0);
}

// Makes the plan; cuFFT allocates its work area on the current device. Returns null when that
// allocation failed (the caller frees what the caches hold and tries again); throws otherwise.
std::unique_ptr<CufftPlan> make_plan(const PlanKey& key) {
  auto plan = std::make_unique<CufftPlan>();
  long long n[2] = {key.dims[0], key.dims[1]};
  const cudaDataType complex_type = key.real_type == CUDA_R_64F   ? CUDA_C_64F
                                    : key.real_type == CUDA_R_16F ? CUDA_C_16F
                                                                  : CUDA_C_32F;
  const cudaDataType in = key.inverse ? complex_type : key.real_type;
  const cudaDataType out = key.inverse ? key.real_type : complex_type;
  std::size_t work = 0;
  const cufftResult r = cufftXtMakePlanMany(plan->get(), key.rank, n, nullptr, 1, 0, in, nullptr, 1,
                                            0, out, 1, &work, complex_type);
  if (r == CUFFT_ALLOC_FAILED) return nullptr;
  HS_CUFFT_CHECK(r);
  return plan;
}

}  // namespace

CufftPlan::CufftPlan() {
  HS_CUFFT_CHECK(cufftCreate(&handle_));
}

CufftPlan::~CufftPlan() {
  (void)cufftDestroy(handle_);  // a destructor must not throw; a lost device surfaced elsewhere
}

PlanLease::PlanLease(const PlanKey& key, cudaStream_t stream) : key_(key), stream_(stream) {
  Caches& c = caches();
  {
    std::lock_guard lock(c.mutex);
    const auto it =
        std::find_if(c.idle.begin(), c.idle.end(), [&](const IdlePlan& p) { return p.key == key; });
    if (it != c.idle.end()) {
      plan_ = std::move(it->plan);
      c.idle.erase(it);
      ++c.stats.plan_hits;
    } else {
      ++c.stats.plan_misses;
    }
  }
  if (!plan_) plan_ = make_plan(key);
  if (!plan_) {  // the work area did not fit: give back what the caches hold, try once more
    clear_fft_caches();
    plan_ = make_plan(key);
    if (!plan_)
      throw CudaError("cuFFT: no device memory for the work area of a " +
                      std::to_string(key.dims[0]) +
                      (key.rank == 2 ? "x" + std::to_string(key.dims[1]) : "") + " transform");
  }
  HS_CUFFT_CHECK(cufftSetStream(plan_->get(), stream));
}

PlanLease::~PlanLease() {
  if (!plan_) return;
  if (cudaStreamSynchronize(stream_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // the plan may still be in use by a failed stream: drop it rather than reuse it
  }
  Caches& c = caches();
  std::unique_ptr<CufftPlan> evicted;  // destroyed outside the lock
  std::lock_guard lock(c.mutex);
  c.idle.push_front({key_, std::move(plan_)});
  if (static_cast<int>(c.idle.size()) > tuning::kMaxIdlePlans) {
    evicted = std::move(c.idle.back().plan);
    c.idle.pop_back();
  }
}

std::vector<std::shared_ptr<SpectrumEntry>> spectrum_candidates(const SpectrumKey& key) {
  Caches& c = caches();
  std::vector<std::shared_ptr<SpectrumEntry>> out;
  std::lock_guard lock(c.mutex);
  if (!c.spectrum_enabled) return out;
  for (const auto& e : c.spectra) {
    if (e->key == key) out.push_back(e);
    if (static_cast<int>(out.size()) == tuning::kMaxSpectrumCandidates) break;
  }
  return out;
}

void touch_spectrum(const std::shared_ptr<SpectrumEntry>& entry) {
  Caches& c = caches();
  std::lock_guard lock(c.mutex);
  const auto it = std::find(c.spectra.begin(), c.spectra.end(), entry);
  if (it != c.spectra.end()) c.spectra.splice(c.spectra.begin(), c.spectra, it);
}

std::shared_ptr<SpectrumEntry> make_spectrum_entry(const SpectrumKey& key, std::uint64_t hash,
                                                   std::int64_t spectrum_bytes) {
  auto e = std::make_shared<SpectrumEntry>();
  e->key = key;
  e->hash = hash;
  e->spectrum = Buffer::allocate(spectrum_bytes, Memory::device);
  e->kernel_copy = Buffer::allocate(std::max<std::int64_t>(key.kernel_bytes, 1), Memory::device);
  return e;
}

void insert_spectrum(std::shared_ptr<SpectrumEntry> entry) {
  Caches& c = caches();
  std::list<std::shared_ptr<SpectrumEntry>> evicted;  // released outside the lock
  std::lock_guard lock(c.mutex);
  const std::int64_t bytes = entry_bytes(*entry);
  if (!c.spectrum_enabled || bytes > tuning::kSpectrumCacheBytes) return;
  while (!c.spectra.empty() && c.spectrum_bytes + bytes > tuning::kSpectrumCacheBytes) {
    c.spectrum_bytes -= entry_bytes(*c.spectra.back());
    evicted.splice(evicted.begin(), c.spectra, std::prev(c.spectra.end()));
  }
  // Beyond kMaxSpectrumCandidates entries of one key the oldest can never be found again.
  int same = 0;
  for (auto it = c.spectra.begin(); it != c.spectra.end();) {
    if ((*it)->key == entry->key && ++same >= tuning::kMaxSpectrumCandidates) {
      c.spectrum_bytes -= entry_bytes(**it);
      auto next = std::next(it);
      evicted.splice(evicted.begin(), c.spectra, it);
      it = next;
    } else {
      ++it;
    }
  }
  c.spectrum_bytes += bytes;
  c.spectra.push_front(std::move(entry));
}

FftCacheStats fft_cache_stats() {
  Caches& c = caches();
  std::lock_guard lock(c.mutex);
  FftCacheStats s = c.stats;
  s.idle_plans = static_cast<std::int64_t>(c.idle.size());
  s.spectra = static_cast<std::int64_t>(c.spectra.size());
  s.spectrum_bytes = c.spectrum_bytes;
  return s;
}

void count_spectrum_lookup(bool hit) {
  Caches& c = caches();
  std::lock_guard lock(c.mutex);
  ++(hit ? c.stats.spectrum_hits : c.stats.spectrum_misses);
}

void clear_fft_caches() {
  Caches& c = caches();
  std::list<IdlePlan> plans;
  std::list<std::shared_ptr<SpectrumEntry>> spectra;
  {
    std::lock_guard lock(c.mutex);
    plans.swap(c.idle);
    spectra.swap(c.spectra);
    c.spectrum_bytes = 0;
  }
}

void set_fft_spectrum_cache_enabled(bool enabled) {
  Caches& c = caches();
  std::list<std::shared_ptr<SpectrumEntry>> spectra;
  std::lock_guard lock(c.mutex);
  c.spectrum_enabled = enabled;
  if (!enabled) {
    spectra.swap(c.spectra);
    c.spectrum_bytes = 0;
  }
}

bool fft_spectrum_cache_enabled() {
  Caches& c = caches();
  std::lock_guard lock(c.mutex);
  return c.spectrum_enabled;
}

}  // namespace halfscope::conv::gpufft
