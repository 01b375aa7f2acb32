// Helpers shared by the GoogleTest suites: temporary folders, source-tree paths, random data and
// the GPU skip.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"

namespace halfscope::test {

/// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("halfscope-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

/// The repository root (set by ctest; falls back to the current folder).
inline std::filesystem::path source_dir() {
  const char* s = std::getenv("HALFSCOPE_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::current_path();
}

/// Uniform random values in [lo, hi), reproducible from `seed`. Never zeros: zeros hide bugs.
inline std::vector<float> random_floats(std::int64_t n, float lo, float hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

/// ||got - ref||_F / ||ref||_F of two float32 host arrays of the same size, in FP64.
inline double relative_difference(const Array& got, const Array& ref) {
  double num = 0, den = 0;
  for (std::int64_t k = 0; k < ref.size(); ++k) {
    const double d = static_cast<double>(got.data_as<float>()[k]) - ref.data_as<float>()[k];
    num += d * d;
    den += static_cast<double>(ref.data_as<float>()[k]) * ref.data_as<float>()[k];
  }
  return std::sqrt(num / den);
}

/// The message of `call`'s exception E, or "" when it throws nothing.
template <class E, class F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace halfscope::test

/// First line of every GPU test: skips (never fails, never passes unchecked) without a device.
#define HS_REQUIRE_GPU()                                                  \
  do {                                                                    \
    if (!::halfscope::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)
