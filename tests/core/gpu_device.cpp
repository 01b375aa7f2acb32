// Device query, check macros and CUDA RAII on a real GPU (ctest label `gpu`; skips without one).
#include <chrono>
#include <string>
#include <thread>

#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope {
namespace {

TEST(GpuDevice, QueryDescribesEveryDevice) {
  HS_REQUIRE_GPU();
  const DeviceReport r = query_devices();
  ASSERT_FALSE(r.devices.empty());
  EXPECT_EQ(r.status, "ok");
  EXPECT_FALSE(r.driver_version.empty());
  EXPECT_FALSE(r.runtime_version.empty());
  for (const DeviceInfo& d : r.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.cc_major, 7) << d.name;  // Volta or newer: tensor cores
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.memory_bytes, std::int64_t{1} << 30);
    EXPECT_GT(d.l2_bytes, 0);
    EXPECT_GE(d.shared_per_block_optin, 48 * 1024);
    EXPECT_GT(d.clock_khz, 100000);  // > 100 MHz
    EXPECT_GE(d.memory_bus_bits, 64);
  }
  EXPECT_EQ(resolve_device(DeviceKind::Auto), DeviceKind::Cuda);
  EXPECT_EQ(resolve_device(DeviceKind::Cuda), DeviceKind::Cuda);
}

TEST(GpuDevice, FailedCallThrowsCudaErrorAndLeavesNoStickyError) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  void* p = nullptr;
  try {
    HS_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 62));  // 4 EiB: no device has it
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaMalloc(&p"), std::string::npos) << m;
    EXPECT_NE(m.find("gpu_device.cpp:"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(HS_CHECK_LAUNCH());  // the failed allocation did not poison later checks
  EXPECT_NO_THROW(HS_CUDA_CHECK(cudaMalloc(&p, 1024)));
  EXPECT_NO_THROW(HS_CUDA_CHECK(cudaFree(p)));
#endif
}

#if HALFSCOPE_WITH_CUDA
void CUDART_CB sleep_40ms(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
}
#endif

TEST(GpuDevice, EventTimerMeasuresWorkOnItsStream) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  cuda::Stream stream;
  ASSERT_NE(stream.get(), nullptr);
  cuda::EventTimer timer(stream.get());
  timer.start();
  HS_CUDA_CHECK(cudaLaunchHostFunc(stream.get(), sleep_40ms, nullptr));
  const float ms = timer.stop_ms();
  EXPECT_GE(ms, 35.0f);
  EXPECT_LT(ms, 5000.0f);
  // An empty region measures (almost) nothing.
  timer.start();
  const float empty = timer.stop_ms();
  EXPECT_GE(empty, 0.0f);
  EXPECT_LT(empty, 5.0f);
  EXPECT_NO_THROW(stream.synchronize());
  cuda::Event event;
  EXPECT_NO_THROW(event.record(stream.get()));
  EXPECT_EQ(cudaEventSynchronize(event.get()), cudaSuccess);
#endif
}

}  // namespace
}  // namespace halfscope
