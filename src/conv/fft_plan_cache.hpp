// Internal: FFTW plans for 2-D real transforms, made once per (shape, precision, direction) and
// reused from any thread.
//
// FFTW's planner (plan creation and destruction) is not thread-safe; fftw_execute_* on distinct
// arrays is. So plans are created and destroyed only under fftw_planner_mutex(), and executed
// with the new-array functions (fftw_execute_dft_r2c / _c2r) on buffers from fftw_malloc, whose
// alignment is the one the plan was made for. Any other halfscope code that plans with FFTW must
// take the same mutex. Plans are made with FFTW_ESTIMATE (planning in microseconds, no
// measurement that would overwrite arrays or make results depend on timing).
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

/// Real-to-complex plan of a rows x cols real array into rows x (cols/2 + 1) complex, out of place.
/// Throws Unsupported when a side exceeds FFTW's int sizes, Error when FFTW cannot plan.
template <class T>
SharedPlan<T> plan_r2c(std::int64_t rows, std::int64_t cols);
/// Complex-to-real inverse of plan_r2c (unnormalised; it overwrites its complex input).
template <class T>
SharedPlan<T> plan_c2r(std::int64_t rows, std::int64_t cols);

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
