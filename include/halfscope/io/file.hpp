// File plumbing shared by every format: whole-file reads with clear errors, and atomic writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace halfscope::io {

/// Reads a whole file. Throws IoError naming the file when it is missing, a folder or unreadable.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path);

/// A file opened for binary reading, with its size: what read_file_bytes opens, for readers that
/// take the parts they need (the .npy reader reads its data straight into the array).
struct InputFile {
  std::ifstream stream;
  std::int64_t size = 0;
  /// Up to `count` bytes at `offset` into `out`; returns how many were read (fewer only at the
  /// end of the file). Not for several threads at once.
  std::int64_t read_at(std::byte* out, std::int64_t count, std::int64_t offset);
  /// Exactly `count` bytes at `offset`: IoError starting with `name` ("truncated while reading")
  /// when fewer are there (the file shrank since it was opened or measured).
  void read_exact(std::byte* out, std::int64_t count, std::int64_t offset, std::string_view name);
};

/// Opens `path` for reading; IoError naming the file as read_file_bytes words it.
InputFile open_input_file(const std::filesystem::path& path);

/// Checks that `path` can be created: its folder exists and is writable, and `path` is not a
/// folder. Throws IoError naming the path otherwise. Call before long work so it fails early.
void check_output_path(const std::filesystem::path& path);

/// Writes one output file atomically. The data goes to a hidden temporary file in the target's
/// folder; `commit()` flushes it and renames it over the target. Destroyed without commit (an
/// exception on the way), the temporary is removed and an existing target is left untouched.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::filesystem::path target);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  /// The temporary file's path, for libraries that write by file name (cfitsio, libmseed).
  [[nodiscard]] const std::filesystem::path& temp_path() const noexcept { return temp_; }
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }
  /// Appends bytes to the temporary file (opened on first use).
  void write(std::span<const std::byte> bytes);
  void write(const std::string& text);
  /// Flushes what was written and extends the temporary file to `bytes` (zeros), so that other
  /// processes sharing its file system can write their parts into it at known offsets (pwrite
  /// on temp_path()) before commit().
  void extend_to(std::uint64_t bytes);
  /// Flushes and closes the temporary file, synced to disk: a write error (a full disk) is
  /// thrown here, the target still untouched. commit() calls it when it was not called.
  void finish();
  /// Makes the file visible under its target name.
  void commit();

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::FILE* file_ = nullptr;
  bool finished_ = false, committed_ = false;
};

/// Commits several outputs as one: every one finished (its write errors thrown) before any is
/// renamed, so a failure leaves every target as it was (null entries skipped).
void commit_together(const std::vector<AtomicOutput*>& outputs);

/// Writes `bytes` to `path` atomically.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

/// Lower-case extension without the dot, with ".gz"-style double extensions not special-cased.
std::string extension_of(const std::filesystem::path& path);

}  // namespace halfscope::io
