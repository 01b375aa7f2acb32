// Numeric tables as CSV.
//
// Reading: comma-separated values, one row per line ('\n' or "\r\n"), spaces and tabs around
// fields ignored, blank lines and lines starting with '#' skipped, a UTF-8 byte-order mark ignored.
// Numbers are parsed with std::from_chars (locale-independent); "nan", "inf", "-inf", "infinity"
// (any case) and a leading '+' are accepted, decimal values too small for float64 become +-0 (the
// nearest float64), and decimal values too large for it are an IoError (an infinity is written
// "inf"). The first row is a header when any of its fields is not a number and at least one data
// row follows it; fields may be "double-quoted" (with "" for a quote), and a quoted field is
// always text, never a number. Every row must have as many fields as the first: a ragged row is an
// IoError naming its line. A file without data rows (empty, only comments and blank lines, or a
// header alone) is an IoError too.
//
// Writing: one row per line, "\n" endings, integers exactly, floating values in the shortest form
// that reads back to the same value (std::to_chars), so float64 -> CSV -> float64 is bit-exact.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// A CSV table: the header row's names (empty when the file has no header) and the values as a
/// float64 array of shape {rows, columns}, rows >= 1.
struct CsvTable {
  std::vector<std::string> header;
  Array data;
};

/// Parses CSV text held in memory. Throws IoError starting with `name` and naming the line (and
/// field) at fault: a field that is not a number or beyond float64's range, a row with the wrong
/// number of fields; and "no data rows" for a table without any.
CsvTable parse_csv_table(std::span<const std::byte> bytes, std::string_view name);

/// Reads a CSV file with its header (see parse_csv_table).
CsvTable read_csv_table(const std::filesystem::path& path);

/// Parses CSV text into a float64 {rows, columns} array, discarding any header.
Array parse_csv(std::span<const std::byte> bytes, std::string_view name);

/// Reads a CSV file into a float64 {rows, columns} array, discarding any header.
Array read_csv(const std::filesystem::path& path);

/// The CSV text for a 1-D array (one column), a 2-D array (rows x columns) or a 0-d array (one
/// value), of any dtype, with an optional header row (one name per column; quoted where needed
/// so that it reads back as a header). Throws InvalidInput for other ranks or a header of the
/// wrong length.
std::string format_csv(const Array& a, const std::vector<std::string>& header = {});

/// Writes format_csv(a, header) to `path`, atomically.
void write_csv(const std::filesystem::path& path, const Array& a,
               const std::vector<std::string>& header = {});

}  // namespace halfscope::io
