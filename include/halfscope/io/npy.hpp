// NumPy's .npy and .npz formats.
//
// .npy: a magic string, a format version (1.0, 2.0 or 3.0), a Python-literal header dict
// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` and the raw element bytes. The
// reader parses the dict itself (strictly: exactly those three keys, no other Python syntax) and
// accepts float16/32/64, int8..64 and uint8..64 in either byte order; big-endian data is swapped
// into native order, and a Fortran-order file becomes an Array with Fortran strides over the file's
// bytes (no transpose). The writer writes native (little-endian) data in the array's own order and
// pads the header to 64 bytes exactly as NumPy does, so NumPy and halfscope write identical files.
//
// .npz: a ZIP archive of .npy members, as np.savez (stored) and np.savez_compressed (deflated)
// write it, ZIP64 included. Every size and offset in an archive is checked against the bytes
// present before use, CRC-32 is verified, and inflation stops at the size the member's own .npy
// header implies, so a hostile archive costs at most what its contents honestly decode to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// What a .npy header says, and where the data starts.
struct NpyHeader {
  int major_version = 1;         // 1, 2 or 3
  DType dtype = DType::f32;      // element type (native-order equivalent)
  bool big_endian = false;       // data bytes are big-endian ('>')
  bool fortran_order = false;    // data is stored in Fortran (column-major) order
  Shape shape;                   // every extent >= 0; {} is a 0-d array of one element
  std::int64_t data_offset = 0;  // bytes from the start of the file to the first element
  std::int64_t data_bytes = 0;   // shape_size(shape) * dtype_size(dtype), overflow-checked
};

/// Parses the magic, version and header dict at the start of `bytes` (which may be just a prefix
/// of the file: only the header must be present). Throws IoError starting with `name` when the
/// header is malformed or truncated, Unsupported for valid NumPy dtypes halfscope lacks (complex,
/// object, bool, strings, structured, ...).
NpyHeader parse_npy_header(std::span<const std::byte> bytes, std::string_view name);

/// Parses a whole .npy file held in memory into a host Array that owns a copy of the data.
/// The data must be exactly `data_bytes` long: fewer bytes is "truncated", more is an error too.
Array parse_npy(std::span<const std::byte> bytes, std::string_view name);

/// Reads a .npy file (see parse_npy).
Array read_npy(const std::filesystem::path& path);

/// A .npy file in two pieces, without copying the data: `header` (magic through the padded dict)
/// followed by the raw bytes of `data`, a host array that is C-contiguous, or F-contiguous when
/// the header says fortran_order. `data` is the input itself when that needs no copy.
struct NpyParts {
  std::vector<std::byte> header;
  Array data;
};

/// The header of a .npy file (magic through the padded dict, the data then starting on a 64-byte
/// boundary) for an array of `dtype` and `shape`, C order unless `fortran`: what write_npy writes
/// before the data, for writers that place the data themselves (the MPI ranks' parts of one
/// result). Throws Unsupported for bfloat16.
std::vector<std::byte> npy_header(DType dtype, const Shape& shape, bool fortran = false);

/// Splits `a` into NpyParts. Device arrays are copied to the host; arrays that are neither C- nor
/// F-contiguous are made C-contiguous. Throws Unsupported for bfloat16 (NumPy has no such dtype:
/// convert to float32 first) and InvalidInput for an empty (default-constructed) Array.
NpyParts npy_parts(const Array& a);

/// The complete .npy file for `a` in memory (header + data). See npy_parts for what is accepted.
std::vector<std::byte> serialize_npy(const Array& a);

/// Writes `a` as a .npy file, atomically (a failure leaves no file and no clobbered target).
void write_npy(const std::filesystem::path& path, const Array& a);

/// Named arrays in archive order; names are the member names without the ".npy" suffix.
using NamedArrays = std::vector<std::pair<std::string, Array>>;

/// Parses a .npz archive held in memory. Members must be .npy files, stored or deflated; member
/// names must be unique. Throws IoError starting with `name` (and the member's name where one is
/// at fault) for anything malformed, truncated or failing its CRC.
NamedArrays parse_npz(std::span<const std::byte> bytes, std::string_view name);

/// Reads a .npz file (see parse_npz).
NamedArrays read_npz(const std::filesystem::path& path);

/// How write_npz / serialize_npz lay out the archive.
struct NpzWriteOptions {
  /// Use ZIP64 records for every member and the end of the archive even when sizes and offsets
  /// fit in 32 bits (they are used automatically where they do not). For tests and for readers
  /// that want uniform records, like Python's zipfile force_zip64.
  bool force_zip64 = false;
};

/// The .npz archive (members stored uncompressed, as np.savez writes) in memory. Names must be
/// non-empty, unique and free of NUL; ".npy" is appended to each. Throws InvalidInput otherwise.
std::vector<std::byte> serialize_npz(const NamedArrays& arrays,
                                     const NpzWriteOptions& options = {});

/// Writes a .npz archive atomically, streaming each array's data without an extra copy.
void write_npz(const std::filesystem::path& path, const NamedArrays& arrays,
               const NpzWriteOptions& options = {});

}  // namespace halfscope::io
