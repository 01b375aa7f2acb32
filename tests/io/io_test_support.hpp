// Helpers shared by the tests of the readers of parts of files (test_sample_source.cpp,
// test_template_source.cpp, test_table_source.cpp, test_seismic_windows.cpp): NumPy's fixture
// files, byte-for-byte array equality and every range a source reads.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "halfscope/core/array.hpp"
#include "test_support.hpp"

namespace halfscope::test {

/// A file of tests/data/numpy (written by NumPy itself).
inline std::filesystem::path numpy_fixture(const std::string& name) {
  return source_dir() / "tests" / "data" / "numpy" / name;
}

/// `text` written to `path` (pick tables, lists).
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
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

/// Every range [a, b) of [0, n) that `source` reads (source.read(a, b)) equals expected(a, b)
/// byte for byte.
template <class Source, class Expected>
void expect_every_range(const Source& source, std::int64_t n, const Expected& expected) {
  for (std::int64_t a = 0; a <= n; ++a)
    for (std::int64_t b = a; b <= n; ++b)
      EXPECT_TRUE(same_bytes(expected(a, b), source.read(a, b)))
          << source.describe() << " [" << a << ", " << b << ")";
}

}  // namespace halfscope::test
