// Tables of one value per template and channel (matched filtering's moveouts and weights) read by
// ranges of templates instead of whole: what matched filtering over MPI ranks
// (halfscope/mpi/mfilter.hpp) takes so that a rank holds only its template group's rows of the
// network, never the whole network of a large catalogue.
//
//   const auto moveouts = io::npy_table("moveouts.npy", "moveouts");  // (T, C), not read yet
//   const Array rows = moveouts->read(256, 512);                       // (256, C)
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// A table read by ranges of rows (its first axis: templates). Reads are independent and may run
/// from several threads.
class TableSource {
 public:
  virtual ~TableSource() = default;
  /// The table's shape as stored: (T, C), or (T) for a one-dimensional table.
  [[nodiscard]] virtual Shape shape() const = 0;
  /// The stored type, which read() keeps (its users convert as they convert whole arrays).
  [[nodiscard]] virtual DType dtype() const = 0;
  /// Rows [begin, end): a host C-contiguous (end - begin, C) array of dtype() ((end - begin, 1)
  /// for a one-dimensional table). InvalidInput unless 0 <= begin <= end <= T, and for a file of
  /// floating-point values naming the file, the table and the [template, channel] of the first
  /// non-finite value; IoError naming the file when a read fails.
  [[nodiscard]] virtual Array read(std::int64_t begin, std::int64_t end) const = 0;
  /// How the table would describe itself as an Array (Array::describe()), for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// A table in memory, of any shape with at least one axis, viewed (host data; data on a device
/// are copied to the host once, here). Its values are not checked here: matched filtering checks
/// them as it checks whole arrays.
std::unique_ptr<TableSource> array_table(const Array& table);

/// A .npy file of at least one axis, any dtype, either byte order and either memory order: only
/// its header is read here; each read() then takes its rows' bytes (one read in C order, one per
/// column in Fortran order). `what` names the table in messages ("weights"). IoError /
/// InvalidInput naming the file as read_npy words them.
std::unique_ptr<TableSource> npy_table(const std::filesystem::path& path, const std::string& what);

}  // namespace halfscope::io
