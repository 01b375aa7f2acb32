// Internal: reading the environment switches that turn a choice off for tests and benchmarks.
#pragma once

#include <cstdlib>
#include <string>

namespace halfscope {

/// Whether environment variable `name` is "0" (HALFSCOPE_CONV_MEASURE, _STREAM, _ROLL,
/// HALFSCOPE_MF_TENSOR_DIRECT, _WGMMA ...).
inline bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "0";
}

}  // namespace halfscope
