// The tensor-core convolution (method `tensor`) without a GPU: the block code of
// src/conv/kernels/tensor_block.hpp, the same source the GPU kernel compiles, run on the emulated
// warp of tensor_emulator.hpp, with the host twin of the table kernel and the real
// tensor_params(). Checked against the FP64 reference with the derived bound of
// tensor_testing.hpp on every geometry the CPU backends are tested on plus multi-tile ones; the
// GPU runs the same checks in gpu_tensor.cu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor_emulator.hpp"
#include "tensor_testing.hpp"

namespace halfscope::conv::testing {
namespace {

template <TensorPrecision P>
Array emulate(const Geometry& g, const TensorInputs& in, unsigned int* overflow = nullptr) {
  using S = typename TensorStorage<P>::type;
  Array out = poisoned<S>(g.out_rows, g.out_cols);
  const kernels::TensorPlan plan = kernels::plan_tensor_columns(static_cast<int>(g.kcols));
  std::int64_t blocks = 0;
  kernels::TensorParams p = kernels::tensor_params(g, P == TensorPrecision::Split, plan, blocks);
  p.image = in.image.data();
  p.out = out.data();
  const int kr = static_cast<int>(g.krows), kc = static_cast<int>(g.kcols);
  HostTable table;
  if constexpr (P == TensorPrecision::Split)
    table = build_host_table<P>(in.kernel.data_as<float>(), kr, kc, plan);
  else
    table = build_host_table<P>(static_cast<const std::uint16_t*>(in.kernel.data()), kr, kc, plan);
  unsigned int count = 0;
  switch (plan.nq) {
    case 2:
      count = emulate_tensor_conv_q<P, 2>(p, table, blocks);
      break;
    case 3:
      count = emulate_tensor_conv_q<P, 3>(p, table, blocks);
      break;
    case 4:
      count = emulate_tensor_conv_q<P, 4>(p, table, blocks);
      break;
    case 5:
      count = emulate_tensor_conv_q<P, 5>(p, table, blocks);
      break;
    default:
      ADD_FAILURE() << "plan with Q = " << plan.nq;
  }
  if (overflow)
    *overflow = count;
  else
    EXPECT_EQ(count, 0u) << describe(g);
  return out;
}

template <TensorPrecision P>
void check_shapes(const std::vector<Shape4>& list, std::uint64_t seed) {
  for (const Shape4& s : list)
    for (const Geometry& g : geometries(s)) {
      const TensorInputs in = tensor_inputs<P>(g, seed++);
      expect_within_bound<P>(g, in, emulate<P>(g, in));
    }
}

TEST(TensorPlan, EveryWidthIsCoveredByBandsOfTwoToFiveChunks) {
  for (int kcols = 1; kcols <= 300; ++kcols) {
    const kernels::TensorPlan plan = kernels::plan_tensor_columns(kcols);
    EXPECT_GE(plan.nq, kernels::kMinBandChunks) << kcols;
    EXPECT_LE(plan.nq, kernels::kMaxBandChunks) << kcols;
    EXPECT_LE(plan.chunk_width, 16 * plan.nq - 15) << kcols;
    EXPECT_GE(plan.nchunks * plan.chunk_width, kcols) << kcols;
    EXPECT_LT((plan.nchunks - 1) * plan.chunk_width, kcols) << kcols;  // no empty chunk
  }
}

// Each kernel column of a chunk appears exactly once per output column m of a fragment, across
// the Q band chunks and 16 K positions (the Toeplitz band is complete and not doubled).
TEST(TensorPlan, ToeplitzFragmentsHoldEachKernelColumnOncePerOutputColumn) {
  for (int kcols : {1, 3, 16, 17, 33, 49, 65, 70, 127}) {
    const kernels::TensorPlan plan = kernels::plan_tensor_columns(kcols);
    for (int c = 0; c < plan.nchunks; ++c) {
      const int v0 = c * plan.chunk_width;
      for (int m = 0; m < 16; ++m) {
        std::vector<int> seen(static_cast<std::size_t>(kcols), 0);
        for (int q = 0; q < plan.nq; ++q)
          for (int lane = 0; lane < 32; ++lane)
            for (int j = 0; j < 8; ++j) {
              const int reg = j >> 1;
              if ((lane >> 2) + 8 * (reg & 1) != m) continue;
              const int v =
                  kernels::toeplitz_column(lane, j, q, plan.nq, v0, plan.chunk_width, kcols);
              if (v >= 0) ++seen[static_cast<std::size_t>(v)];
            }
        for (int v = 0; v < kcols; ++v)
          EXPECT_EQ(seen[static_cast<std::size_t>(v)], v >= v0 && v < v0 + plan.chunk_width ? 1 : 0)
              << "kcols " << kcols << " chunk " << c << " m " << m << " v " << v;
      }
    }
  }
}

TEST(TensorConvEmulated, MixedF16InF32AccumulateF16Out) {
  check_shapes<TensorPrecision::Mixed>(shapes(), 100);
  check_shapes<TensorPrecision::Mixed>(tensor_shapes(), 200);
}

TEST(TensorConvEmulated, Bf16InF32AccumulateBf16Out) {
  // BF16 differs from mixed only in the MMA type and the conversions: fewer shapes.
  check_shapes<TensorPrecision::BF16>({{23, 17, 4, 6}, {9, 7, 12, 11}}, 300);
  check_shapes<TensorPrecision::BF16>(tensor_shapes(), 400);
}

TEST(TensorConvEmulated, SplitF32InHiLoF16ProductsF32Out) {
  // The split's own paths (hi / lo planes, per-row scales, flushes) on fewer shapes than mixed.
  check_shapes<TensorPrecision::Split>({{23, 17, 4, 6}, {1, 37, 3, 5}, {9, 7, 12, 11}}, 500);
  check_shapes<TensorPrecision::Split>(tensor_shapes(), 600);
}

// Values up to 1e6 (FP16 overflows at 65504) and a kernel of 1e-3: the per-row and per-kernel
// power-of-two scales must keep the split exact to ~2^-22.
TEST(TensorConvEmulated, SplitF32ScalesRowsBeyondTheF16Range) {
  for (Boundary b : {Boundary::Zero, Boundary::Circular}) {
    const Geometry g{50, 140, 9, 13, 50, 140, 4, 6, b};
    TensorInputs in = tensor_inputs<TensorPrecision::Split>(g, 700, 1.0e6f);
    float* k = in.kernel.data_as<float>();
    for (std::int64_t t = 0; t < g.krows * g.kcols; ++t) {
      k[t] *= 1e-3f;
      in.kernel_exact[static_cast<std::size_t>(t)] = k[t];
    }
    expect_within_bound<TensorPrecision::Split>(g, in, emulate<TensorPrecision::Split>(g, in));
  }
}

// An inf in a split image stays local: it is left out of its row's scale, so outputs that do
// not read it (beyond the band's reach, 16 Q columns) keep FP32 accuracy.
TEST(TensorConvEmulated, SplitF32KeepsAnInputInfLocal) {
  const Geometry g{24, 150, 3, 5, 24, 150, 1, 2, Boundary::Zero};
  TensorInputs in = tensor_inputs<TensorPrecision::Split>(g, 900);
  const std::int64_t at = 10 * g.cols + 20;
  in.image.data_as<float>()[at] = std::numeric_limits<float>::infinity();
  const Array out = emulate<TensorPrecision::Split>(g, in);
  in.image_exact[static_cast<std::size_t>(at)] = 0;  // the reference for the far pixels
  const Reference ref = reference(g, in.image_exact, in.kernel_exact);
  EXPECT_FALSE(std::isfinite(out.data_as<float>()[at]));
  for (std::int64_t i = 0; i < g.out_rows; ++i)
    for (std::int64_t j = 64; j < g.out_cols; ++j) {
      const auto t = static_cast<std::size_t>(i * g.out_cols + j);
      EXPECT_LE(std::fabs(out.data_as<float>()[i * g.out_cols + j] - ref.value[t]),
                tensor_tolerance<TensorPrecision::Split>(g, ref.abs[t], ref.value[t]))
          << "pixel (" << i << ", " << j << ")";
    }
}

// FP16 outputs beyond 65504 from finite inputs are counted (tensor_cuda turns the count into a
// NumericalError); an inf in the image is passed on and not counted.
TEST(TensorConvEmulated, MixedF16CountsOverflowButPassesInputInfOn) {
  const Geometry g{20, 30, 3, 3, 20, 30, 1, 1, Boundary::Zero};
  TensorInputs in = tensor_inputs<TensorPrecision::Mixed>(g, 800);
  Half* img = in.image.data_as<Half>();
  Half* ker = in.kernel.data_as<Half>();
  for (std::int64_t t = 0; t < g.rows * g.cols; ++t) img[t] = Half(30000.0f);
  for (std::int64_t t = 0; t < g.krows * g.kcols; ++t) ker[t] = Half(1.0f);
  unsigned int overflow = 0;
  (void)emulate<TensorPrecision::Mixed>(g, in, &overflow);
  EXPECT_EQ(overflow, static_cast<unsigned>(g.out_rows * g.out_cols));  // every sum >= 4 * 30000
  const std::int64_t at = 5 * g.cols + 7;
  for (std::int64_t t = 0; t < g.rows * g.cols; ++t) img[t] = Half(1.0f);
  img[at] = Half::from_bits(0x7c00);  // +inf
  const Array passed = emulate<TensorPrecision::Mixed>(g, in, &overflow);
  EXPECT_EQ(overflow, 0u);
  EXPECT_FALSE(std::isfinite(static_cast<float>(passed.data_as<Half>()[at])));
  EXPECT_EQ(static_cast<float>(passed.data_as<Half>()[15 * g.cols + 25]), 9.0f);  // far away
}

}  // namespace
}  // namespace halfscope::conv::testing
