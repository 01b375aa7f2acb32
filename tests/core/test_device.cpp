// Device query and selection: must work on machines without a GPU or a driver (CI), where the
// answer is an empty list with a reason, and --device cuda is a clear Unsupported error.
#include <regex>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "test_support.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cublas_v2.h>

#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope {
namespace {

TEST(Device, QueryNeverThrowsAndExplainsAnEmptyList) {
  const DeviceReport r = query_devices();
  EXPECT_EQ(r.cuda_built, HALFSCOPE_WITH_CUDA == 1);
  if (r.devices.empty()) {
    EXPECT_FALSE(cuda_available());
    EXPECT_FALSE(r.status.empty());
    EXPECT_NE(r.status, "ok");
  } else {
    EXPECT_TRUE(cuda_available());
    EXPECT_EQ(r.status, "ok");
    for (std::size_t i = 0; i < r.devices.size(); ++i) {
      EXPECT_EQ(r.devices[i].index, static_cast<int>(i));
      EXPECT_FALSE(r.devices[i].name.empty());
      EXPECT_GT(r.devices[i].memory_bytes, 0);
    }
  }
#if HALFSCOPE_WITH_CUDA
  EXPECT_TRUE(std::regex_match(r.runtime_version, std::regex("[0-9]+\\.[0-9]")))
      << r.runtime_version;
  if (!r.driver_version.empty()) {
    EXPECT_TRUE(std::regex_match(r.driver_version, std::regex("[0-9]+\\.[0-9]")))
        << r.driver_version;
  }
#else
  EXPECT_EQ(r.status, "built without CUDA");
  EXPECT_TRUE(r.runtime_version.empty());
#endif
  // A second query gives the same answer (no sticky error left behind by the first).
  const DeviceReport again = query_devices();
  EXPECT_EQ(again.status, r.status);
  EXPECT_EQ(again.devices.size(), r.devices.size());
}

TEST(Device, ParseDeviceKind) {
  EXPECT_EQ(parse_device_kind("auto"), DeviceKind::Auto);
  EXPECT_EQ(parse_device_kind("cpu"), DeviceKind::Cpu);
  EXPECT_EQ(parse_device_kind("CPU"), DeviceKind::Cpu);
  EXPECT_EQ(parse_device_kind("cuda"), DeviceKind::Cuda);
  EXPECT_EQ(parse_device_kind("gpu"), DeviceKind::Cuda);
  try {
    (void)parse_device_kind("tpu");
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu'"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)parse_device_kind(""), InvalidInput);
}

TEST(Device, ResolveDevice) {
  EXPECT_EQ(resolve_device(DeviceKind::Cpu), DeviceKind::Cpu);
  EXPECT_EQ(resolve_device(DeviceKind::Auto),
            cuda_available() ? DeviceKind::Cuda : DeviceKind::Cpu);
  if (cuda_available()) {
    EXPECT_EQ(resolve_device(DeviceKind::Cuda), DeviceKind::Cuda);
  } else {
    try {
      (void)resolve_device(DeviceKind::Cuda);
      FAIL() << "expected Unsupported";
    } catch (const Unsupported& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--device cuda: no CUDA device (driver: ", 0), 0u)
          << e.what();
      EXPECT_EQ(e.exit_status(), 2);
    }
  }
}

#if HALFSCOPE_WITH_CUDA
// The error path of the check macros needs no device: names and strings come from the libraries.
TEST(Device, CudaErrorMessageNamesCodeExpressionAndPlace) {
  try {
    HS_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("CUDA error cudaErrorInvalidValue (code 1): ", 0), 0u) << m;
    EXPECT_NE(m.find("in cudaErrorInvalidValue at tests/core/test_device.cpp:"), std::string::npos)
        << m;
    EXPECT_EQ(e.exit_status(), 1);
  }
}

TEST(Device, CublasErrorMessageNamesTheStatus) {
  try {
    HS_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("cuBLAS error CUBLAS_STATUS_INVALID_VALUE (code 7)", 0), 0u) << m;
    EXPECT_NE(m.find("test_device.cpp:"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(HS_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  try {
    HS_CUFFT_CHECK(3);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cuFFT error status (code 3)", 0), 0u) << e.what();
  }
}
#endif

}  // namespace
}  // namespace halfscope
