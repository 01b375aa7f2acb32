// Shared by the matched-filtering GPU tests: every GPU method x precision pair with its test
// name and, in CUDA builds, a forced chunk size restored at scope exit and device copies of
// host vectors.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/mfilter.hpp"
#include "mfilter/dispatch.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#include "halfscope/core/cuda_memory.hpp"
#endif

namespace halfscope::mftest {

/// One GPU method with one of its precisions (a test parameter).
struct MethodCase {
  MfMethod method;
  Precision precision;
};

/// Every GPU method x precision pair of mf_supported_precisions.
inline constexpr std::array<MethodCase, 9> kEveryGpuMethod{{{MfMethod::Naive, Precision::Single},
                                                            {MfMethod::Cublas1, Precision::Single},
                                                            {MfMethod::Cublas2, Precision::Mixed},
                                                            {MfMethod::Cublas3, Precision::Mixed},
                                                            {MfMethod::Cublas4, Precision::Half},
                                                            {MfMethod::FFT, Precision::Single},
                                                            {MfMethod::Tensor, Precision::Mixed},
                                                            {MfMethod::Tensor, Precision::BF16},
                                                            {MfMethod::Tensor, Precision::Split}}};

/// "tensor_split": the test-name suffix of a MethodCase parameter.
inline std::string method_case_name(const ::testing::TestParamInfo<MethodCase>& info) {
  return std::string(mf_method_name(info.param.method)) + "_" +
         std::string(precision_name(info.param.precision));
}

#if HALFSCOPE_WITH_CUDA
/// Forces the GPU dispatch's chunk size (correlation times; 0 = sized from free memory) and
/// restores the sizing from free memory when the test ends, also on failure.
struct ForcedChunks {
  explicit ForcedChunks(std::int64_t n) { mfilter::set_chunk_correlations_for_testing(n); }
  ~ForcedChunks() { mfilter::set_chunk_correlations_for_testing(0); }
  ForcedChunks(const ForcedChunks&) = delete;
  ForcedChunks& operator=(const ForcedChunks&) = delete;
};

/// Forces the correlation times per chunk of a GPU detection with an absolute threshold (0 = the
/// default) and restores the default when the test ends, also on failure.
struct ForcedDetectChunks {
  explicit ForcedDetectChunks(std::int64_t n) { mfilter::set_detect_chunk_for_testing(n); }
  ~ForcedDetectChunks() { mfilter::set_detect_chunk_for_testing(0); }
  ForcedDetectChunks(const ForcedDetectChunks&) = delete;
  ForcedDetectChunks& operator=(const ForcedDetectChunks&) = delete;
};

/// A device copy of a host vector (or `n` uninitialised elements), freed at scope exit.
template <class T>
struct DeviceVector {
  cuda::StreamScratch mem;
  explicit DeviceVector(const std::vector<T>& host)
      : mem(static_cast<std::int64_t>(host.size() * sizeof(T)), nullptr) {
    HS_CUDA_CHECK(
        cudaMemcpy(mem.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceVector(std::int64_t n) : mem(n * static_cast<std::int64_t>(sizeof(T)), nullptr) {}
  T* get() const { return mem.as<T>(); }
};

/// The float32 copy of a double vector (backends take float32 operands).
inline std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}
#endif

}  // namespace halfscope::mftest
