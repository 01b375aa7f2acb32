#include "halfscope/core/build_info.hpp"

#include <png.h>
#include <zlib.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "halfscope/config.hpp"

#if HALFSCOPE_HAS_FITS
#include <fitsio.h>
#endif
#if HALFSCOPE_HAS_MSEED
#include <libmseed.h>
#endif
#if HALFSCOPE_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace halfscope {

BuildInfo build_info() {
  BuildInfo b;
  b.version = HALFSCOPE_VERSION;
  b.build_type = HALFSCOPE_BUILD_TYPE;
  b.cxx_compiler = HALFSCOPE_CXX_COMPILER;
  b.options = {{"cuda", HALFSCOPE_WITH_CUDA == 1},     {"cudnn", HALFSCOPE_WITH_CUDNN == 1},
               {"mpi", HALFSCOPE_HAS_MPI == 1},        {"fits", HALFSCOPE_HAS_FITS == 1},
               {"mseed", HALFSCOPE_HAS_MSEED == 1},    {"blas", HALFSCOPE_HAS_BLAS == 1},
               {"lapacke", HALFSCOPE_HAS_LAPACKE == 1}};
  b.libraries.emplace_back("libpng", PNG_LIBPNG_VER_STRING);
  b.libraries.emplace_back("zlib", zlibVersion());
#if HALFSCOPE_HAS_FITS
  float fits_version = 0;
  fits_get_version(&fits_version);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(fits_version));
  b.libraries.emplace_back("cfitsio", buf);
#endif
#if HALFSCOPE_HAS_MSEED
  b.libraries.emplace_back("libmseed", LIBMSEED_VERSION);
#endif
#if HALFSCOPE_WITH_CUDA
  b.cuda_compiler = HALFSCOPE_CUDA_COMPILER;
  b.cuda_archs = HALFSCOPE_CUDA_ARCHS;
  b.libraries.emplace_back("cuda-runtime (built)", std::to_string(CUDART_VERSION / 1000) + "." +
                                                       std::to_string(CUDART_VERSION % 1000 / 10));
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    b.libraries.emplace_back("cublas", std::to_string(major) + "." + std::to_string(minor) + "." +
                                           std::to_string(patch));
#endif
  return b;
}

}  // namespace halfscope

namespace halfscope {

namespace {
std::string first_value(const char* file, const std::string& key, char sep) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto pos = line.find(sep);
    if (pos == std::string::npos) continue;
    std::string v = line.substr(pos + 1);
    v.erase(0, v.find_first_not_of(" \t\""));
    while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
    return v;
  }
  return {};
}
}  // namespace

HostInfo host_info() {
  HostInfo h;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  h.cpu_model = first_value("/proc/cpuinfo", "model name", ':');
  h.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  const std::string mem = first_value("/proc/meminfo", "MemTotal", ':');
  if (!mem.empty()) h.memory_bytes = std::stoll(mem) * 1024;
  h.os = first_value("/etc/os-release", "PRETTY_NAME", '=');
  return h;
}

}  // namespace halfscope
