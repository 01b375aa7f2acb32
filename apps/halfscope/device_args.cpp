// Command-line values for GPU runs shared by several subcommands (cli.hpp): byte sizes with a
// binary suffix and the checks of a --devices list. Kept apart from the subcommands so that every
// command refuses the same things with the same words, and so that the parser is unit-tested
// (tests/cli/test_device_args.cpp).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::cli {

namespace {

// Binary multiples: the sizes users read from nvidia-smi (MiB) and cudaMemGetInfo are powers of
// 1024, so 16G must mean 16 GiB, not 16e9 bytes.
int suffix_shift(char c) {
  switch (c) {
    case 'K':
    case 'k':
      return 10;
    case 'M':
    case 'm':
      return 20;
    case 'G':
    case 'g':
      return 30;
    case 'T':
    case 't':
      return 40;
    default:
      return -1;
  }
}

}  // namespace

std::int64_t parse_size(std::string_view text, std::string_view option) {
  const std::string found = "found '" + std::string(text) + "'";
  const std::string expected =
      std::string(option) +
      ": expected a size in bytes: digits with an optional suffix K, M, G or T (powers of 1024, "
      "e.g. 16G), ";
  std::string_view digits = text;
  int shift = 0;
  if (!digits.empty() && suffix_shift(digits.back()) > 0) {
    shift = suffix_shift(digits.back());
    digits.remove_suffix(1);
  }
  // Digits only: a sign, a fraction, spaces or an unknown suffix are refused, never guessed at.
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw InvalidInput(expected + found);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t value = 0;
  for (const char c : digits) {
    const int d = c - '0';
    if (value > (kMax - d) / 10) throw InvalidInput(expected + "at most 2^63 - 1 bytes, " + found);
    value = value * 10 + d;
  }
  if (value > (kMax >> shift)) throw InvalidInput(expected + "at most 2^63 - 1 bytes, " + found);
  return value << shift;
}

std::string device_list_text(const std::vector<int>& devices) {
  std::string text;
  for (const int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

DeviceKind check_device_list(const std::vector<int>& devices, const std::string& device) {
  const std::string option = "--devices " + device_list_text(devices);
  for (std::size_t k = 0; k < devices.size(); ++k) {
    if (devices[k] < 0)
      throw InvalidInput(option + ": expected CUDA device indices >= 0, found " +
                         std::to_string(devices[k]));
    // The factorization deals tile columns to the listed devices: a repeated index would be
    // dealt twice, so it is refused rather than silently merged.
    if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(k), devices[k]) !=
        devices.begin() + static_cast<std::ptrdiff_t>(k))
      throw InvalidInput(option + ": expected distinct CUDA device indices, found " +
                         std::to_string(devices[k]) + " twice");
  }
  if (parse_device_kind(device) == DeviceKind::Cpu)
    throw InvalidInput(option + ": expected a GPU run (--device auto or cuda), found --device cpu");
  // A device list asks for the GPU: with auto and no usable device the run would otherwise fall
  // back to the CPU and ignore the list.
  if (!cuda_available()) {
    const DeviceReport r = query_devices();
    throw Unsupported(option + ": expected a CUDA device, found none (" + r.status +
                      "); leave out --devices to run on the CPU");
  }
  return DeviceKind::Cuda;
}

void refuse_gpu_over_ranks(const std::string& given, int ranks, const std::string& grid) {
  if (ranks > 1)
    throw InvalidInput(given + ": expected one process (a one-process option; over MPI ranks " +
                       "each GPU rank uses one device), found " + std::to_string(ranks) +
                       " MPI ranks");
  if (!grid.empty())
    throw InvalidInput(given + ": expected no --grid (a one-process option), found --grid " + grid);
}

}  // namespace halfscope::cli
