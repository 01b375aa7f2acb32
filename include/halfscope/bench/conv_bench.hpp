// `halfscope bench conv`: study 000's Figures 2-4 on today's GPU. Time per method and precision
// against kernel width on the 512x512 camera image and on large random images, the half/single
// speed-up, and the MRE against an FP64 reference, next to the machine's ceilings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/bench/report.hpp"
#include "halfscope/conv.hpp"

namespace halfscope::bench {

struct ConvBenchOptions {
  std::vector<std::int64_t> sizes{512, 4096, 8192};  // square images
  /// Odd Gaussian kernel widths; the default samples the study's 3..115.
  std::vector<std::int64_t> widths{3, 5, 7, 9, 11, 15, 21, 25, 31, 35, 41, 51, 65, 81, 99, 115};
  /// (method, precision) pairs; empty = every GPU method x precision conv supports.
  std::vector<std::pair<ConvMethod, Precision>> cases;
  std::filesystem::path image_512;  // the camera image (.npy); random when empty or absent
  int repeats = 20;                 // timed samples per case (fewer when a case is slow)
  /// Calls per timed sample, back to back (the sample is their mean): 1 times each call on its
  /// own, its host-side work included; more shows what a stream of calls sustains, the host's
  /// work then overlapping the GPU's (halfscope cases only; the overflow check is deferred).
  int calls_per_sample = 1;
  double max_ms_per_case = 1500;  // stop repeating a case after this much measured time
  /// Where to export the inputs (image_<n>.npy float32, kernel_<w>.npy float64) for the peer
  /// script bench/peers/conv_peers.py, which measures cuDNN and CuPy on the same data.
  std::filesystem::path export_dir;
  std::function<void(const std::string&)> progress;
};

/// Runs the sweep on CUDA device 0. Throws Unsupported without CUDA. Each halfscope case times
/// ConvPlan::run on device arrays (the kernel converted and, for Separable and Auto, factored once,
/// as a caller applying one kernel to many images does) and records time statistics, GB/s (image
/// read + output written, in storage bytes), direct-equivalent TFLOP/s (2 k^2 N^2 / t) and the
/// errors against an FP64 direct convolution computed on the GPU.
BenchReport run_conv_bench(const ConvBenchOptions& options);

}  // namespace halfscope::bench
