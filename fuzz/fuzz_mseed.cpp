// libFuzzer target for the miniSEED reader (libmseed 2 underneath). Any halfscope::Error is an
// expected rejection; anything else (another exception, a crash, a sanitizer report) is a bug.
// Records that parse must write, and read back as the same traces (samples, ids, times, rates).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/mseed.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace halfscope::io;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Waveforms w;
  try {
    w = parse_mseed(bytes, "fuzz.mseed");
  } catch (const halfscope::Error&) {
    return 0;
  }
  if (w.traces.empty()) return 0;  // only text (log) records: nothing to write
  const Waveforms back = parse_mseed(serialize_mseed(w), "again.mseed");
  if (back.traces.size() != w.traces.size()) std::abort();
  for (std::size_t i = 0; i < w.traces.size(); ++i) {
    const Trace &a = w.traces[i], &b = back.traces[i];
    // A rate libmseed's factor/multiplier choice cannot hold goes through Blockette 100 as a
    // float32 (documented in mseed.hpp): equal to float32 precision.
    if (a.id() != b.id() || a.start_ns != b.start_ns ||
        std::abs(a.sample_rate - b.sample_rate) > 1e-7 * a.sample_rate ||
        a.data.dtype() != b.data.dtype() || a.data.size() != b.data.size() ||
        std::memcmp(a.data.data(), b.data.data(), static_cast<std::size_t>(a.data.nbytes())) != 0)
      std::abort();
  }
  return 0;
}
