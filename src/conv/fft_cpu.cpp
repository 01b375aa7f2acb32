// CPU FFT convolution.
//
// double and single: FFTW r2c / c2r in the storage precision. mixed and bf16: FP16 / BF16
// storage widened to float (exact), FFTW single precision, the result rounded once to the storage
// type. half: an emulated FP16 FFT (fft_half_cpu.cpp). The layout on the transform grid
// (fft_cpu_internal.hpp):
//  zero boundary: image and kernel zero-padded to a grid that holds every requested window
//    position without wrap-around (at most (rows + krows - 1) x (cols + kcols - 1), rounded up to
//    a length FFTW likes), then the window of geometry.hpp is read out;
//  circular boundary: the image is periodic with period (rows, cols): the circular convolution is
//    computed on the rows x cols grid itself, the kernel wrapped onto it (a kernel larger than the
//    image folds: its taps that land on the same grid position are summed), and
//    out(i, j) = circ((i + row0) mod rows, (j + col0) mod cols).
// FFTW plans are cached per shape and precision (fft_plan_cache.hpp).
#include <algorithm>
#include <array>
#include <vector>

#include "conv/backends.hpp"
#include "conv/fft_cpu_internal.hpp"
#include "conv/fft_plan_cache.hpp"
#include "conv/fft_radix2.hpp"

namespace halfscope::conv {

namespace cpu {

std::int64_t next_pow2(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::int64_t next_smooth(std::int64_t n) {
  if (n <= 1) return 1;
  for (std::int64_t m = n + (n & 1);; m += 2) {  // even: FFTW's r2c is faster on even lengths
    std::int64_t r = m;
    for (std::int64_t f : {2, 3, 5, 7})
      while (r % f == 0) r /= f;
    if (r == 1) return m;
  }
}

Axis make_axis(std::int64_t extent, std::int64_t k, std::int64_t nout, std::int64_t off,
               Boundary boundary, GridSizes sizes) {
  Axis ax;
  ax.out.resize(static_cast<std::size_t>(nout));
  if (boundary == Boundary::Zero) {
    // Full convolution support [0, L). An output at full index f in [lo, hi] reads C[f]; C is the
    // full result wrapped modulo n, so it is clean there when n > hi and f + n >= L for f >= lo.
    const std::int64_t full = extent + k - 1;
    const std::int64_t lo = std::max<std::int64_t>(off, 0);
    const std::int64_t hi = std::min(off + nout, full) - 1;
    std::int64_t need = std::max(extent, k);
    if (lo <= hi) need = std::max({need, full - lo, hi + 1});
    ax.n = sizes == GridSizes::Pow2 ? next_pow2(need) : next_smooth(need);
    ax.a_src.resize(static_cast<std::size_t>(extent));
    for (std::int64_t t = 0; t < extent; ++t) ax.a_src[static_cast<std::size_t>(t)] = t;
    ax.k_mod = ax.n;  // n >= k: no folding
    ax.k_len = k;
    for (std::int64_t i = 0; i < nout; ++i) {
      const std::int64_t f = i + off;
      ax.out[static_cast<std::size_t>(i)] = (f >= 0 && f < full) ? f : -1;
    }
    return ax;
  }
  ax.k_mod = extent;
  ax.k_len = std::min(k, extent);
  if (sizes == GridSizes::Smooth || is_pow2(extent)) {
    ax.n = extent;
    ax.a_src.resize(static_cast<std::size_t>(extent));
    for (std::int64_t t = 0; t < extent; ++t) ax.a_src[static_cast<std::size_t>(t)] = t;
    for (std::int64_t i = 0; i < nout; ++i)
      ax.out[static_cast<std::size_t>(i)] = wrap_index(i + off, extent);
    return ax;
  }
  // Periodic extension: A[t] = image[(t - (k' - 1)) mod extent] for t < extent + k' - 1, so the
  // linear convolution with the folded kernel at f = i' + k' - 1 is circ(i').
  const std::int64_t ext = extent + ax.k_len - 1;
  ax.n = next_pow2(ext);
  ax.a_src.resize(static_cast<std::size_t>(ext));
  for (std::int64_t t = 0; t < ext; ++t)
    ax.a_src[static_cast<std::size_t>(t)] = wrap_index(t - (ax.k_len - 1), extent);
  for (std::int64_t i = 0; i < nout; ++i)
    ax.out[static_cast<std::size_t>(i)] = wrap_index(i + off, extent) + ax.k_len - 1;
  return ax;
}

}  // namespace cpu

namespace {

constexpr std::string_view kBackend = "conv fft (CPU)";
constexpr std::array kSupported = {Precision::Double, Precision::Single, Precision::Half,
                                   Precision::Mixed, Precision::BF16};

/// FFTW convolution in T (double or float) of storage-type S inputs, written as S.
template <class T, class S>
cpu::OverflowStats fftw_conv(const Geometry& g, const cpu::Axis& ar, const cpu::Axis& ac,
                             const S* img, const S* ker, S* out) {
  using Complex = typename cpu::Fftw<T>::complex;
  const std::int64_t P = ar.n, Q = ac.n, Qh = Q / 2 + 1;
  const bool parallel = static_cast<double>(P) * static_cast<double>(Q) >= cpu::kParallelWork;
  cpu::FftwBuffer<T> a(P * Q), b(P * Q);  // zero-filled
  const auto a_rows = static_cast<std::int64_t>(ar.a_src.size());
  const auto a_cols = static_cast<std::int64_t>(ac.a_src.size());
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < a_rows; ++t) {
    const S* src = img + ar.a_src[static_cast<std::size_t>(t)] * g.cols;
    T* dst = a.data() + t * Q;
    for (std::int64_t c = 0; c < a_cols; ++c)
      dst[c] = static_cast<T>(src[ac.a_src[static_cast<std::size_t>(c)]]);
  }
  // Kernel onto the grid, row-major, folding (summing in T) where it is larger than the period.
  for (std::int64_t u = 0; u < g.krows; ++u)
    for (std::int64_t v = 0; v < g.kcols; ++v)
      b.data()[(u % ar.k_mod) * Q + (v % ac.k_mod)] += static_cast<T>(ker[u * g.kcols + v]);

  cpu::FftwBuffer<Complex> fa(P * Qh, false), fb(P * Qh, false);  // written whole by r2c
  const auto fwd = cpu::plan_r2c<T>(P, Q);
  const auto inv = cpu::plan_c2r<T>(P, Q);
  // The two forward transforms are independent: one per thread (FFTW's execute is thread-safe
  // on distinct arrays; this build has no FFTW threads library to split one transform).
#pragma omp parallel sections if (parallel)
  {
#pragma omp section
    cpu::execute_r2c(fwd, a.data(), fa.data());
#pragma omp section
    cpu::execute_r2c(fwd, b.data(), fb.data());
  }
  const std::int64_t nspec = P * Qh;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t t = 0; t < nspec; ++t) {
    const T re = fa.data()[t][0] * fb.data()[t][0] - fa.data()[t][1] * fb.data()[t][1];
    const T im = fa.data()[t][0] * fb.data()[t][1] + fa.data()[t][1] * fb.data()[t][0];
    fa.data()[t][0] = re;
    fa.data()[t][1] = im;
  }
  cpu::execute_c2r(inv, fa.data(), a.data());  // a <- P * Q * circular convolution
  const T scale = T(1) / static_cast<T>(P * Q);
  const T* c = a.data();
  return cpu::write_output(
      ar, ac, out, [&](std::int64_t r, std::int64_t col) { return c[r * Q + col] * scale; });
}

}  // namespace

void fft_cpu(const Geometry& g, Precision p, const Array& image, const Array& kernel, Array& out) {
  if (std::find(kSupported.begin(), kSupported.end(), p) == kSupported.end())
    cpu::throw_unsupported(kBackend, p, kSupported);
  cpu::check_arrays(kBackend, g, storage_dtype(p), image, kernel, out);
  if (g.out_rows == 0 || g.out_cols == 0) return;
  const auto sizes = p == Precision::Half ? cpu::GridSizes::Pow2 : cpu::GridSizes::Smooth;
  const cpu::Axis ar = cpu::make_axis(g.rows, g.krows, g.out_rows, g.row0, g.boundary, sizes);
  const cpu::Axis ac = cpu::make_axis(g.cols, g.kcols, g.out_cols, g.col0, g.boundary, sizes);
  switch (p) {
    case Precision::Double:
      fftw_conv<double>(g, ar, ac, image.data_as<double>(), kernel.data_as<double>(),
                        out.data_as<double>());
      return;
    case Precision::Single:
      fftw_conv<float>(g, ar, ac, image.data_as<float>(), kernel.data_as<float>(),
                       out.data_as<float>());
      return;
    case Precision::BF16:
      fftw_conv<float>(g, ar, ac, image.data_as<BFloat16>(), kernel.data_as<BFloat16>(),
                       out.data_as<BFloat16>());
      return;
    case Precision::Mixed: {
      const Half* img = image.data_as<Half>();
      const Half* ker = kernel.data_as<Half>();
      const cpu::OverflowStats s = fftw_conv<float>(g, ar, ac, img, ker, out.data_as<Half>());
      if (s.overflowed > 0 && cpu::all_finite<float>(cpu::widen_all<float>(img, image.size())) &&
          cpu::all_finite<float>(cpu::widen_all<float>(ker, kernel.size())))
        cpu::throw_fp16_overflow(kBackend, p, s, g.out_rows * g.out_cols, -1);
      return;
    }
    case Precision::Half:
      cpu::half_fft_conv(g, ar, ac, image.data_as<Half>(), kernel.data_as<Half>(),
                         out.data_as<Half>());
      return;
    default:
      cpu::throw_unsupported(kBackend, p, kSupported);
  }
}

}  // namespace halfscope::conv
