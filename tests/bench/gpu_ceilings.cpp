// GPU ceilings on a real device, at small sizes (ctest label `gpu`; skips without a GPU).
#include <cmath>

#include "halfscope/bench/ceilings.hpp"
#include "test_support.hpp"

namespace halfscope::bench {
namespace {

TEST(GpuCeilings, SmallMeasurementIsCompleteAndOrdered) {
  HS_REQUIRE_GPU();
  CeilingsOptions o;
  o.copy_bytes = 64 << 20;
  o.gemm_n = 2048;
  const BenchReport r = measure_gpu_ceilings(0, o);
  EXPECT_EQ(r.device.kind, "cuda");
  EXPECT_FALSE(r.device.cc.empty());
  EXPECT_GT(r.ceilings.copy_GBps, 50.0);
  for (const double t : {r.ceilings.fp32_TFLOPs, r.ceilings.tf32_TFLOPs, r.ceilings.fp16_TFLOPs,
                         r.ceilings.bf16_TFLOPs, r.ceilings.fp64_TFLOPs}) {
    EXPECT_TRUE(std::isfinite(t));
    EXPECT_GT(t, 0.1);
  }
  // Tensor cores: FP16 with FP32 accumulate beats plain FP32 on every GPU with them.
  EXPECT_GT(r.ceilings.fp16_TFLOPs, r.ceilings.fp32_TFLOPs);
  for (const BenchCase& c : r.cases) {
    EXPECT_GE(c.stats.repeats, 10) << c.method;
    EXPECT_GT(c.stats.median_ms, 0.0) << c.method;
    if (c.implementation == "cublas") {
      ASSERT_TRUE(c.error.count("c00_abs_err"));
      EXPECT_LE(c.error.at("c00_abs_err"), c.error.at("c00_worst_bound")) << c.precision;
    }
  }
}

}  // namespace
}  // namespace halfscope::bench
