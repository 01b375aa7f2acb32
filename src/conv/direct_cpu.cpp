// CPU direct convolution: out(i, j) = sum_{u, v} kernel(u, v) * in(i + row0 - u, j + col0 - v).
//
// OpenMP splits the output rows (schedule static: every row costs the same). For one output row
// the loops run taps outer, output columns inner. For each kernel row u, the input row it needs,
// in(i + row0 - u, col0 - (kcols - 1) ... col0 + out_cols - 1), is first copied into a small
// buffer `ext`: the image row where it lies inside the image, zeros outside it (zero boundary:
// the valid column range is computed once, no per-element branch), or the row's wrapped segments
// (circular boundary). Then every tap (u, v) is a contiguous multiply-add over the whole output
// row, acc[j] += k(u, v) * ext[j + kcols - 1 - v], which the compiler vectorizes at -O3. Four
// taps are applied per pass over acc (register blocking): the accumulator is loaded and stored
// once per four multiply-adds instead of once per one, 2-3x faster in single precision (measured,
// see the report), and the order of the additions per pixel is unchanged.
//
// Accumulation order, per output pixel: taps in row-major order, u outer, v inner, starting from
// +0. Kernel rows that fall outside a zero-boundary image are skipped; columns outside it add an
// exact zero product, which leaves every accumulator unchanged (an accumulator that starts at +0
// never becomes -0 by adding zeros), so the result is bit for bit that of skipping them. The GPU
// naive half kernel uses the same order, so the two can be compared closely.
//
// Precisions (storage -> arithmetic):
//   double f64 -> f64; single f32 -> f32;
//   half   f16 -> f16: every product and every sum is rounded to FP16, exactly as the Half
//          operators do (values are held in float, which represents every FP16 value exactly, and
//          rounded with round_to_half, bit for bit equal to Half's rounding; see the tests);
//   mixed  f16 -> f32, rounded to FP16 once at the end;
//   bf16   bf16 -> f32, rounded to BF16 once at the end.
// An FP16 result that overflows (|value| >= 65520) is never returned as inf: NumericalError says
// how many pixels overflowed and the largest magnitude. (BF16 has float's range: no check.)
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "conv/backends.hpp"
#include "conv/cpu_common.hpp"

namespace halfscope::conv {

namespace {

constexpr std::string_view kBackend = "conv direct (CPU)";
constexpr std::array kSupported = {Precision::Double, Precision::Single, Precision::Half,
                                   Precision::Mixed, Precision::BF16};

/// acc <- acc + k * x in the arithmetic of the accumulator type (double, float). run4 applies four
/// consecutive taps v..v+3 of a kernel row, whose inputs are src[t], src[t-1], src[t-2], src[t-3].
struct MacNative {
  template <class A>
  static void run(A* __restrict dst, const A* __restrict src, A k, std::int64_t n) noexcept {
    for (std::int64_t t = 0; t < n; ++t) dst[t] += k * src[t];
  }
  template <class A>
  static void run4(A* __restrict dst, const A* __restrict src, const A* k,
                   std::int64_t n) noexcept {
    const A k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3];
    for (std::int64_t t = 0; t < n; ++t) {
      A a = dst[t];
      a += k0 * src[t];
      a += k1 * src[t - 1];
      a += k2 * src[t - 2];
      a += k3 * src[t - 3];
      dst[t] = a;
    }
  }
};

/// acc <- half(acc + half(k * x)): FP16 arithmetic, every product and sum rounded, on FP16 values
/// held in float. The product of two FP16 values is exact in float, so rounding it to FP16 is one
/// correct rounding, like Half's operator*; the float sum is rounded once more, like operator+.
struct MacHalf {
  static float mac(float a, float k, float x) noexcept {
    return cpu::round_to_half(a + cpu::round_to_half(k * x));
  }
  static void run(float* __restrict dst, const float* __restrict src, float k,
                  std::int64_t n) noexcept {
    for (std::int64_t t = 0; t < n; ++t) dst[t] = mac(dst[t], k, src[t]);
  }
  static void run4(float* __restrict dst, const float* __restrict src, const float* k,
                   std::int64_t n) noexcept {
    const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3];
    for (std::int64_t t = 0; t < n; ++t)
      dst[t] =
          mac(mac(mac(mac(dst[t], k0, src[t]), k1, src[t - 1]), k2, src[t - 2]), k3, src[t - 3]);
  }
};

// The row kernel is compiled twice, for AVX2 and for baseline x86-64, and picked at load time
// (GCC/Clang function multiversioning): the library is built for baseline x86-64, and AVX2's 8
// float lanes made the direct method ~2x faster on this project's build machine (report). The
// two clones give identical bits: the loops are elementwise multiplies and adds in the same
// order, and neither target has FMA to contract them.
#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#define HS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HS_CPU_CLONES
#endif

/// Per-thread buffers of one output row: the accumulator and the extended input row.
template <class A>
struct RowScratch {
  std::vector<A> acc, ext;
  explicit RowScratch(const Geometry& g)
      : acc(static_cast<std::size_t>(g.out_cols)),
        ext(static_cast<std::size_t>(g.out_cols + g.kcols - 1)) {}
};

/// One output row: s.acc[0, out_cols) = sum over taps, in the order documented above.
template <class A, class Mac>
[[gnu::always_inline]] inline void direct_row(const Geometry& g, const A* img, const A* ker,
                                              std::int64_t i, RowScratch<A>& s) {
  A* acc = s.acc.data();
  A* ext = s.ext.data();
  std::fill(s.acc.begin(), s.acc.end(), A(0));
  const bool zero = g.boundary == Boundary::Zero;
  // ext[t] = in(y, x0 + t): what output column j needs from tap v is ext[j + kc - 1 - v].
  const std::int64_t kc = g.kcols, w = g.out_cols + kc - 1, x0 = g.col0 - (kc - 1);
  for (std::int64_t u = 0; u < g.krows; ++u) {
    std::int64_t y = i + g.row0 - u;
    if (zero && (y < 0 || y >= g.rows)) continue;
    if (!zero) y = wrap_index(y, g.rows);
    const A* irow = img + y * g.cols;
    if (zero) {
      const std::int64_t lo = std::clamp<std::int64_t>(-x0, 0, w);
      const std::int64_t hi = std::clamp<std::int64_t>(g.cols - x0, lo, w);
      std::fill(ext, ext + lo, A(0));
      if (lo < hi) std::copy(irow + (x0 + lo), irow + (x0 + hi), ext + lo);
      std::fill(ext + hi, ext + w, A(0));
    } else {
      std::int64_t x = wrap_index(x0, g.cols);
      for (std::int64_t t = 0; t < w;) {
        const std::int64_t n = std::min(w - t, g.cols - x);
        std::copy(irow + x, irow + x + n, ext + t);
        t += n;
        x = 0;
      }
    }
    const A* krow = ker + u * kc;
    std::int64_t v = 0;
    for (; v + 4 <= kc; v += 4) Mac::run4(acc, ext + (kc - 1 - v), krow + v, g.out_cols);
    for (; v < kc; ++v) Mac::run(acc, ext + (kc - 1 - v), krow[v], g.out_cols);
  }
}

// The clones (non-templates: Clang multiversions no templates); direct_row inlines into each.
HS_CPU_CLONES void row_f64(const Geometry& g, const double* img, const double* ker, std::int64_t i,
                           RowScratch<double>& s) {
  direct_row<double, MacNative>(g, img, ker, i, s);
}
HS_CPU_CLONES void row_f32(const Geometry& g, const float* img, const float* ker, std::int64_t i,
                           RowScratch<float>& s) {
  direct_row<float, MacNative>(g, img, ker, i, s);
}
HS_CPU_CLONES void row_f16(const Geometry& g, const float* img, const float* ker, std::int64_t i,
                           RowScratch<float>& s) {
  direct_row<float, MacHalf>(g, img, ker, i, s);
}
void row(const Geometry& g, const double* img, const double* ker, std::int64_t i,
         RowScratch<double>& s, MacNative) {
  row_f64(g, img, ker, i, s);
}
void row(const Geometry& g, const float* img, const float* ker, std::int64_t i,
         RowScratch<float>& s, MacNative) {
  row_f32(g, img, ker, i, s);
}
void row(const Geometry& g, const float* img, const float* ker, std::int64_t i,
         RowScratch<float>& s, MacHalf) {
  row_f16(g, img, ker, i, s);
}

/// The exact (FP64) value of one output pixel, for the overflow message of half precision.
double exact_pixel(const Geometry& g, const float* img, const float* ker, std::int64_t i,
                   std::int64_t j) {
  double s = 0;
  for (std::int64_t u = 0; u < g.krows; ++u)
    for (std::int64_t v = 0; v < g.kcols; ++v) {
      std::int64_t y = i + g.row0 - u, x = j + g.col0 - v;
      if (g.boundary == Boundary::Zero) {
        if (y < 0 || y >= g.rows || x < 0 || x >= g.cols) continue;
      } else {
        y = wrap_index(y, g.rows);
        x = wrap_index(x, g.cols);
      }
      s += static_cast<double>(ker[u * g.kcols + v]) * img[y * g.cols + x];
    }
  return s;
}

/// Double and single: accumulate a row in a per-thread buffer (it stays in L1 over the taps), then
/// copy it to the output row.
template <class T>
void run_native(const Geometry& g, const Array& image, const Array& kernel, Array& out) {
  const T* img = image.data_as<T>();
  const T* ker = kernel.data_as<T>();
  T* o = out.data_as<T>();
#pragma omp parallel if (g.direct_macs() >= 16 * cpu::kParallelWork)
  {
    RowScratch<T> s(g);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < g.out_rows; ++i) {
      row(g, img, ker, i, s, MacNative{});
      std::copy(s.acc.begin(), s.acc.end(), o + i * g.out_cols);
    }
  }
}

/// Half, mixed, bf16: widen the inputs to float once (exact), accumulate a row in float, round it
/// to the storage type S, counting FP16 overflow.
template <class S, class Mac>
void run_narrow(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                Array& out) {
  const std::vector<float> img = cpu::widen_all<float>(image.data_as<S>(), image.size());
  const std::vector<float> ker = cpu::widen_all<float>(kernel.data_as<S>(), kernel.size());
  S* o = out.data_as<S>();
  std::int64_t overflowed = 0, nonfinite = 0;
  double largest = 0;
#pragma omp parallel reduction(+ : overflowed, nonfinite) reduction(max : largest) \
    if (g.direct_macs() >= 16 * cpu::kParallelWork)
  {
    RowScratch<float> s(g);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < g.out_rows; ++i) {
      row(g, img.data(), ker.data(), i, s, Mac{});
      S* orow = o + i * g.out_cols;
      for (std::int64_t j = 0; j < g.out_cols; ++j) {
        const float a = s.acc[static_cast<std::size_t>(j)];
        orow[j] = S(a);
        if constexpr (std::is_same_v<S, Half>) {
          const float m = std::fabs(a);
          if (!(m < 65520.0f)) {  // also true for NaN
            ++overflowed;
            if (std::isfinite(m))
              largest = std::max(largest, static_cast<double>(m));
            else
              ++nonfinite;
          }
        } else if constexpr (std::is_same_v<S, BFloat16>) {
          // BF16 has float's range: only a float sum that rounds past the largest BF16, or
          // that overflowed float itself, ends up non-finite.
          if (!std::isfinite(orow[j].to_float())) {
            ++overflowed;
            if (std::isfinite(a))
              largest = std::max(largest, static_cast<double>(std::fabs(a)));
            else
              ++nonfinite;
          }
        }
      }
    }
  }
  if (overflowed == 0) return;
  // Inputs that are already inf or NaN give inf or NaN honestly; only finite inputs that
  // overflowed in the arithmetic are an error.
  if (!cpu::all_finite<float>(img) || !cpu::all_finite<float>(ker)) return;
  double exact = -1;
  if (nonfinite > 0 && std::is_same_v<S, Half>) {  // half: FP16 sums overflowed; FP64 magnitudes
    exact = 0;
#pragma omp parallel for schedule(static) reduction(max : exact)
    for (std::int64_t i = 0; i < g.out_rows; ++i)
      for (std::int64_t j = 0; j < g.out_cols; ++j)
        if (!(std::fabs(static_cast<float>(o[i * g.out_cols + j])) < 65520.0f))
          exact = std::max(exact, std::fabs(exact_pixel(g, img.data(), ker.data(), i, j)));
  }
  cpu::throw_fp16_overflow(kBackend, p, {overflowed, nonfinite, largest}, g.out_rows * g.out_cols,
                           exact);
}

}  // namespace

void direct_cpu(const Geometry& g, Precision p, const Array& image, const Array& kernel,
                Array& out) {
  if (std::find(kSupported.begin(), kSupported.end(), p) == kSupported.end())
    cpu::throw_unsupported(kBackend, p, kSupported);
  cpu::check_arrays(kBackend, g, storage_dtype(p), image, kernel, out);
  switch (p) {
    case Precision::Double:
      return run_native<double>(g, image, kernel, out);
    case Precision::Single:
      return run_native<float>(g, image, kernel, out);
    case Precision::Half:
      return run_narrow<Half, MacHalf>(g, p, image, kernel, out);
    case Precision::Mixed:
      return run_narrow<Half, MacNative>(g, p, image, kernel, out);
    case Precision::BF16:
      return run_narrow<BFloat16, MacNative>(g, p, image, kernel, out);
    default:
      cpu::throw_unsupported(kBackend, p, kSupported);
  }
}

}  // namespace halfscope::conv
