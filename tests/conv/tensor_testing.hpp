// Shared by the tensor-core convolution tests (test_tensor_emulated.cpp on the CPU, gpu_tensor.cu
// on the GPU): inputs rounded to the storage type, the FP64 reference of cpu_backend_testing.hpp,
// and the per-pixel error bound derived for each precision.
//
// Bound, per output pixel, with S = sum |k(u,v)| |in(..)| and R the FP64 value
// (docs/conv-tensor.md):
//  - products of FP16 / BF16 operands are exact in FP32;
//  - a tensor-core MMA adds 16 products to its FP32 accumulator, aligning to the largest term and
//    truncating: at most one unit in the last place (2^-23 relative) for each of its 17 addends,
//    i.e. 34 * 2^-24 * S per MMA of a chain, whose length is krows * nchunks * Q for mixed / bf16
//    (one chain) and Q for split's hi * hi (one chain per kernel row, flushed in FP32 round-to-
//    nearest; the correction sums, 2^-11 of it, may chain over 16 kernel rows: below 2^-29 S);
//  - split: the hi + lo split of both operands and the dropped lo * lo cost 3 * 2^-22 * S, the
//    krows * nchunks FP32 flushes (krows * nchunks + 2) * 2^-24 * S;
//  - mixed / bf16: the output is rounded once to its storage (2^-11 or 2^-8 of |out|), plus half
//    of FP16's subnormal spacing.
// A factor C = 2 covers second-order terms. Wrong indices give errors of the order of S itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "conv/kernels/tensor_block.hpp"
#include "cpu_backend_testing.hpp"
#include "halfscope/core/half.hpp"
#include "test_support.hpp"

namespace halfscope::conv::testing {

using kernels::TensorPrecision;

/// Storage type, name and output unit roundoff of each precision.
template <TensorPrecision P>
struct TensorStorage;
template <>
struct TensorStorage<TensorPrecision::Mixed> {
  using type = Half;
  static constexpr const char* name = "mixed";
  static constexpr double u_out = 0x1p-11;
  static constexpr double abs_out = 0x1p-25;
};
template <>
struct TensorStorage<TensorPrecision::BF16> {
  using type = BFloat16;
  static constexpr const char* name = "bf16";
  static constexpr double u_out = 0x1p-8;
  static constexpr double abs_out = 0x1p-133;
};
template <>
struct TensorStorage<TensorPrecision::Split> {
  using type = float;
  static constexpr const char* name = "split";
  static constexpr double u_out = 0;
  static constexpr double abs_out = 0x1p-149;
};

/// The derived bound (header comment) for one pixel.
template <TensorPrecision P>
double tensor_tolerance(const Geometry& g, double abs_sum, double ref) {
  const kernels::TensorPlan plan = kernels::plan_tensor_columns(static_cast<int>(g.kcols));
  const double chunks = static_cast<double>(g.krows) * plan.nchunks;
  double rel;
  if constexpr (P == TensorPrecision::Split)
    rel = (34.0 * plan.nq + chunks + 2) * 0x1p-24 + 3 * 0x1p-22;
  else
    rel = 34.0 * chunks * plan.nq * 0x1p-24;
  const double acc = 2 * rel * abs_sum;
  return acc + TensorStorage<P>::u_out * (std::fabs(ref) + acc) + TensorStorage<P>::abs_out;
}

/// Random inputs in [-scale, scale), never zero, rounded to the storage type.
struct TensorInputs {
  Array image, kernel;
  std::vector<double> image_exact, kernel_exact;
};
template <TensorPrecision P>
TensorInputs tensor_inputs(const Geometry& g, std::uint64_t seed, float scale = 1.0f) {
  using S = typename TensorStorage<P>::type;
  TensorInputs in;
  auto img = test::random_floats(g.rows * g.cols, -scale, scale, seed);
  auto ker = test::random_floats(g.krows * g.kcols, -1.0f, 1.0f, seed + 1);
  for (auto* v : {&img, &ker})
    for (float& x : *v)
      if (x == 0.0f) x = 0.5f;
  in.image = storage_array<S>(img, g.rows, g.cols, in.image_exact);
  in.kernel = storage_array<S>(ker, g.krows, g.kcols, in.kernel_exact);
  return in;
}

/// Checks every pixel of `out` (host, storage type) against the FP64 reference; reports the
/// first few failures with their position and the bound.
template <TensorPrecision P>
void expect_within_bound(const Geometry& g, const TensorInputs& in, const Array& out) {
  using S = typename TensorStorage<P>::type;
  const Reference ref = reference(g, in.image_exact, in.kernel_exact);
  const std::vector<double> got = values_of<S>(out);
  int failures = 0;
  for (std::size_t t = 0; t < got.size(); ++t) {
    const double tol = tensor_tolerance<P>(g, ref.abs[t], ref.value[t]);
    const double err = std::fabs(got[t] - ref.value[t]);
    if (!(err <= tol) && ++failures <= 5)  // NaN (an unwritten pixel) fails too
      ADD_FAILURE() << TensorStorage<P>::name << ", " << describe(g) << ": pixel ("
                    << static_cast<std::int64_t>(t) / g.out_cols << ", "
                    << static_cast<std::int64_t>(t) % g.out_cols << ") = " << got[t]
                    << ", reference " << ref.value[t] << ", error " << err << " > bound " << tol;
  }
  EXPECT_EQ(failures, 0) << describe(g);
}

/// Shapes beyond cpu_backend_testing.hpp's: several tiles in both directions with a partial last
/// tile, every band chunk count Q = 2..5, and a kernel cut into two column chunks.
inline std::vector<Shape4> tensor_shapes() {
  return {
      {70, 150, 7, 9},   // 2 x 2 tiles (3 x 2 for split), Q = 2
      {40, 37, 6, 33},   // Q = 3, even kernel rows
      {21, 60, 5, 46},   // Q = 4, kernel nearly as wide as the image
      {18, 80, 3, 65},   // Q = 5
      {12, 140, 2, 70},  // two column chunks of 35 (Q = 4)
      {10, 300, 3, 5},   // tiles inside the image (row loads without the column table), and
      {6, 420, 2, 20},   // output rows of 4k columns (vector stores); Q = 2 and 3
  };
}

}  // namespace halfscope::conv::testing
