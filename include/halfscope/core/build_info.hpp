// What this build of halfscope contains: version, options, and the versions of the libraries it
// was built with, for `halfscope info` and for every benchmark record.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace halfscope {

struct BuildInfo {
  std::string version;
  std::string build_type;
  std::string cxx_compiler;
  std::string cuda_compiler;                                   // empty without CUDA
  std::string cuda_archs;                                      // empty without CUDA
  std::vector<std::pair<std::string, bool>> options;           // HALFSCOPE_WITH_CUDA, ...
  std::vector<std::pair<std::string, std::string>> libraries;  // name -> version
};

/// The build's description (cheap; needs no GPU).
BuildInfo build_info();

}  // namespace halfscope

namespace halfscope {

/// The CPU side of the machine, for reports.
struct HostInfo {
  std::string hostname;
  std::string cpu_model;  // from /proc/cpuinfo where available
  int logical_cpus = 0;
  long long memory_bytes = 0;
  std::string os;  // PRETTY_NAME of /etc/os-release
};

HostInfo host_info();

}  // namespace halfscope
