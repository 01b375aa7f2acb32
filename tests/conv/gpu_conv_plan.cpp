// ConvPlan on device arrays: bit for bit what convolve2d_into gives with the kernel array (the same
// methods on the same storage-typed kernel, with the factors found once instead of read back per
// call), back-to-back calls with the overflow check deferred, FP16 overflow reported through a
// plan, and where the result lands. Accuracy itself is the methods' own tests' business.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/conv.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/sim/kernels.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

Array random(std::int64_t r, std::int64_t c, std::uint64_t seed) {
  return Array::from_values<float>(test::random_floats(r * c, -1.0f, 1.0f, seed), {r, c});
}

bool same_bits(const Array& a, const Array& b) {
  const Array x = a.to(Memory::host), y = b.to(Memory::host);
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.data(), y.data(), static_cast<std::size_t>(x.nbytes())) == 0;
}

ConvOptions gpu(ConvMethod m, Precision p) {
  ConvOptions o;
  o.method = m;
  o.precision = p;
  o.mode = ConvMode::Same;
  o.device = DeviceKind::Cuda;
  o.plan_by_measuring = false;
  return o;
}

TEST(ConvPlanGpu, MatchesConvolve2dIntoOnDeviceArrays) {
  HS_REQUIRE_GPU();
  // Rank-one kernels (Gaussians: the rolling kernel at 7x7, the two passes at 9x9 and the
  // streaming kernel's rank-one mode at 5x5 in FP16) and a full-rank one (not separable).
  const std::vector<Array> kernels = {sim::gaussian_kernel(5), sim::gaussian_kernel(7),
                                      sim::gaussian_kernel(9), random(5, 5, 1)};
  const Array image = random(300, 1048, 2);
  int checked = 0;
  for (const Array& k : kernels)
    for (ConvMethod m : {ConvMethod::Auto, ConvMethod::Separable, ConvMethod::Register})
      for (Precision p : {Precision::Single, Precision::Half, Precision::Mixed, Precision::BF16}) {
        const bool full_rank = &k == &kernels.back();
        if (full_rank && m == ConvMethod::Separable) continue;
        for (bool correlate : {false, true}) {
          ConvOptions o = gpu(m, p);
          o.correlate = correlate;
          const DType st = storage_dtype(p);
          const Array img = image.astype(st).to(Memory::device);
          const Array ker = k.astype(st).to(Memory::device);
          Array want(st, img.shape(), Memory::device), got(st, img.shape(), Memory::device);
          const ConvPlan plan(ker, o);
          ConvOptions same = o;  // Auto: what the plan chose (it may take separable earlier)
          same.method = plan.resolve_method(img);
          convolve2d_into(img, ker, want, same);
          plan.run(img, got);
          const std::string what = std::string(conv_method_name(m)) + " " +
                                   std::string(precision_name(p)) + " " + std::to_string(k.dim(0)) +
                                   (correlate ? " correlate" : "");
          EXPECT_TRUE(same_bits(got, want)) << what;
          // A plan from the host kernel gives the same, and so does its convolve2d form.
          EXPECT_TRUE(same_bits(ConvPlan(k.astype(st), o)(img), want)) << what << " host kernel";
          ++checked;
        }
      }
  EXPECT_EQ(checked, 88);
}

// Auto with a plan tests the kernel for low rank from 5x5 (factoring costs no read-back there), a
// call with the kernel array from 7x7.
TEST(ConvPlanGpu, AutoWithAPlanConsidersSeparableFrom5x5) {
  HS_REQUIRE_GPU();
  const Array img = random(128, 128, 5).to(Memory::device);
  const ConvOptions o = gpu(ConvMethod::Auto, Precision::Single);
  const Array g5 = sim::gaussian_kernel(5).astype(DType::f32);
  EXPECT_EQ(ConvPlan(g5, o).resolve_method(img), ConvMethod::Separable);
  EXPECT_EQ(conv_resolve_method(img, g5, o), ConvMethod::Register);
  EXPECT_EQ(ConvPlan(random(5, 5, 6), o).resolve_method(img), ConvMethod::Register);  // rank 5
  EXPECT_EQ(ConvPlan(sim::gaussian_kernel(3), o).resolve_method(img), ConvMethod::Register);
}

TEST(ConvPlanGpu, BackToBackCallsWithTheCheckDeferred) {
  HS_REQUIRE_GPU();
  ConvOptions o = gpu(ConvMethod::Separable, Precision::Half);
  o.defer_overflow_check = true;
  const Array img = random(512, 512, 3).astype(DType::f16).to(Memory::device);
  const ConvPlan plan(sim::gaussian_kernel(7).astype(DType::f16).to(Memory::device), o);
  Array out(DType::f16, img.shape(), Memory::device);
  for (int i = 0; i < 40; ++i) plan.run(img, out);  // more calls than the check's 16 slots
  conv_check_overflow();
  o.defer_overflow_check = false;
  EXPECT_TRUE(same_bits(out, convolve2d(img, sim::gaussian_kernel(7).astype(DType::f16), o)));
}

TEST(ConvPlanGpu, Fp16OverflowIsReportedThroughAPlan) {
  HS_REQUIRE_GPU();
  // Every input fits FP16; 49 x 60000 does not (the rolling kernel's row sums overflow first).
  const Array img = Array::from_values<float>(std::vector<float>(64 * 64, 60000.0f), {64, 64})
                        .astype(DType::f16)
                        .to(Memory::device);
  const Array ones = Array::from_values<float>(std::vector<float>(49, 1.0f), {7, 7});
  ConvOptions o = gpu(ConvMethod::Separable, Precision::Half);
  Array out(DType::f16, img.shape(), Memory::device);
  EXPECT_THROW(ConvPlan(ones, o).run(img, out), NumericalError);
  o.defer_overflow_check = true;
  const ConvPlan deferred(ones, o);
  deferred.run(img, out);
  EXPECT_THROW(conv_check_overflow(), NumericalError);
}

// As with the kernel array: under DeviceKind::Auto a plan made from a device kernel runs a host
// image on the GPU and returns a device result; one made from a host kernel stays on the host.
TEST(ConvPlanGpu, ResultLandsWhereTheArraysWould) {
  HS_REQUIRE_GPU();
  ConvOptions o;
  o.mode = ConvMode::Same;
  const Array img = random(64, 64, 4);
  const Array k = sim::gaussian_kernel(7).astype(DType::f32);
  const Array on_gpu = ConvPlan(k.to(Memory::device), o)(img);
  EXPECT_TRUE(on_gpu.on_device());
  EXPECT_TRUE(same_bits(on_gpu, convolve2d(img, k.to(Memory::device), o)));
  EXPECT_FALSE(ConvPlan(k, o)(img).on_device());
}

}  // namespace
}  // namespace halfscope
