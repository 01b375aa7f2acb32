// The one JSON schema of every benchmark (DESIGN.md section 5): what ran, where, when, on which
// commit, next to the machine's measured ceilings. Written atomically to
// bench/results/<date>-<device>-<benchmark>.json and read back by the tools that make tables.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "halfscope/bench/stats.hpp"

namespace halfscope::bench {

/// The measured limits of one machine (CPU or GPU). NaN where not measured; NaN values are left
/// out of the JSON and read back as NaN.
struct Ceilings {
  std::string device;        // the device name the numbers belong to
  double copy_GBps = NAN;    // best copy bandwidth, read + write bytes per second / 1e9
  double fp32_TFLOPs = NAN;  // GEMM, FP32 inputs and arithmetic (no TF32)
  double tf32_TFLOPs = NAN;  // GEMM, FP32 inputs on TF32 tensor cores, FP32 accumulate
  double fp16_TFLOPs = NAN;  // GEMM, FP16 inputs and output, FP32 accumulate
  double bf16_TFLOPs = NAN;  // GEMM, BF16 inputs and output, FP32 accumulate
  double fp64_TFLOPs = NAN;  // GEMM, FP64
  /// True when nothing was measured.
  [[nodiscard]] bool empty() const noexcept;
};

/// Where a benchmark ran: the "device" object of the schema.
struct DeviceSummary {
  std::string kind;    // "cuda" or "cpu"
  std::string name;    // "NVIDIA H100 80GB HBM3", or the CPU model
  std::string driver;  // NVIDIA kernel driver ("580.159"), else "CUDA 13.0"; "" on the CPU
  std::string cc;      // compute capability "9.0"; "" on the CPU
};

/// The CPU model (from /proc/cpuinfo where available) with its logical core count.
DeviceSummary describe_cpu();
/// CUDA device `index`. Throws Unsupported when there is no such device.
DeviceSummary describe_cuda_device(int index);

/// A parameter value of a case: integer, real, text or flag.
using ParamValue = std::variant<std::int64_t, double, std::string, bool>;

/// One measured configuration of one implementation.
struct BenchCase {
  std::string implementation;  // "halfscope", "cublas", "openblas", "cudnn-via-pytorch", ...
  std::string method;
  std::string precision;
  std::map<std::string, ParamValue> params;
  Stats stats;
  double GBps = NAN;    // achieved bandwidth; NaN (JSON null) where it does not apply
  double TFLOPs = NAN;  // achieved arithmetic rate; NaN (JSON null) where it does not apply
  std::map<std::string, double> error;  // accuracy metrics against the FP64 reference
};

/// One benchmark run: the whole JSON file.
struct BenchReport {
  std::string benchmark;  // "ceilings", "conv", ...
  std::string date;       // UTC, YYYY-MM-DD
  std::string commit;     // short git hash, or "unknown"
  DeviceSummary device;
  Ceilings ceilings;                      // of `device`
  std::optional<Ceilings> host_ceilings;  // the host CPU's, when measured in the same run
  std::vector<BenchCase> cases;

  /// A report dated today for the current commit.
  static BenchReport start(std::string benchmark, DeviceSummary device);
  /// The JSON text (2-space indented, trailing newline).
  [[nodiscard]] std::string to_json() const;
  /// Writes the JSON atomically (io::write_file_atomic). Throws IoError.
  void write(const std::filesystem::path& path) const;
};

/// Parses a report; throws IoError starting with `name` for malformed JSON or a field of the
/// wrong type. Absent optional fields read as empty / NaN.
BenchReport parse_bench_report(std::span<const std::byte> bytes, std::string_view name);
/// Reads and parses a report file.
BenchReport read_bench_report(const std::filesystem::path& path);

/// Today's date in UTC, "YYYY-MM-DD".
std::string utc_date();
/// Env HALFSCOPE_COMMIT, else `git rev-parse --short HEAD` in the source tree (env
/// HALFSCOPE_SOURCE_DIR, else the tree this file was built from), else "unknown".
std::string source_commit();
/// File-name form of a device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3".
std::string device_slug(std::string_view name);
/// `dir / "<date>-<device slug>-<benchmark>.json"`.
std::filesystem::path result_path(const std::filesystem::path& dir, const BenchReport& report);

/// The recorded reports in `dir`: regular, non-hidden `*.json` files whose name contains `tag`
/// ("ceilings", "-conv", "-mfilter"), sorted by file name (so, for names from result_path, the
/// newest date last). Empty when the folder does not exist.
std::vector<std::filesystem::path> recorded_report_files(const std::filesystem::path& dir,
                                                         std::string_view tag);

/// The most recent recorded ceilings of `device_name` in `dir` (files `*ceilings*.json`, latest
/// by date then file name; a device's own ceilings or the host_ceilings of a GPU run). nullopt
/// when the folder or a matching record does not exist; IoError for a malformed file.
std::optional<Ceilings> load_latest_ceilings(const std::filesystem::path& dir,
                                             std::string_view device_name);

}  // namespace halfscope::bench
