// Internal: the entry-by-entry reader of MOAO parameter files (one comment line, then one line of
// values, per entry), shared by the system layouts (system_moao_layout.cpp) and the atmosphere
// reader (system_moao.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace halfscope::ao {
struct AoSystem;
struct Atmosphere;
}  // namespace halfscope::ao

namespace halfscope::ao::detail {

/// A MOAO text file read as entries. Every failure is an IoError "<file>: entry <name> (line L):
/// expected ..., found ...", L the entry's value line (1-based).
class MoaoFile {
 public:
  explicit MoaoFile(const std::filesystem::path& path);

  /// The next entry's values as text (throws when the file ends early or the line is empty).
  std::vector<std::string> next(std::string_view name);
  /// The next entry as exactly one number / one integer (an integer-valued number such as "2.").
  double number(std::string_view name);
  std::int64_t integer(std::string_view name);
  /// The next entry as `count` numbers (`count_name` says where the count comes from, for the
  /// message); with `last_optional`, count - 1 values are accepted too.
  std::vector<double> numbers(std::string_view name, std::int64_t count,
                              std::string_view count_name, bool last_optional = false);

  /// Number of values on the value line of entry `entry` (0-based) without reading it; -1 when the
  /// file has no such line. Used to tell the layouts apart.
  [[nodiscard]] std::int64_t tokens_on_value_line(std::int64_t entry) const;
  /// Number of entries in the whole file (comment + value line pairs; a trailing lone comment
  /// line counts as one). Used to tell the layouts apart.
  [[nodiscard]] std::int64_t entry_count() const noexcept {
    return static_cast<std::int64_t>((lines_.size() + 1) / 2);
  }
  [[nodiscard]] bool at_end() const noexcept { return next_ >= lines_.size(); }
  [[nodiscard]] std::int64_t next_line() const noexcept {
    return static_cast<std::int64_t>(next_) + 1;
  }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// Throws the IoError of entry `name` (an entry already read: its line is named).
  [[noreturn]] void fail(std::string_view name, std::string_view expected,
                         std::string_view found) const;

 private:
  double parse(std::string_view name, const std::string& token) const;

  std::string path_;
  std::vector<std::string> lines_;
  std::size_t next_ = 0;
  std::map<std::string, std::int64_t> lines_of_;  // entry name -> its value line
};

/// The atmosphere's five entries (Nlayer, r0, cn2, h, l0) from the current position.
[[nodiscard]] Atmosphere read_moao_atmosphere_entries(MoaoFile& file);

/// The system entries of a sys-params file in either layout (told apart by the number of entries:
/// 36 or 41 with an atmosphere appended for the full layout, 22 or 27 for the short one; a file of
/// another length by its fifth entry: one value, nLgs, in the full layout, the values of gsAlt in
/// the short one, so that its error names the entry where it goes wrong), atmosphere left empty.
[[nodiscard]] AoSystem read_moao_system_entries(MoaoFile& file);

/// The layout rule read_moao_system_entries applies: true for the short (benchmark) layout.
[[nodiscard]] bool is_short_layout(const MoaoFile& file);

}  // namespace halfscope::ao::detail
