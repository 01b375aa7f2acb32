// Helpers shared by the tests of the readers of parts of files (test_sample_source.cpp,
// test_template_source.cpp, test_seismic_windows.cpp): NumPy's fixture files and byte-for-byte
// array equality.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "halfscope/core/array.hpp"
#include "test_support.hpp"

namespace halfscope::test {

/// A file of tests/data/numpy (written by NumPy itself).
inline std::filesystem::path numpy_fixture(const std::string& name) {
  return source_dir() / "tests" / "data" / "numpy" / name;
}

/// The same shape, dtype and bytes.
inline ::testing::AssertionResult same_bytes(const Array& expected, const Array& got) {
  if (expected.shape() != got.shape() || expected.dtype() != got.dtype())
    return ::testing::AssertionFailure()
           << "expected " << expected.describe() << ", got " << got.describe();
  if (expected.nbytes() > 0 &&
      std::memcmp(expected.data(), got.data(), static_cast<std::size_t>(expected.nbytes())) != 0)
    return ::testing::AssertionFailure() << "values differ in " << expected.describe();
  return ::testing::AssertionSuccess();
}

}  // namespace halfscope::test
