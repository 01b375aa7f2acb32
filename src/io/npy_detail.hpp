// Internal: the pieces of .npy reading (npy.cpp) that a reader of parts of a file
// (sample_source.cpp) shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"

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

}  // namespace halfscope::io::detail
