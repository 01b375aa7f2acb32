// libFuzzer target for the .npy reader. Any halfscope::Error is an expected rejection; anything
// else (another exception, a crash, a sanitizer report) is a bug. A file that parses must also
// survive a write / read round trip unchanged, and its rows read from the file by
// NpyPartReader::read_rows (io::npy_table: C and Fortran order, both byte orders) must equal it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include <unistd.h>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/table_source.hpp"

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
  if (a.ndim() < 1) return 0;
  // The file's rows in two reads, against the parsed array's C-order bytes.
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("halfscope-fuzz-npy-" + std::to_string(::getpid()));
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  const auto table = halfscope::io::npy_table(file, "rows");
  const std::int64_t T = a.dim(0), half = T / 2;
  halfscope::Array r0, r1;
  try {
    r0 = table->read(0, half);
    r1 = table->read(half, T);
  } catch (const halfscope::InvalidInput&) {
    // Only a non-finite value of a floating-point table is refused (and named).
    if (!halfscope::dtype_is_float(a.dtype())) std::abort();
    std::filesystem::remove(file);
    return 0;
  }
  std::filesystem::remove(file);
  const std::size_t head = static_cast<std::size_t>(T == 0 ? 0 : half * (ca.nbytes() / T));
  if (r0.nbytes() + r1.nbytes() != ca.nbytes() ||
      (head > 0 && std::memcmp(r0.data(), ca.data(), head) != 0) ||
      (r1.nbytes() > 0 && std::memcmp(r1.data(), static_cast<const std::byte*>(ca.data()) + head,
                                      static_cast<std::size_t>(r1.nbytes())) != 0))
    std::abort();
  return 0;
}
