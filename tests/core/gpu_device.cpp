// Device query, check macros and CUDA RAII on a real GPU (ctest label `gpu`; skips without one).
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
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

// Arrays of 32 MiB and more cross between pageable host memory and the device through pinned
// staging on several threads (copy_bytes): an odd size (not a multiple of the staging blocks or
// of the parts' alignment) goes up and comes back byte for byte, a device array filled on the
// legacy stream just before comes down filled, and pinned host memory still copies directly.
TEST(GpuDevice, LargeHostCopiesAreStagedAndComplete) {
  HS_REQUIRE_GPU();
#if HALFSCOPE_WITH_CUDA
  const std::int64_t n = (std::int64_t{40} << 20) / 4 + 12345;  // float32 elements
  Array host(DType::f32, {n});
  float* h = host.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1000003) * 0.5f - 7.0f;
  const Array device = host.to(Memory::device);
  const Array back = device.to(Memory::host);
  ASSERT_EQ(back.nbytes(), host.nbytes());
  EXPECT_EQ(std::memcmp(back.data(), host.data(), static_cast<std::size_t>(host.nbytes())), 0);
  const Array pinned = device.to(Memory::pinned);
  EXPECT_EQ(std::memcmp(pinned.data(), host.data(), static_cast<std::size_t>(host.nbytes())), 0);

  Array filled(DType::f32, {n}, Memory::device);
  HS_CUDA_CHECK(cudaMemsetAsync(filled.data(), 0x3f, static_cast<std::size_t>(filled.nbytes()),
                                nullptr));  // legacy stream, not waited for by the caller
  const Array seen = filled.to(Memory::host);
  const auto* bytes = static_cast<const unsigned char*>(seen.data());
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < seen.nbytes(); ++i) wrong += bytes[i] != 0x3f;
  EXPECT_EQ(wrong, 0);
#endif
}

}  // namespace
}  // namespace halfscope
