// One .npy file written by every MPI rank (issue 9): results distributed over the ranks (a matched
// filter's stack, a reconstructor's rows) reach the file system without being gathered on one
// rank, where a day of a large network's stack (17 GB) or the E-ELT R (4.5 GB) would be held
// twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "halfscope/core/array.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/mpi/comm.hpp"

namespace halfscope::mpi {

/// The outcome of a collective .npy write. On `root`, `file` is the output still uncommitted
/// (commit() gives it its name; dropping it removes it), so that a caller can make several outputs
/// appear together (nullptr on the other ranks); on every rank, how many ranks could not open the
/// file (0: written by the ranks; else the caller's data was gathered on root and written there).
struct NpyWrite {
  std::unique_ptr<io::AtomicOutput> file;
  std::int64_t ranks_without_file = 0;
};

/// A float32 .npy file of `shape` that the ranks write into at their own offsets (collective
/// constructor): `root` creates the temporary file of an io::AtomicOutput (the header, then the
/// file extended to its full size) and every rank opens it. A rank that cannot (its host does
/// not see root's file system; the test hook HALFSCOPE_UNSHARED_RANK=r pretends so for rank r)
/// counts in ranks_without_file(), the same on every rank: the caller then gathers instead.
/// Errors are agreed (every rank throws; root's temporary file is removed when `release()` was
/// not taken and this object goes).
class SharedNpy {
 public:
  SharedNpy(const Comm& comm, const std::filesystem::path& path, const Shape& shape, int root);
  ~SharedNpy();
  SharedNpy(const SharedNpy&) = delete;
  SharedNpy& operator=(const SharedNpy&) = delete;

  [[nodiscard]] std::int64_t ranks_without_file() const noexcept { return without_; }
  /// Writes `count` float32 values at element `offset` of the data (not collective; IoError on
  /// failure). Only where this rank has the file open (ranks_without_file() == 0, or root).
  void write(const float* values, std::int64_t count, std::int64_t offset) const;
  /// fsync of this rank's descriptor (IoError on failure).
  void sync() const;
  /// Root's uncommitted output (nullptr elsewhere), taken out of this object.
  std::unique_ptr<io::AtomicOutput> release() noexcept { return std::move(file_); }

 private:
  std::string what_;
  std::unique_ptr<io::AtomicOutput> file_;
  int fd_ = -1;
  std::int64_t data_offset_ = 0;
  std::int64_t without_ = 0;
};

/// The protocol of every collective .npy write (collective): a SharedNpy of `shape` at `path`;
/// where every rank has the file, `write_mine(out)` on each rank, then a sync, agreed; otherwise
/// `gather()` on every rank (a collective gather, its result used on root) and
/// `write_whole(out, whole)` on root, agreed. Returns root's uncommitted output and the count of
/// ranks without the file.
template <class WriteMine, class Gather, class WriteWhole>
NpyWrite write_by_ranks(const Comm& comm, const std::filesystem::path& path, const Shape& shape,
                        int root, WriteMine&& write_mine, Gather&& gather,
                        WriteWhole&& write_whole) {
  SharedNpy out(comm, path, shape, root);
  NpyWrite result;
  result.ranks_without_file = out.ranks_without_file();
  if (result.ranks_without_file > 0) {
    const auto whole = gather();
    agree(comm, [&] {
      if (comm.rank() == root) write_whole(out, whole);
    });
  } else {
    agree(comm, [&] {
      write_mine(out);
      out.sync();
    });
  }
  result.file = out.release();
  return result;
}

}  // namespace halfscope::mpi
