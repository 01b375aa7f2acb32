// Internal: the pieces of .npy reading (npy.cpp) that the readers of parts of a file
// (sample_source.cpp, template_source.cpp, table_source.cpp, template_cut.cpp) share, and the
// checks they share.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "halfscope/core/array.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/template_source.hpp"

namespace halfscope::io::detail {

/// IoError starting with `name` unless exactly h.data_bytes of data follow the header
/// (`available`: the bytes after h.data_offset): fewer is "truncated", more is an error too.
void check_npy_data_size(const NpyHeader& h, std::int64_t available, std::string_view name);

/// The header of an opened .npy file (the preamble, then the dict), checked as parse_npy checks
/// a whole file (check_npy_data_size included): the same IoError messages, without reading the
/// data.
NpyHeader read_npy_file_header(InputFile& file, std::string_view name);

/// Brings `count` elements of the file's byte order into the machine's, in place.
void to_native_order(const NpyHeader& h, std::byte* data, std::int64_t count);

/// The type a source of parts of an array returns (sample_source.hpp, template_source.hpp):
/// float32 and float64 as stored, the other real types as float64 (exact for every integer type
/// up to 53 bits and for float16, as matched filtering's own conversion).
inline DType source_read_type(DType stored) {
  return stored == DType::f32 || stored == DType::f64 ? stored : DType::f64;
}

/// InvalidInput "NAME: ITEMS [begin, end): expected a KIND inside [0, extent)" unless
/// 0 <= begin <= end <= extent: the range check of every part reader.
void check_range(const std::string& name, std::string_view items, std::string_view kind,
                 std::int64_t begin, std::int64_t end, std::int64_t extent);

/// InvalidInput naming the source (or "data" for one in memory) unless 0 <= begin <= end <= L:
/// what every SampleSource::read checks first.
void check_window(const SampleSource& s, std::int64_t begin, std::int64_t end);

/// InvalidInput naming the source (or "templates" for one in memory) unless
/// 0 <= begin <= end <= T: what every TemplateSource::read checks first.
void check_template_range(const TemplateSource& s, std::int64_t begin, std::int64_t end);

/// The index of the first non-finite value of v[0, n), or n: where the part readers' checks
/// (template_source.cpp, table_source.cpp) find the value they name.
template <class V>
std::int64_t first_nonfinite(const V* v, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return i;
  return n;
}

/// An opened .npy file whose header is read and checked (read_npy_file_header), for readers of
/// parts of its data (sample_source.cpp, template_source.cpp). Reads from several threads take
/// turns on the one file stream.
class NpyPartReader {
 public:
  explicit NpyPartReader(const std::filesystem::path& path);
  [[nodiscard]] const NpyHeader& header() const noexcept { return header_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// "name (dtype[shape])", as the file's array would describe itself.
  [[nodiscard]] std::string describe() const;
  /// Exactly `count` data bytes from `offset` past the header, in the file's byte order; IoError
  /// naming the file when fewer are there (the file shrank since the header was read).
  void read(std::byte* out, std::int64_t count, std::int64_t offset) const;
  /// Rows [begin, end) along the first axis (0 <= begin <= end <= the first extent, checked by
  /// the caller), C-contiguous, of the file's dtype in the machine's byte order: one read in C
  /// order, one per element of a row in Fortran order (where a row's elements lie T apart).
  [[nodiscard]] Array read_rows(std::int64_t begin, std::int64_t end) const;

 private:
  std::string name_;
  mutable InputFile file_;
  mutable std::mutex mutex_;
  NpyHeader header_;
};

}  // namespace halfscope::io::detail
