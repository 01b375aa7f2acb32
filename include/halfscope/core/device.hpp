// CUDA devices: what is present, with no GPU and no driver meaning an empty list (the CPU backend
// is then used), never an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace halfscope {

/// One CUDA device as the runtime reports it.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t shared_per_block_optin = 0;
  int clock_khz = 0;
  int memory_bus_bits = 0;
  [[nodiscard]] std::string compute_capability() const {
    return std::to_string(cc_major) + "." + std::to_string(cc_minor);
  }
};

/// What the process can use.
struct DeviceReport {
  bool cuda_built = false;     // compiled with CUDA
  std::string driver_version;  // "13.0" or "" when there is no driver
  std::string runtime_version;
  std::string status;  // "ok", "no CUDA driver", "no CUDA device", "built without CUDA"
  std::vector<DeviceInfo> devices;
};

/// Queries the devices. Never throws for absence: an empty `devices` with a status saying why.
DeviceReport query_devices();

/// True when at least one CUDA device can run kernels (cached after the first call).
bool cuda_available();

/// Makes CUDA device `device` the calling thread's current device and creates its context now,
/// so that the first timed call on it does not pay for that (a few hundred ms). InvalidInput for
/// a device this host does not have; Unsupported in a build without CUDA.
void prepare_device(int device);

/// Where an operation runs. `Auto` picks CUDA when a device is present, else the CPU.
enum class DeviceKind { Auto, Cpu, Cuda };
DeviceKind parse_device_kind(const std::string& text);  // "auto" | "cpu" | "cuda"
/// Resolves Auto; throws Unsupported for Cuda when no device is usable.
DeviceKind resolve_device(DeviceKind requested);

}  // namespace halfscope
