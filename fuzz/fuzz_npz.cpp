// libFuzzer target for the .npz reader (ZIP parsing, inflation, CRC, embedded .npy). Any
// halfscope::Error is an expected rejection; anything else is a bug. An archive that parses must
// survive a write / read round trip with the same names and arrays.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  halfscope::io::NamedArrays arrays;
  try {
    arrays = halfscope::io::parse_npz(bytes, "fuzz.npz");
  } catch (const halfscope::Error&) {
    return 0;
  }
  for (const bool zip64 : {false, true}) {
    halfscope::io::NamedArrays again;
    try {
      again = halfscope::io::parse_npz(halfscope::io::serialize_npz(arrays, {zip64}), "again.npz");
    } catch (const halfscope::InvalidInput&) {
      return 0;  // names the writer refuses (NUL bytes, ...) that a hostile archive may carry
    }
    if (again.size() != arrays.size()) std::abort();
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      const auto& [name, a] = arrays[i];
      const auto& [name2, b] = again[i];
      const halfscope::Array ca = a.contiguous(), cb = b.contiguous();
      if (name != name2 || a.dtype() != b.dtype() || a.shape() != b.shape() ||
          std::memcmp(ca.data(), cb.data(), static_cast<std::size_t>(ca.nbytes())) != 0)
        std::abort();
    }
  }
  return 0;
}
