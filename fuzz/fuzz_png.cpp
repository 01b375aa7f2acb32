// libFuzzer target for the PNG reader (libpng behind setjmp-based error handling). Any
// halfscope::Error is an expected rejection; anything else is a bug. A small image that parses is
// also rendered back to PNG, which exercises the scaling and colormap code on arbitrary values.
#include <cstddef>
#include <cstdint>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/png.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const halfscope::Array image = halfscope::io::parse_png(bytes, "fuzz.png");
    if (image.size() > 0 && image.size() <= 4096) {
      halfscope::io::PngOptions o;
      o.scale = static_cast<halfscope::io::Scale>(size % 3);
      o.colormap = size % 2 ? halfscope::io::Colormap::perceptual : halfscope::io::Colormap::gray;
      (void)halfscope::io::parse_png(halfscope::io::render_png(image, o), "again.png");
    }
  } catch (const halfscope::Error&) {
  }
  return 0;
}
