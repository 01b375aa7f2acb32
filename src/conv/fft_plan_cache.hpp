// Internal: FFTW plans for 2-D real transforms, made once per (shape, precision, direction) and
// reused from any thread.
//
// FFTW's planner (plan creation and destruction) is not thread-safe; fftw_execute_* on distinct
// arrays is. So plans are created and destroyed only under fftw_planner_mutex(), and executed
// with the new-array functions (fftw_execute_dft_r2c / _c2r) on buffers from fftw_malloc, whose
// alignment is the one the plan was made for. Any other halfscope code that plans with FFTW must
// take the same mutex. Plans are made with FFTW_ESTIMATE (planning in microseconds, no
// measurement that would overwrite arrays or make results depend on timing). A plan may split each
// transform over several OpenMP threads (FFTW's OpenMP library, where the build links it): a
// plan's results then depend on its thread count, as a threaded BLAS's do, never on timing.
#pragma once

#include <fftw3.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>

#include "conv/fft_cpu_internal.hpp"  // kMaxCachedPlans, cached_plan_count

namespace halfscope::conv::cpu {

/// The one lock around every FFTW planner call in halfscope.
std::recursive_mutex& fftw_planner_mutex();

/// FFTW's names for one precision: double (fftw_) and float (fftwf_).
template <class T>
struct Fftw;
template <>
struct Fftw<double> {
  using complex = fftw_complex;
  using plan = fftw_plan;
};
template <>
struct Fftw<float> {
  using complex = fftwf_complex;
  using plan = fftwf_plan;
};

/// A plan shared by the cache and its users; destroyed (under the mutex) when the last one lets go.
template <class T>
using SharedPlan = std::shared_ptr<std::remove_pointer_t<typename Fftw<T>::plan>>;

/// Threads for one transform of `points` grid points run by the calling thread: every OpenMP
/// thread (omp_get_max_threads) from kThreadedFftPoints up, when the build links FFTW's OpenMP
/// library and the caller is not inside a parallel region; 1 otherwise.
int fft_threads(std::int64_t points);
/// Whether this build links FFTW's OpenMP libraries (else fft_threads is always 1).
bool fftw_threads_linked() noexcept;
/// Below this many points a transform stays on one thread (a 256^2 r2c takes ~0.2 ms: waking a
/// team costs a good part of that).
inline constexpr std::int64_t kThreadedFftPoints = std::int64_t{1} << 18;

/// Real-to-complex plan of a rows x cols real array into rows x (cols/2 + 1) complex, out of place,
/// each execution split over `threads` OpenMP threads (fft_threads; 1: the calling thread alone).
/// Throws Unsupported when a side exceeds FFTW's int sizes, Error when FFTW cannot plan.
template <class T>
SharedPlan<T> plan_r2c(std::int64_t rows, std::int64_t cols, int threads = 1);
/// Complex-to-real inverse of plan_r2c (unnormalised; it overwrites its complex input).
template <class T>
SharedPlan<T> plan_c2r(std::int64_t rows, std::int64_t cols, int threads = 1);

/// Executes a cached plan on new arrays (both from FftwBuffer).
void execute_r2c(const SharedPlan<double>& p, double* in, fftw_complex* out);
void execute_r2c(const SharedPlan<float>& p, float* in, fftwf_complex* out);
void execute_c2r(const SharedPlan<double>& p, fftw_complex* in, double* out);
void execute_c2r(const SharedPlan<float>& p, fftwf_complex* in, float* out);

/// An fftw_malloc'd array of n elements of E (zero-filled unless `zero` is false), freed with
/// fftw_free. Throws std::bad_alloc.
template <class E>
class FftwBuffer {
 public:
  explicit FftwBuffer(std::int64_t n, bool zero = true);
  FftwBuffer(const FftwBuffer&) = delete;
  FftwBuffer& operator=(const FftwBuffer&) = delete;
  [[nodiscard]] E* data() const noexcept { return p_.get(); }

 private:
  struct Free {
    void operator()(E* p) const noexcept { fftw_free(p); }
  };
  std::unique_ptr<E, Free> p_;
};

}  // namespace halfscope::conv::cpu
