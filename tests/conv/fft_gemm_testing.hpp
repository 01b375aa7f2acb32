// Shared by the GPU FFT and GEMM convolution tests (gpu_fft_cuda.cpp, gpu_gemm_cuda.cpp): an FP64
// direct reference written from geometry.hpp's formula, inputs generated in the storage type,
// NaN-poisoned outputs (an element never written fails), the tolerances, and the geometries both
// sweep.
//
// Tolerances (u_c: the arithmetic's unit roundoff; u_s: the storage's; inputs are generated in
// the storage type, so only arithmetic and the output's rounding err):
//  * FFT, norm-wise. Each transform is norm-wise stable, ||dX||_2 <= eta log2(N) ||X||_2 with
//    eta ~ 6.7 u_c per radix-2 stage (Higham, Accuracy and Stability, 2nd ed., sec. 24.1); the
//    product spreads the image-spectrum error by at most ||K||_inf = max |kernel spectrum|
//    (computed here exactly, by a DFT of the folded kernel on the method's grid), and Parseval
//    brings it back: ||out - ref||_2 <= C u_c log2(N) ||x_grid||_2 ||K||_inf + u_s ||ref||_2.
//    An FP16 radix-2 emulation (every butterfly rounded, the 2^-m/2 scalings included) gave
//    C ~ 0.07 - 0.13 for signed and positive data; C = 4 leaves a 30x margin and still flags any
//    index error (those are O(||ref||)). ||x_grid||_2 <= 2 ||x||_2 for the circular layout (each
//    pixel appears at most twice per axis). Every element must also be finite and within the
//    same bound (|e_j| <= ||e||_2).
//  * GEMM, componentwise (any summation order): |out - ref| <= C (K u_acc + 2 u_in) sum|k||x|
//    + u_s |ref|, K = taps, u_in the rounding of the inputs to TF32 (tf32 only: 2^-10, as the
//    hardware may truncate), C = 4 for the tensor cores' accumulation, which is not IEEE
//    round-to-nearest.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/precision.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>

#include "conv/backends.hpp"
#include "conv/fft_layout.hpp"
#include "conv/fft_plan_cache_cuda.hpp"
#include "conv/gemm_cuda.hpp"
#include "cpu_backend_testing.hpp"
#include "halfscope/core/cuda.hpp"

namespace halfscope::conv::fftgemm_testing {

using Backend = void (*)(const Geometry&, Precision, const Array&, const Array&, Array&,
                         cudaStream_t);

/// Values exactly representable in the storage type, with the device copy.
struct Data {
  std::vector<double> v;
  Array device;
};

/// Magnitudes in [lo, hi], a random sign unless `positive`: never zeros, no FP16 subnormals.
inline Data make_data(std::int64_t rows, std::int64_t cols, DType dt, std::uint64_t seed,
                      double lo = 0.25, double hi = 1.0, bool positive = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Array f(DType::f64, {rows, cols});
  for (std::int64_t e = 0; e < rows * cols; ++e)
    f.data_as<double>()[e] = (positive || (rng() & 1) ? 1.0 : -1.0) * dist(rng);
  const Array host = f.astype(dt);
  Data d;
  d.v.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t e = 0; e < rows * cols; ++e)
    d.v[static_cast<std::size_t>(e)] = host.at_as_double(e);
  d.device = host.to(Memory::device);
  // cudaMemcpy from pageable memory may return before its DMA lands, and the backends run on a
  // non-blocking stream that does not wait for the legacy one.
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

inline Data from_values(const std::vector<double>& values, std::int64_t rows, std::int64_t cols,
                        DType dt) {
  Array f(DType::f64, {rows, cols});
  std::copy(values.begin(), values.end(), f.data_as<double>());
  const Array host = f.astype(dt);
  Data d;
  for (std::int64_t e = 0; e < rows * cols; ++e) d.v.push_back(host.at_as_double(e));
  d.device = host.to(Memory::device);
  // cudaMemcpy from pageable memory may return before its DMA lands, and the backends run on a
  // non-blocking stream that does not wait for the legacy one.
  HS_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

// The FP64 reference shared with the CPU backends' tests (one formula, geometry.hpp's).
using conv::testing::Reference;
using conv::testing::reference;

/// Runs a backend on a NaN-poisoned output; returns the output on the host as doubles.
inline std::vector<double> run(Backend f, const Geometry& g, Precision p, const Array& image,
                               const Array& kernel) {
  Array out(storage_dtype(p), {g.out_rows, g.out_cols}, Memory::device);
  cuda::Stream s;
  HS_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xff, static_cast<std::size_t>(out.nbytes()), s.get()));
  f(g, p, image, kernel, out, s.get());
  s.synchronize();
  const Array host = out.to(Memory::host);
  std::vector<double> v(static_cast<std::size_t>(host.size()));
  for (std::int64_t e = 0; e < host.size(); ++e)
    v[static_cast<std::size_t>(e)] = host.at_as_double(e);
  return v;
}

/// max |DFT of the (circularly folded) kernel| over the FFT method's grid.
inline double kernel_spectrum_max(const Geometry& g, Precision p, const std::vector<double>& ker) {
  const FftLayout l =
      plan_fft_layout(g, p == Precision::Half ? FftSizeRule::PowerOfTwo : FftSizeRule::Smooth);
  const bool circ = g.boundary == Boundary::Circular;
  const std::int64_t fr = circ ? std::min(g.krows, g.rows) : g.krows;
  const std::int64_t fc = circ ? std::min(g.kcols, g.cols) : g.kcols;
  std::vector<double> fold(static_cast<std::size_t>(fr * fc), 0.0);
  for (std::int64_t u = 0; u < g.krows; ++u)
    for (std::int64_t v = 0; v < g.kcols; ++v)
      fold[static_cast<std::size_t>((circ ? u % g.rows : u) * fc + (circ ? v % g.cols : v))] +=
          ker[static_cast<std::size_t>(u * g.kcols + v)];
  const std::int64_t nr = l.rows.n, nc = l.cols.n;
  std::vector<std::complex<double>> t(static_cast<std::size_t>(fr * nc));
  for (std::int64_t a = 0; a < fr; ++a)
    for (std::int64_t f2 = 0; f2 < nc; ++f2) {
      std::complex<double> s = 0;
      for (std::int64_t b = 0; b < fc; ++b)
        s += fold[static_cast<std::size_t>(a * fc + b)] *
             std::polar(1.0, -2 * std::numbers::pi * static_cast<double>((f2 * b) % nc) /
                                 static_cast<double>(nc));
      t[static_cast<std::size_t>(a * nc + f2)] = s;
    }
  double best = 0;
  for (std::int64_t f1 = 0; f1 < nr; ++f1)
    for (std::int64_t f2 = 0; f2 < nc; ++f2) {
      std::complex<double> s = 0;
      for (std::int64_t a = 0; a < fr; ++a)
        s += t[static_cast<std::size_t>(a * nc + f2)] *
             std::polar(1.0, -2 * std::numbers::pi * static_cast<double>((f1 * a) % nr) /
                                 static_cast<double>(nr));
      best = std::max(best, std::abs(s));
    }
  return best;
}

inline double norm2(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x * x;
  return std::sqrt(s);
}

inline std::string describe(const Geometry& g, Precision p) {
  return std::string(precision_name(p)) + ": " + std::to_string(g.rows) + "x" +
         std::to_string(g.cols) + " image, " + std::to_string(g.krows) + "x" +
         std::to_string(g.kcols) + " kernel, out " + std::to_string(g.out_rows) + "x" +
         std::to_string(g.out_cols) + " at (" + std::to_string(g.row0) + ", " +
         std::to_string(g.col0) + "), " + (g.boundary == Boundary::Zero ? "zero" : "circular");
}

/// FFT: the norm-wise bound of the file comment, and every element finite and within it.
inline void expect_fft_close(const Geometry& g, Precision p, const Data& img, const Data& ker,
                             const std::vector<double>& got) {
  const Reference ref = reference(g, img.v, ker.v);
  const FftLayout l =
      plan_fft_layout(g, p == Precision::Half ? FftSizeRule::PowerOfTwo : FftSizeRule::Smooth);
  const double log2n = std::max(1.0, std::log2(static_cast<double>(l.rows.n * l.cols.n)));
  const double u_c = p == Precision::Double ? 0x1p-53 : p == Precision::Half ? 0x1p-11 : 0x1p-24;
  const double u_s = storage_unit_roundoff(p);
  const double grid_norm = (g.boundary == Boundary::Circular ? 2.0 : 1.0) * norm2(img.v);
  const double arith = 4.0 * u_c * log2n * grid_norm * kernel_spectrum_max(g, p, ker.v);
  std::vector<double> err(got.size());
  for (std::size_t e = 0; e < got.size(); ++e) {
    ASSERT_TRUE(std::isfinite(got[e]))
        << describe(g, p) << ": output " << e << " not written or not finite";
    err[e] = got[e] - ref.value[e];
    ASSERT_LE(std::abs(err[e]), arith + u_s * std::abs(ref.value[e]))
        << describe(g, p) << ", output " << e;
  }
  EXPECT_LE(norm2(err), arith + u_s * norm2(ref.value)) << describe(g, p);
}

/// GEMM: componentwise.
inline void expect_gemm_close(const Geometry& g, Precision p, const Data& img, const Data& ker,
                              const std::vector<double>& got) {
  const Reference ref = reference(g, img.v, ker.v);
  const double taps = static_cast<double>(g.krows * g.kcols);
  const double u_acc = p == Precision::Double ? 0x1p-53 : p == Precision::Half ? 0x1p-11 : 0x1p-24;
  // TF32 keeps 10 mantissa bits; the tensor cores may truncate FP32 inputs rather than round them.
  const double u_in = p == Precision::TF32 ? 0x1p-10 : 0.0;
  const double u_s = storage_unit_roundoff(p);
  for (std::size_t e = 0; e < got.size(); ++e) {
    ASSERT_TRUE(std::isfinite(got[e]))
        << describe(g, p) << ": output " << e << " not written or not finite";
    ASSERT_LE(std::abs(got[e] - ref.value[e]),
              4.0 * (taps * u_acc + 2 * u_in) * ref.abs[e] + u_s * std::abs(ref.value[e]))
        << describe(g, p) << ", output " << e;
  }
}

inline Geometry geo(std::int64_t r, std::int64_t c, std::int64_t kr, std::int64_t kc,
                    std::int64_t orows, std::int64_t ocols, std::int64_t row0, std::int64_t col0,
                    Boundary b) {
  Geometry g;
  g.rows = r;
  g.cols = c;
  g.krows = kr;
  g.kcols = kc;
  g.out_rows = orows;
  g.out_cols = ocols;
  g.row0 = row0;
  g.col0 = col0;
  g.boundary = b;
  return g;
}

/// full, same (both centrings), valid where it exists, windows straddling or beyond the ends.
inline std::vector<Geometry> geometries(std::int64_t r, std::int64_t c, std::int64_t kr,
                                        std::int64_t kc) {
  std::vector<Geometry> gs;
  for (const Boundary b : {Boundary::Zero, Boundary::Circular}) {
    gs.push_back(geo(r, c, kr, kc, r + kr - 1, c + kc - 1, 0, 0, b));
    gs.push_back(geo(r, c, kr, kc, r, c, (kr - 1) / 2, (kc - 1) / 2, b));
    gs.push_back(geo(r, c, kr, kc, r, c, kr / 2, kc / 2, b));
    if (r >= kr && c >= kc)
      gs.push_back(geo(r, c, kr, kc, r - kr + 1, c - kc + 1, kr - 1, kc - 1, b));
    gs.push_back(geo(r, c, kr, kc, r + 3, std::max<std::int64_t>(1, c / 2), -5, c / 2 + kc, b));
    gs.push_back(geo(r, c, kr, kc, 3, c + 5, r + kr + 2, -9, b));  // zero boundary: all zero
  }
  return gs;
}

struct Shape4 {
  std::int64_t r, c, kr, kc;
};

// Odd and even kernels, non-square, 1xN and Nx1, kernels larger than the image (under the
// circular boundary 13x11 on 9x7 folds once per axis, 11x3 on 4x6 three times along rows).
inline constexpr Shape4 kShapes[] = {
    {37, 53, 5, 4}, {1, 61, 1, 7}, {45, 1, 6, 1}, {9, 7, 13, 11}, {4, 6, 11, 3}};

inline void sweep(Backend f, Precision p,
                  void (*check)(const Geometry&, Precision, const Data&, const Data&,
                                const std::vector<double>&),
                  const std::vector<Shape4>& shapes) {
  std::uint64_t seed = 100;
  for (const Shape4& s : shapes) {
    const Data img = make_data(s.r, s.c, storage_dtype(p), ++seed);
    const Data ker = make_data(s.kr, s.kc, storage_dtype(p), ++seed);
    for (const Geometry& g : geometries(s.r, s.c, s.kr, s.kc)) {
      SCOPED_TRACE(describe(g, p));
      check(g, p, img, ker, run(f, g, p, img.device, ker.device));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

inline std::vector<Shape4> common_shapes() {
  return {std::begin(kShapes), std::end(kShapes)};
}

}  // namespace halfscope::conv::fftgemm_testing

#endif  // HALFSCOPE_WITH_CUDA
