// The machine's physical limits, measured: copy bandwidth and GEMM rate per precision. Every
// benchmark prints its own GB/s and TFLOP/s next to these (DESIGN.md section 5), so the distance
// to the limit is on the same line. `halfscope bench ceilings` runs both measurements.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "halfscope/bench/report.hpp"

namespace halfscope::bench {

/// What to measure and how long to spend. Zero sizes mean the defaults documented per field.
struct CeilingsOptions {
  bool quick = false;  // smaller problems: GPU GEMM n = 4096 and 256 MiB copies; CPU n = 1024
  /// GEMM order n (n x n times n x n). Default: 8192 on the GPU, 2048 on the CPU (quick: 4096 /
  /// 1024).
  std::int64_t gemm_n = 0;
  /// Bytes per copy buffer. Default: 1 GiB on the GPU, 256 MiB on the CPU (quick: 256 / 64 MiB).
  std::int64_t copy_bytes = 0;
  /// Timed repeats per GPU measurement (at least 10; the median is reported).
  int repeats = 10;
  /// Seconds the CPU may spend per measurement; CPU repeats (3 to 10) are fitted into it.
  double cpu_seconds_per_measurement = 1.5;
  /// Progress messages ("GEMM fp16 n=8192 ..."); may be empty.
  std::function<void(const std::string&)> progress;
};

/// CPU ceilings: parallel memcpy bandwidth (read + write bytes) over a buffer far larger than the
/// last-level cache, and OpenBLAS SGEMM / DGEMM rates (where built with BLAS). Takes a few seconds.
/// Returns a report with benchmark "ceilings", device = this CPU, one case per measurement.
BenchReport measure_cpu_ceilings(const CeilingsOptions& options = {});

/// GPU ceilings of CUDA device `device`: a vectorised device-to-device copy kernel and
/// cudaMemcpyAsync on fresh random data, and cuBLAS GEMM rates for FP32 (no TF32), TF32, FP16 and
/// BF16 (FP32 accumulate) and FP64, CUDA-event timed, median of repeats; rate = 2 n^3 / t.
/// Throws Unsupported in a build without CUDA or when the device does not exist.
BenchReport measure_gpu_ceilings(int device, const CeilingsOptions& options = {});

}  // namespace halfscope::bench
