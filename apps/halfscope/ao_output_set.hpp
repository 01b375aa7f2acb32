// The outputs of one `ao` command appear together or not at all (`ao covariance` writes up to three
// matrices, `ao evaluate` a PSF and a JSON summary): each file is written under a hidden partial
// name next to its target as soon as it is ready (so one matrix at a time is in memory), and
// commit() renames them all once the last is written. A run that fails before commit (an
// exception: NumericalError, out of memory, a CUDA or write error) removes its partial files and
// the folders it created, so a folder never holds this run's Cmm next to an older run's Ctm / Ctt,
// nor this run's PSF next to an older summary, and a failed run leaves no empty folder behind. A
// run killed by a signal can leave hidden partial files, never a mixed set under the real names.
#pragma once

#include <filesystem>
#include <utility>
#include <vector>

namespace halfscope::cli {

/// A set of output files committed together (see the file comment).
class AoOutputSet {
 public:
  AoOutputSet() = default;
  AoOutputSet(const AoOutputSet&) = delete;
  AoOutputSet& operator=(const AoOutputSet&) = delete;
  /// Without commit: removes the partial files, then the folders create_folder made (innermost
  /// first, each only if empty).
  ~AoOutputSet();

  /// Creates `dir` and its missing parents, remembering which it made. IoError naming `dir` when
  /// it cannot be created or a file of that name exists.
  void create_folder(const std::filesystem::path& dir);

  /// The hidden partial file to write `target` to: same folder, same extension (the writers pick
  /// the format by it), this process's id in the name so that two runs do not collide.
  [[nodiscard]] std::filesystem::path partial(const std::filesystem::path& target);

  /// Renames every partial file to its target (replacing an existing file). IoError naming the
  /// target when a rename fails.
  void commit();

 private:
  void remove_created() noexcept;

  std::vector<std::filesystem::path> created_;                                  // outermost first
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> files_;  // partial, target
  bool committed_ = false;
};

}  // namespace halfscope::cli
