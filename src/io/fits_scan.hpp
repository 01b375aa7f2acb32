// Private to the FITS reader: a walk over a FITS file's HDU headers that needs no cfitsio.
//
// cfitsio 4.2 parses every header it passes on the way to an extension, and a binary-table
// header with broken mandatory keywords makes it use uninitialised memory (valgrind, and
// fuzz/fuzz_fits.cpp: huge calloc sizes, 67 million invalid reads). The reader therefore finds the
// image HDU itself, checking only the mandatory keywords it must trust to skip HDUs, and hands
// cfitsio nothing but the primary header and that one image HDU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace halfscope::io::detail {

/// Where one HDU lies in the file (bytes from its start). `end` may exceed the file size for a
/// truncated last HDU.
struct FitsHduSpan {
  std::int64_t header_start = 0, data_start = 0, data_bytes = 0, end = 0;
  std::string xtension;  // "" for the primary HDU
  std::int64_t naxis = 0;
};

/// The HDU whose image the reader takes: the primary when it has NAXIS > 0, else the first
/// XTENSION = 'IMAGE' with NAXIS > 0. `index` is 1-based (1 = primary).
struct FitsImageLocation {
  FitsHduSpan primary, image;
  int index = 1;
};

/// Finds the image HDU. Throws IoError starting with `name` for a malformed mandatory keyword,
/// a header without END, an unknown extension type, or no image at all; Unsupported when the
/// only image is tile-compressed (a BINTABLE with ZIMAGE = T).
FitsImageLocation locate_fits_image(std::span<const std::byte> bytes, const std::string& name);

}  // namespace halfscope::io::detail
