// CPU ceilings: memcpy bandwidth and BLAS GEMM rates (include/halfscope/bench/ceilings.hpp). The
// GPU part is ceilings_cuda.cu; in a build without CUDA measure_gpu_ceilings says so.
#include "halfscope/bench/ceilings.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_BLAS
#include <cblas.h>
#endif

namespace halfscope::bench {

namespace {

constexpr std::int64_t kMiB = 1 << 20;

// Deterministic "fresh random" values in [-1, 1): splitmix64 of the index. Never zeros, so no
// zero-skipping shortcut in a library can flatter the measurement.
inline double hash_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-52 - 1.0;
}

template <class T>
void fill_random(T* p, std::int64_t n, std::uint64_t seed) {
  // Parallel first touch: each thread's pages end up on its NUMA node, as in the timed loop.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(hash_uniform(seed, static_cast<std::uint64_t>(i)));
}

template <class T>
std::unique_ptr<T[]> allocate(std::int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<std::size_t>(n)]);
}

// Times `run` after one warm-up call, choosing 3 to 10 repeats that fit the time budget.
Stats time_within(const std::function<void()>& run, double budget_s, double warmup_ms) {
  const int fit = warmup_ms > 0 ? static_cast<int>(budget_s * 1e3 / warmup_ms) : 10;
  return time_host(run, 0, std::clamp(fit, 3, 10));
}

double warmup_ms(const std::function<void()>& run) {
  return time_host(run, 0, 1).median_ms;
}

void say(const CeilingsOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

BenchCase memcpy_case(const CeilingsOptions& o) {
  const std::int64_t bytes = o.copy_bytes > 0 ? o.copy_bytes : (o.quick ? 64 : 256) * kMiB;
  const int threads = omp_get_max_threads();
  say(o, "CPU copy: parallel memcpy of " + std::to_string(bytes / kMiB) + " MiB, " +
             std::to_string(threads) + " threads");
  auto src = allocate<std::uint64_t>(bytes / 8);
  auto dst = allocate<std::uint64_t>(bytes / 8);
  const std::int64_t words = bytes / 8;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < words; ++i) {
    src[i] = static_cast<std::uint64_t>(hash_uniform(7, static_cast<std::uint64_t>(i)) * 0x1p62);
    dst[i] = 0;
  }
  const auto run = [&] {
  // One contiguous chunk per thread, the same split as the first touch above.
#pragma omp parallel
    {
      const std::int64_t t = omp_get_thread_num();
      const std::int64_t nt = omp_get_num_threads();
      const std::int64_t lo = words * t / nt;
      const std::int64_t hi = words * (t + 1) / nt;
      std::memcpy(dst.get() + lo, src.get() + lo, static_cast<std::size_t>(hi - lo) * 8);
    }
  };
  const double first = warmup_ms(run);
  BenchCase c;
  c.implementation = "libc";
  c.method = "memcpy";
  c.precision = "bytes";
  c.params = {
      {"bytes", bytes}, {"threads", std::int64_t{threads}}, {"counted", std::string("read+write")}};
  c.stats = time_within(run, o.cpu_seconds_per_measurement, first);
  if (std::memcmp(dst.get(), src.get(), static_cast<std::size_t>(bytes / 8) * 8) != 0)
    throw NumericalError("CPU copy ceiling: the copy does not match its source");
  c.GBps = gbps(2.0 * static_cast<double>(bytes), c.stats.median_ms);
  return c;
}

#if HALFSCOPE_HAS_BLAS
template <class T>
void gemm(std::int64_t n, const T* a, const T* b, T* c) {
  const auto m = static_cast<blasint>(n);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, a, m, b, m, 0.0f, c, m);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0, a, m, b, m, 0.0, c, m);
}

template <class T>
BenchCase gemm_case(const CeilingsOptions& o, const char* precision) {
  std::int64_t n = o.gemm_n > 0 ? o.gemm_n : (o.quick ? 1024 : 2048);
  for (;;) {
    say(o, std::string("CPU GEMM ") + precision + " n=" + std::to_string(n));
    auto a = allocate<T>(n * n), b = allocate<T>(n * n), c = allocate<T>(n * n);
    fill_random(a.get(), n * n, 11);
    fill_random(b.get(), n * n, 12);
    const auto run = [&] { gemm<T>(n, a.get(), b.get(), c.get()); };
    const double first = warmup_ms(run);
    // A slow machine gets a smaller problem rather than a run that overstays its budget; the
    // rate of a BLAS GEMM hardly changes between n = 1024 and 2048.
    if (o.gemm_n <= 0 && n > 512 && first * 3 > o.cpu_seconds_per_measurement * 1e3) {
      n /= 2;
      continue;
    }
    BenchCase bc;
#ifdef OPENBLAS_VERSION
    bc.implementation = "openblas";
    bc.params["threads"] = std::int64_t{openblas_get_num_threads()};
#else
    bc.implementation = "cblas";
#endif
    bc.method = std::is_same_v<T, float> ? "sgemm" : "dgemm";
    bc.precision = precision;
    bc.params["n"] = n;
    bc.stats = time_within(run, o.cpu_seconds_per_measurement, first);
    const double nn = static_cast<double>(n);
    bc.TFLOPs = tflops(2.0 * nn * nn * nn, bc.stats.median_ms);
    if (!std::isfinite(static_cast<double>(c[0])))
      throw NumericalError(std::string("CPU GEMM ceiling (") + precision + "): non-finite result");
    return bc;
  }
}
#endif

}  // namespace

BenchReport measure_cpu_ceilings(const CeilingsOptions& options) {
  BenchReport r = BenchReport::start("ceilings", describe_cpu());
  BenchCase copy = memcpy_case(options);
  r.ceilings.copy_GBps = copy.GBps;
  r.cases.push_back(std::move(copy));
#if HALFSCOPE_HAS_BLAS
  BenchCase s = gemm_case<float>(options, "single");
  r.ceilings.fp32_TFLOPs = s.TFLOPs;
  r.cases.push_back(std::move(s));
  BenchCase d = gemm_case<double>(options, "double");
  r.ceilings.fp64_TFLOPs = d.TFLOPs;
  r.cases.push_back(std::move(d));
#else
  say(options, "CPU GEMM: built without BLAS; GEMM ceilings not measured");
#endif
  return r;
}

#if !HALFSCOPE_WITH_CUDA
BenchReport measure_gpu_ceilings(int /*device*/, const CeilingsOptions& /*options*/) {
  throw Unsupported("GPU ceilings: halfscope was built without CUDA (HALFSCOPE_WITH_CUDA=OFF)");
}
#endif

}  // namespace halfscope::bench
