// libFuzzer target for the SAC reader. Any halfscope::Error is an expected rejection; anything
// else (another exception, a crash, a sanitizer report) is a bug. A file that parses must also
// write, and what it writes must read back as the same trace and write the same bytes again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/sac.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace halfscope::io;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  SacFile s;
  try {
    s = parse_sac(bytes, "fuzz.sac");
  } catch (const halfscope::Error&) {
    return 0;
  }
  const auto once = serialize_sac(s, size % 2 == 0);
  const SacFile back = parse_sac(once, "again.sac");
  const Trace &a = s.trace, &b = back.trace;
  if (a.id() != b.id() || a.start_ns != b.start_ns || a.sample_rate != b.sample_rate ||
      a.data.size() != b.data.size() ||
      std::memcmp(a.data.data(), b.data.data(), static_cast<std::size_t>(a.data.nbytes())) != 0)
    std::abort();
  if (serialize_sac(back, size % 2 == 0) != once) std::abort();
  return 0;
}
