// libFuzzer target for the .npy reader. Any halfscope::Error is an expected rejection; anything
// else (another exception, a crash, a sanitizer report) is a bug. A file that parses must also
// survive a write / read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  halfscope::Array a;
  try {
    a = halfscope::io::parse_npy(bytes, "fuzz.npy");
  } catch (const halfscope::Error&) {
    return 0;
  }
  // Compared in logical (C) order: strides may legitimately differ where an array is both C- and
  // F-contiguous (extents of 0 or 1), which is written as C order, as NumPy does.
  const halfscope::Array b = halfscope::io::parse_npy(halfscope::io::serialize_npy(a), "again.npy");
  const halfscope::Array ca = a.contiguous(), cb = b.contiguous();
  if (b.dtype() != a.dtype() || b.shape() != a.shape() ||
      std::memcmp(ca.data(), cb.data(), static_cast<std::size_t>(ca.nbytes())) != 0)
    std::abort();
  return 0;
}
