// The message of the exception a call is expected to throw, for tests that check what an error
// names (the AO system validation, JSON and MOAO-format readers).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope::test {

/// Runs `f`, expects it to throw `E`, returns the message; records a failure naming `type` (and
/// returns "") when nothing is thrown. Any other exception propagates and fails the test.
template <class E>
std::string thrown_message(const std::function<void()>& f, const char* type) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no " << type << " thrown";
  return {};
}

/// Runs `f`, expects InvalidInput, returns its message.
inline std::string invalid_message(const std::function<void()>& f) {
  return thrown_message<InvalidInput>(f, "InvalidInput");
}

/// Runs `f`, expects IoError, returns its message.
inline std::string io_message(const std::function<void()>& f) {
  return thrown_message<IoError>(f, "IoError");
}

}  // namespace halfscope::test
