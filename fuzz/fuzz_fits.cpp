// libFuzzer target for the FITS reader (cfitsio underneath). Any halfscope::Error is an expected
// rejection; anything else (another exception, a crash, a sanitizer report) is a bug. An image
// that parses must write, and read back with the same values, bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/fits.hpp"

namespace {

void round_trip(const halfscope::io::FitsImage& img, halfscope::io::FitsValues values) {
  using namespace halfscope::io;
  const FitsImage back = parse_fits(serialize_fits(img, "fuzz"), "again.fits", values);
  const halfscope::Array a = img.data.contiguous(), b = back.data.contiguous();
  if (a.dtype() != b.dtype() || a.shape() != b.shape() ||
      std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.nbytes())) != 0)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace halfscope::io;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  for (FitsValues values : {FitsValues::physical, FitsValues::raw}) {
    FitsImage img;
    try {
      img = parse_fits(bytes, "fuzz.fits", values);
    } catch (const halfscope::Error&) {
      return 0;
    }
    if (img.data.size() > 0) round_trip(img, values);
  }
  return 0;
}
