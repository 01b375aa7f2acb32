// Shared by the tests of the direct GPU convolutions (naive, register): test data, the FP64
// reference with its derived error bound, and the bit-exact emulation of the kernels' documented
// order. gpu_naive_register.cpp runs them on the GPU, test_register_emulated.cpp on the host
// emulation of the same kernel code (direct_cuda_emulator.hpp).
//
// Two checks per output pixel:
//  1. |out - ref| <= C (K u_c + 2 u_s) sum|k||in| + u_s |ref| + C K eta, with K = krows*kcols,
//     u_c / u_s the compute / storage unit roundoffs, eta half the compute format's smallest
//     subnormal (FP16 underflow), C = 2: recursive summation of K products with one rounding each
//     is within gamma_K = K u / (1 - K u) <= 2 K u of the exact sum while K u <= 1/2 (Higham,
//     Accuracy and Stability, 3.1); the inputs are exact in storage here, so 2 u_s is slack, and
//     u_s |ref| covers the final rounding to storage (mixed, bf16);
//  2. bit-exact agreement with a host emulation of the documented order (taps (u, v) ascending,
//     acc = fma(k, in, acc) from 0; FP16 fused and rounded once per tap, FP32 fmaf, FP64 fma),
//     which both kernels follow; the test data keep every FP16 fma exact in double (make_data).
// Outputs are poisoned with NaN first, so an element never written fails both checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "conv/geometry.hpp"
#include "cpu_backend_testing.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/core/half.hpp"
#include "halfscope/core/precision.hpp"
#include "test_support.hpp"

namespace halfscope::conv::nrtest {

inline double round_to(DType t, double x) {
  switch (t) {
    case DType::f16:
      return Half(x).to_float();
    case DType::bf16:
      return BFloat16(x).to_float();
    case DType::f32:
      return static_cast<float>(x);
    default:
      return x;
  }
}

/// A host array of dtype t holding `v` (values already exact in t).
inline Array host_array(DType t, std::int64_t rows, std::int64_t cols,
                        const std::vector<double>& v) {
  Array h(t, {rows, cols});
  for (std::size_t k = 0; k < v.size(); ++k) {
    switch (t) {
      case DType::f16:
        h.data_as<Half>()[k] = Half(v[k]);
        break;
      case DType::bf16:
        h.data_as<BFloat16>()[k] = BFloat16(v[k]);
        break;
      case DType::f32:
        h.data_as<float>()[k] = static_cast<float>(v[k]);
        break;
      default:
        h.data_as<double>()[k] = v[k];
        break;
    }
  }
  return h;
}

/// The NaN-poisoned output of a geometry.
inline Array poisoned_output(DType t, const Geometry& g) {
  return host_array(t, g.out_rows, g.out_cols,
                    std::vector<double>(static_cast<std::size_t>(g.out_rows * g.out_cols), NAN));
}

/// Image and kernel in storage precision, as doubles.
struct Data {
  std::int64_t rows, cols, krows, kcols;
  std::vector<double> img, ker;
  [[nodiscard]] double in(std::int64_t y, std::int64_t x, Boundary b) const {
    if (y < 0 || y >= rows || x < 0 || x >= cols) {
      if (b == Boundary::Zero) return 0.0;
      y = ((y % rows) + rows) % rows;
      x = ((x % cols) + cols) % cols;
    }
    return img[static_cast<std::size_t>(y * cols + x)];
  }
};

/// Random signs, |image| in [0.25, 1], |kernel| in [0.05, 1] / K: never zero, sums O(1), and
/// every FP16 product (lsb >= 2^-36) plus accumulator (|acc| < 4) fits a double exactly.
inline Data make_data(std::int64_t rows, std::int64_t cols, std::int64_t kr, std::int64_t kc,
                      DType t, std::uint64_t seed) {
  Data d{rows, cols, kr, kc, {}, {}};
  const auto mag = test::random_floats(rows * cols + kr * kc, 0.25f, 1.0f, seed);
  const auto sgn = test::random_floats(rows * cols + kr * kc, -1.0f, 1.0f, seed + 1);
  for (std::int64_t k = 0; k < rows * cols; ++k)
    d.img.push_back(round_to(t, sgn[k] < 0 ? -mag[k] : mag[k]));
  for (std::int64_t k = 0; k < kr * kc; ++k) {
    const std::size_t m = static_cast<std::size_t>(rows * cols + k);
    const double a = (0.05 + 0.95 * (mag[m] - 0.25) / 0.75) / static_cast<double>(kr * kc);
    d.ker.push_back(round_to(t, sgn[m] < 0 ? -a : a));
  }
  return d;
}

/// Constant image and kernel (overflow tests).
inline Data constant_data(std::int64_t rows, std::int64_t cols, std::int64_t k, double img,
                          double ker) {
  return {rows,
          cols,
          k,
          k,
          std::vector<double>(static_cast<std::size_t>(rows * cols), img),
          std::vector<double>(static_cast<std::size_t>(k * k), ker)};
}

/// The documented evaluation order, in the precision's own arithmetic.
inline double emulate(Precision p, const Data& d, const Geometry& g, std::int64_t i,
                      std::int64_t j) {
  double acc64 = 0.0;
  float acc32 = 0.0f;
  for (std::int64_t u = 0; u < d.krows; ++u)
    for (std::int64_t v = 0; v < d.kcols; ++v) {
      const double k = d.ker[static_cast<std::size_t>(u * d.kcols + v)];
      const double x = d.in(i + g.row0 - u, j + g.col0 - v, g.boundary);
      if (p == Precision::Double)
        acc64 = std::fma(k, x, acc64);
      else if (p == Precision::Half)
        acc64 = Half(std::fma(k, x, acc64)).to_float();  // exact fma, one rounding to FP16
      else
        acc32 = std::fmaf(static_cast<float>(k), static_cast<float>(x), acc32);
    }
  switch (p) {
    case Precision::Double:
    case Precision::Half:
      return acc64;
    case Precision::Mixed:
      return Half(acc32).to_float();
    case Precision::BF16:
      return BFloat16(acc32).to_float();
    default:
      return acc32;
  }
}

/// A double with all its digits, for messages.
inline std::string digits(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

struct CheckOptions {
  bool bound = true;                   // the FP64 reference and the error bound
  bool exact = true;                   // emulate() bit for bit
  const Array* expect_same = nullptr;  // another backend's output bit for bit
};

/// Checks every pixel of a host output; reports the first failure under `label`.
inline void expect_matches(const Array& out, Precision p, const Geometry& g, const Data& d,
                           const std::string& label, CheckOptions opt = {}) {
  const double uc = compute_unit_roundoff(p), us = storage_unit_roundoff(p);
  const double eta = p == Precision::Half ? 0x1p-25 : p == Precision::Double ? 0.0 : 0x1p-150;
  const double K = static_cast<double>(g.krows * g.kcols);
  // The FP64 value and sum |k||in| of every pixel: cpu_backend_testing.hpp's reference (one
  // formula for every backend's tests).
  const testing::Reference fp64 =
      opt.bound ? testing::reference(g, d.img, d.ker) : testing::Reference{};
  long long bad = 0;
  std::string first;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : bad)
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 0; j < g.out_cols; ++j) {
      const std::int64_t idx = i * g.out_cols + j;
      const double got = out.at_as_double(idx);
      double ref = 0.0;
      std::string why = std::isnan(got) ? "NaN (never written?)" : "";
      if (opt.bound) {
        ref = fp64.value[static_cast<std::size_t>(idx)];
        const double abssum = fp64.abs[static_cast<std::size_t>(idx)];
        const double bound =
            2.0 * (K * uc + 2.0 * us) * abssum + us * std::fabs(ref) + 2.0 * K * eta;
        if (why.empty() && !(std::fabs(got - ref) <= bound)) why = "error bound " + digits(bound);
      }
      if (why.empty() && opt.exact) {
        const double want = emulate(p, d, g, i, j);
        if (got != want) why = "emulation gives " + digits(want);
      }
      if (why.empty() && opt.expect_same && got != opt.expect_same->at_as_double(idx))
        why = "other backend gives " + digits(opt.expect_same->at_as_double(idx));
      if (!why.empty()) {
        ++bad;
#pragma omp critical
        if (first.empty())
          first = "out(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + digits(got) +
                  ", FP64 " + digits(ref) + ": " + why;
      }
    }
  EXPECT_EQ(bad, 0) << label << ": " << bad << " of " << g.out_rows * g.out_cols
                    << " pixels wrong; first " << first;
}

struct Window {
  const char* name;
  std::int64_t out_rows, out_cols, row0, col0;
};

/// full, same (convolution and correlation centring), an off-centre window, and valid.
inline std::vector<Window> windows(std::int64_t r, std::int64_t c, std::int64_t kr,
                                   std::int64_t kc) {
  std::vector<Window> w = {
      {"full", r + kr - 1, c + kc - 1, 0, 0},
      {"same", r, c, (kr - 1) / 2, (kc - 1) / 2},
      {"same-corr", r, c, kr / 2, kc / 2},
      {"window", std::max<std::int64_t>(1, r - 1), std::max<std::int64_t>(1, c / 2 + 1),
       std::min<std::int64_t>(1, kr - 1), std::min<std::int64_t>(3, c + kc - 2)}};
  if (r >= kr && c >= kc) w.push_back({"valid", r - kr + 1, c - kc + 1, kr - 1, kc - 1});
  return w;
}

inline Geometry geometry(const Data& d, const Window& w, Boundary b) {
  Geometry g;
  g.rows = d.rows;
  g.cols = d.cols;
  g.krows = d.krows;
  g.kcols = d.kcols;
  g.out_rows = w.out_rows;
  g.out_cols = w.out_cols;
  g.row0 = w.row0;
  g.col0 = w.col0;
  g.boundary = b;
  return g;
}

inline std::string label(const char* method, Precision p, const Data& d, const char* window,
                         Boundary b) {
  return std::string(method) + " " + std::string(precision_name(p)) + " " + std::to_string(d.rows) +
         "x" + std::to_string(d.cols) + " * " + std::to_string(d.krows) + "x" +
         std::to_string(d.kcols) + " " + window + (b == Boundary::Zero ? " zero" : " circular");
}

struct Case {
  std::int64_t rows, cols, krows, kcols;
};

// Odd squares on the unrolled path (1..31), widths aligned and not (261, 77: not multiples of P
// = 8 nor of a 256-pixel block; 256/512/264: the 16-byte paths), even and non-square kernels and
// 33 on the generic path, kernels larger than the image, 1xN and Nx1 images, and two images
// large enough for blocks whose whole staged region lies inside the image (the interior path).
// The last three are aligned images narrower than the streaming kernel's window (5 x 8, 9 x 16;
// 3 x 4 for FP32 only), whose circular chunks wrap more than once.
inline constexpr Case kCases[] = {
    {37, 261, 3, 3},   {64, 256, 3, 3},  {40, 512, 5, 5},  {21, 264, 7, 7},   {19, 130, 9, 9},
    {50, 136, 15, 15}, {45, 96, 31, 31}, {33, 200, 4, 4},  {29, 77, 3, 5},    {29, 77, 5, 3},
    {31, 70, 2, 2},    {23, 88, 1, 40},  {47, 12, 40, 1},  {45, 70, 33, 33},  {6, 5, 9, 9},
    {13, 17, 40, 40},  {1, 300, 1, 7},   {1, 300, 3, 3},   {300, 1, 5, 1},    {300, 1, 3, 3},
    {16, 40, 1, 1},    {3, 3, 3, 3},     {130, 800, 3, 3}, {200, 1024, 7, 7}, {5, 8, 7, 7},
    {9, 16, 5, 5},     {3, 4, 7, 7}};

inline constexpr Precision kAllPrecisions[] = {Precision::Double, Precision::Single,
                                               Precision::Half, Precision::Mixed, Precision::BF16};

}  // namespace halfscope::conv::nrtest
