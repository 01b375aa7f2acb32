// Device query. Absence of a GPU or of a driver is a normal state (the CPU backend runs), so
// nothing here throws for it: query_devices() returns an empty list with a status saying why.
#include "halfscope/core/device.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace halfscope {

namespace {

#if HALFSCOPE_WITH_CUDA
// CUDA encodes versions as 1000 * major + 10 * minor (13000 -> "13.0").
std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// Attribute query that leaves 0 (and no sticky error) where the attribute is not reported.
int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}

DeviceInfo describe_device(int index) {
  DeviceInfo d;
  d.index = index;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) {
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.multiprocessors = prop.multiProcessorCount;
    d.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    d.l2_bytes = prop.l2CacheSize;
    d.shared_per_block_optin = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
    d.memory_bus_bits = prop.memoryBusWidth;
  } else {
    (void)cudaGetLastError();
    d.name = "CUDA device " + std::to_string(index) + " (properties unavailable)";
  }
  // CUDA 13 removed cudaDeviceProp::clockRate; the attribute is the supported way.
  d.clock_khz = attribute(cudaDevAttrClockRate, index);
  return d;
}
#endif

}  // namespace

DeviceReport query_devices() {
  DeviceReport r;
#if HALFSCOPE_WITH_CUDA
  r.cuda_built = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    r.runtime_version = cuda_version_string(runtime);
  int driver = 0;
  // cudaDriverGetVersion returns 0 (and success) when no driver is installed.
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    r.driver_version = cuda_version_string(driver);
  (void)cudaGetLastError();

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  // Clear the error so it does not surface in an unrelated later check.
  (void)cudaGetLastError();
  if (status != cudaSuccess) {
    switch (status) {
      case cudaErrorNoDevice:
        r.status = "no CUDA device";
        break;
      case cudaErrorInsufficientDriver:
        r.status = driver > 0 ? "CUDA driver " + r.driver_version + " is older than the runtime " +
                                    r.runtime_version
                              : "no CUDA driver";
        break;
      default:
        r.status = std::string("CUDA unusable: ") + cudaGetErrorName(status) + " (" +
                   cudaGetErrorString(status) + ")";
    }
    return r;
  }
  if (count == 0) {
    r.status = "no CUDA device";
    return r;
  }
  for (int i = 0; i < count; ++i) r.devices.push_back(describe_device(i));
  r.status = "ok";
#else
  r.status = "built without CUDA";
#endif
  return r;
}

bool cuda_available() {
  // Thread-safe one-time query: the answer cannot change during a process's life.
  static const bool available = !query_devices().devices.empty();
  return available;
}

void prepare_device(int device) {
#if HALFSCOPE_WITH_CUDA
  const auto count = static_cast<int>(query_devices().devices.size());
  if (device < 0 || device >= count)
    throw InvalidInput("CUDA device " + std::to_string(device) + " does not exist (this host has " +
                       std::to_string(count) + ")");
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    throw CudaError("CUDA device " + std::to_string(device) +
                    ": cannot create its context: " + cudaGetErrorString(e));
  }
#else
  throw Unsupported("CUDA device " + std::to_string(device) + ": halfscope was built without CUDA");
#endif
}

DeviceKind parse_device_kind(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t == "auto") return DeviceKind::Auto;
  if (t == "cpu") return DeviceKind::Cpu;
  if (t == "cuda" || t == "gpu") return DeviceKind::Cuda;
  throw InvalidInput("--device: expected auto, cpu or cuda, got '" + text + "'");
}

DeviceKind resolve_device(DeviceKind requested) {
  switch (requested) {
    case DeviceKind::Cpu:
      return DeviceKind::Cpu;
    case DeviceKind::Auto:
      return cuda_available() ? DeviceKind::Cuda : DeviceKind::Cpu;
    case DeviceKind::Cuda:
      if (cuda_available()) return DeviceKind::Cuda;
      {
        const DeviceReport r = query_devices();
        const std::string driver = r.driver_version.empty() ? "none" : r.driver_version;
        throw Unsupported("--device cuda: no CUDA device (driver: " + driver + "; " + r.status +
                          "); use --device cpu or auto");
      }
  }
  return DeviceKind::Cpu;
}

}  // namespace halfscope
