// Outputs committed together (ao_output_set.hpp).
#include "ao_output_set.hpp"

#include <string>
#include <system_error>

#include <unistd.h>

#include "halfscope/core/error.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

AoOutputSet::~AoOutputSet() {
  if (committed_) return;
  std::error_code ec;
  for (const auto& [partial, target] : files_) fs::remove(partial, ec);
  remove_created();
}

void AoOutputSet::create_folder(const fs::path& dir) {
  // The folders to create, outermost first: only those are removed again on failure.
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.insert(missing.begin(), p);
    if (p == p.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  created_.insert(created_.end(), missing.begin(), missing.end());
  if (ec || !fs::is_directory(dir))
    throw IoError(dir.string() + ": cannot create the output folder" +
                  (ec ? ": " + ec.message() : std::string(": a file of that name exists")));
}

fs::path AoOutputSet::partial(const fs::path& target) {
  const fs::path p = target.parent_path() / (".halfscope-partial-" + std::to_string(::getpid()) +
                                             "-" + target.filename().string());
  files_.emplace_back(p, target);
  return p;
}

void AoOutputSet::commit() {
  for (const auto& [partial, target] : files_) {
    std::error_code ec;
    fs::rename(partial, target, ec);
    if (ec)
      throw IoError(target.string() + ": cannot move the finished file into place (" +
                    ec.message() + ")");
  }
  committed_ = true;
}

void AoOutputSet::remove_created() noexcept {
  // Innermost first; fs::remove leaves a folder that is not empty (someone else's files) alone.
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) fs::remove(*it, ec);
}

}  // namespace halfscope::cli
