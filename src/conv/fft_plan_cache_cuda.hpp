// Internal (CUDA builds only): the caches of the GPU FFT convolution, shared by every thread.
//
// Plans. cuFFT plans are expensive to make (milliseconds, a work area allocation) and are not safe
// to execute from two threads at once, so they live in a pool keyed by (device, grid, precision,
// direction): a call leases one for its duration (its own if another thread holds the first),
// binds it to its stream, and gives it back after its stream is synchronised. At most
// tuning::kMaxIdlePlans idle plans are kept, least recently used destroyed first.
//
// Kernel spectra. Deconvolution convolves with the same PSF (and its adjoint) hundreds of times;
// the spectrum of the padded, scaled kernel depends only on the kernel's bytes and on the grid, so
// it is cached: the key is (device, precision, grid, kernel shape, fold periods); the content is
// identified by a 64-bit hash of the kernel's bytes AND a byte-exact comparison on the device
// against the cached copy of those bytes, done in one pass (kernels::fingerprint_kernel). A
// different kernel, or the same buffer changed in place, therefore never hits a stale spectrum; a
// hash collision costs nothing but a recomputation. Entries carry a "ready" event: a stream that
// finds an entry another stream is still computing waits for it on the device. Total size is
// capped (tuning::kSpectrumCacheBytes), least recently used evicted first; entries in use stay
// alive (shared_ptr) until their user is done. set_fft_spectrum_cache_enabled(false) turns the
// cache off (every call then recomputes the kernel spectrum).
//
// Both containers are created on first use and deliberately never destroyed: freeing CUDA
// resources from a static destructor races the runtime's own teardown at exit.
// clear_fft_caches() releases everything explicitly.
#pragma once

#include <cuda_runtime.h>
#include <cufft.h>
#include <library_types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/precision.hpp"

namespace halfscope::conv::gpufft {

/// One cuFFT plan; destroys it (RAII).
class CufftPlan {
 public:
  CufftPlan();
  ~CufftPlan();
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;
  [[nodiscard]] cufftHandle get() const noexcept { return handle_; }

 private:
  cufftHandle handle_ = 0;
};

/// What identifies a plan: device, transform lengths (rank 1 or 2), real type, direction.
struct PlanKey {
  int device = 0;
  int rank = 2;
  std::int64_t dims[2] = {1, 1};
  cudaDataType real_type = CUDA_R_32F;
  bool inverse = false;
  friend bool operator==(const PlanKey&, const PlanKey&) = default;
};

/// A plan leased from the pool, bound to `stream`. The destructor synchronises the stream (a
/// no-op after the call's own synchronisation; on an error path it keeps the plan's work area from
/// being reused while still in flight) and returns the plan to the pool.
class PlanLease {
 public:
  PlanLease(const PlanKey& key, cudaStream_t stream);
  ~PlanLease();
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;
  [[nodiscard]] cufftHandle get() const noexcept { return plan_->get(); }

 private:
  PlanKey key_;
  cudaStream_t stream_;
  std::unique_ptr<CufftPlan> plan_;
};

/// What identifies a kernel spectrum apart from the kernel's content.
struct SpectrumKey {
  int device = 0;
  Precision precision = Precision::Single;
  std::int64_t grid_rows = 0, grid_cols = 0;      // transform grid
  std::int64_t krows = 0, kcols = 0;              // kernel shape
  std::int64_t period_rows = 0, period_cols = 0;  // fold periods (circular: the image extent)
  std::int64_t kernel_bytes = 0;
  friend bool operator==(const SpectrumKey&, const SpectrumKey&) = default;
};

/// One cached spectrum: the kernel bytes it was computed from (for the exact comparison), the
/// spectrum, and the event recorded once both are written.
struct SpectrumEntry {
  SpectrumKey key;
  std::uint64_t hash = 0;
  std::shared_ptr<Buffer> kernel_copy;
  std::shared_ptr<Buffer> spectrum;
  cuda::Event ready;
};

/// The cached entries with this key, most recently used first (at most
/// tuning::kMaxSpectrumCandidates); empty when the cache is off.
std::vector<std::shared_ptr<SpectrumEntry>> spectrum_candidates(const SpectrumKey& key);
/// Marks a candidate as just used (hit).
void touch_spectrum(const std::shared_ptr<SpectrumEntry>& entry);
/// Allocates an entry (not yet cached) with room for `spectrum_bytes` and the kernel bytes.
std::shared_ptr<SpectrumEntry> make_spectrum_entry(const SpectrumKey& key, std::uint64_t hash,
                                                   std::int64_t spectrum_bytes);
/// Caches an entry whose work has been enqueued and whose `ready` event is recorded, evicting
/// least recently used entries beyond the size cap; does nothing when the cache is off or the
/// entry alone exceeds the cap.
void insert_spectrum(std::shared_ptr<SpectrumEntry> entry);

/// Counters for tests and benchmarks.
struct FftCacheStats {
  std::int64_t plan_hits = 0, plan_misses = 0;
  std::int64_t spectrum_hits = 0, spectrum_misses = 0;
  std::int64_t idle_plans = 0, spectra = 0, spectrum_bytes = 0;
};
FftCacheStats fft_cache_stats();
/// Counts one spectrum lookup (the fingerprint decides hit or miss in fft_cuda.cu).
void count_spectrum_lookup(bool hit);

/// Destroys the idle plans and drops every cached spectrum (entries in use live until released).
void clear_fft_caches();
/// Turns the kernel-spectrum cache on (default) or off; off also drops what it holds.
void set_fft_spectrum_cache_enabled(bool enabled);
[[nodiscard]] bool fft_spectrum_cache_enabled();

}  // namespace halfscope::conv::gpufft
