// FFTW plan cache: see fft_plan_cache.hpp.
#include "conv/fft_plan_cache.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "halfscope/core/error.hpp"

namespace halfscope::conv::cpu {

std::recursive_mutex& fftw_planner_mutex() {
  static std::recursive_mutex m;
  return m;
}

namespace {

using Key = std::tuple<std::int64_t, std::int64_t, bool, int>;  // rows, cols, inverse, threads

// Per-precision glue to FFTW's C functions.
template <class T>
struct Api;
template <>
struct Api<double> {
  static fftw_plan r2c(int r, int c, double* in, fftw_complex* out) {
    return fftw_plan_dft_r2c_2d(r, c, in, out, FFTW_ESTIMATE);
  }
  static fftw_plan c2r(int r, int c, fftw_complex* in, double* out) {
    return fftw_plan_dft_c2r_2d(r, c, in, out, FFTW_ESTIMATE);
  }
  static void destroy(fftw_plan p) { fftw_destroy_plan(p); }
};
template <>
struct Api<float> {
  static fftwf_plan r2c(int r, int c, float* in, fftwf_complex* out) {
    return fftwf_plan_dft_r2c_2d(r, c, in, out, FFTW_ESTIMATE);
  }
  static fftwf_plan c2r(int r, int c, fftwf_complex* in, float* out) {
    return fftwf_plan_dft_c2r_2d(r, c, in, out, FFTW_ESTIMATE);
  }
  static void destroy(fftwf_plan p) { fftwf_destroy_plan(p); }
};

// The thread count of the plans made next, under the planner lock like every planner call (FFTW's
// threads initialised on first use); nothing without FFTW's OpenMP libraries.
template <class T>
void plan_threads([[maybe_unused]] int n) {
#if defined(HALFSCOPE_HAS_FFTW_THREADS)
  if constexpr (std::is_same_v<T, double>) {
    static const bool ready = fftw_init_threads() != 0;
    if (ready) fftw_plan_with_nthreads(n);
  } else {
    static const bool ready = fftwf_init_threads() != 0;
    if (ready) fftwf_plan_with_nthreads(n);
  }
#endif
}

template <class T>
struct Cache {
  std::map<Key, SharedPlan<T>> plans;
  std::deque<Key> order;  // insertion order, for dropping the oldest
};

template <class T>
Cache<T>& cache() {
  static Cache<T> c;  // guarded by fftw_planner_mutex()
  return c;
}

template <class T>
SharedPlan<T> get_plan(std::int64_t rows, std::int64_t cols, bool inverse, int threads) {
  if (rows < 1 || cols < 1 || rows > INT_MAX || cols > INT_MAX)
    throw Unsupported("FFTW transform of " + std::to_string(rows) + "x" + std::to_string(cols) +
                      ": each side must be between 1 and " + std::to_string(INT_MAX));
  threads = std::max(threads, 1);
  const Key key{rows, cols, inverse, threads};
  std::lock_guard lock(fftw_planner_mutex());
  Cache<T>& c = cache<T>();
  if (auto it = c.plans.find(key); it != c.plans.end()) return it->second;

  // Plan on scratch arrays from fftw_malloc: their alignment is what the executions reuse.
  // FFTW_ESTIMATE does not touch them, so they are not zeroed (and cost no memory).
  FftwBuffer<T> real(rows * cols, false);
  FftwBuffer<typename Fftw<T>::complex> spec(rows * (cols / 2 + 1), false);
  const int r = static_cast<int>(rows), cc = static_cast<int>(cols);
  plan_threads<T>(threads);
  typename Fftw<T>::plan raw = inverse ? Api<T>::c2r(r, cc, spec.data(), real.data())
                                       : Api<T>::r2c(r, cc, real.data(), spec.data());
  plan_threads<T>(1);  // other planners in halfscope (ao/psf.cpp) plan for one thread
  if (raw == nullptr)
    throw Error("FFTW could not plan a " + std::to_string(rows) + "x" + std::to_string(cols) +
                (inverse ? " complex-to-real" : " real-to-complex") + " transform");
  // The last user may drop a plan from any thread, so the deleter locks the planner (a recursive
  // mutex: a plan dropped here, under the lock, on eviction or unwinding, locks it again).
  SharedPlan<T> plan(raw, [](typename Fftw<T>::plan p) {
    std::lock_guard l(fftw_planner_mutex());
    Api<T>::destroy(p);
  });
  c.plans.emplace(key, plan);
  c.order.push_back(key);
  while (c.order.size() > kMaxCachedPlans) {  // users still holding a dropped plan keep it alive
    c.plans.erase(c.order.front());
    c.order.pop_front();
  }
  return plan;
}

}  // namespace

template <class E>
FftwBuffer<E>::FftwBuffer(std::int64_t n, bool zero) {
  if (n < 0 || n > INT64_MAX / static_cast<std::int64_t>(sizeof(E))) throw std::bad_alloc();
  const std::int64_t bytes = std::max<std::int64_t>(n, 1) * static_cast<std::int64_t>(sizeof(E));
  void* p = fftw_malloc(static_cast<std::size_t>(bytes));
  if (p == nullptr) throw std::bad_alloc();
  if (zero) std::memset(p, 0, static_cast<std::size_t>(bytes));
  p_.reset(static_cast<E*>(p));
}

}  // namespace halfscope::conv::cpu

namespace halfscope::conv::cpu {

bool fftw_threads_linked() noexcept {
#if defined(HALFSCOPE_HAS_FFTW_THREADS)
  return true;
#else
  return false;
#endif
}

int fft_threads(std::int64_t points) {
#if defined(HALFSCOPE_HAS_FFTW_THREADS)
  if (points >= kThreadedFftPoints && !omp_in_parallel()) return std::max(omp_get_max_threads(), 1);
#else
  (void)points;
#endif
  return 1;
}

template <class T>
SharedPlan<T> plan_r2c(std::int64_t rows, std::int64_t cols, int threads) {
  return get_plan<T>(rows, cols, false, threads);
}
template <class T>
SharedPlan<T> plan_c2r(std::int64_t rows, std::int64_t cols, int threads) {
  return get_plan<T>(rows, cols, true, threads);
}
template SharedPlan<double> plan_r2c<double>(std::int64_t, std::int64_t, int);
template SharedPlan<float> plan_r2c<float>(std::int64_t, std::int64_t, int);
template SharedPlan<double> plan_c2r<double>(std::int64_t, std::int64_t, int);
template SharedPlan<float> plan_c2r<float>(std::int64_t, std::int64_t, int);

void execute_r2c(const SharedPlan<double>& p, double* in, fftw_complex* out) {
  fftw_execute_dft_r2c(p.get(), in, out);
}
void execute_r2c(const SharedPlan<float>& p, float* in, fftwf_complex* out) {
  fftwf_execute_dft_r2c(p.get(), in, out);
}
void execute_c2r(const SharedPlan<double>& p, fftw_complex* in, double* out) {
  fftw_execute_dft_c2r(p.get(), in, out);
}
void execute_c2r(const SharedPlan<float>& p, fftwf_complex* in, float* out) {
  fftwf_execute_dft_c2r(p.get(), in, out);
}

template <class T>
std::size_t cached_plan_count() {
  std::lock_guard lock(fftw_planner_mutex());
  return cache<T>().plans.size();
}
template std::size_t cached_plan_count<double>();
template std::size_t cached_plan_count<float>();

template class FftwBuffer<double>;
template class FftwBuffer<float>;
template class FftwBuffer<fftw_complex>;
template class FftwBuffer<fftwf_complex>;

}  // namespace halfscope::conv::cpu
