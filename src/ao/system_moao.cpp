// Readers for the public MOAO text formats (ecrc/moao; docs/ao.md "MOAO files" has the layouts):
//   * the full `sys-params.txt` layout of its check files (36 entries, tFrame ... targetY_as),
//   * the older short layout of its benchmark files (22 entries, diam ... lgs_depth), optionally
//     followed by the atmosphere's five entries,
//   * the atmosphere file `prof*-atmos-night*.txt` / `atm-params.txt` (Nlayer, r0, cn2, h, l0).
// Every entry is one comment line (free text, ignored) and one line of values. Errors are IoError
// "<file>: entry <name> (line L): expected ..., found ...", with MOAO's names for the entries.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ao/system_detail.hpp"
#include "ao/system_moao_file.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::ao {

namespace detail {

MoaoFile::MoaoFile(const std::filesystem::path& path) : path_(path.string()) {
  const std::vector<std::byte> bytes = io::read_file_bytes(path);
  std::string line;
  for (const std::byte b : bytes) {
    const char ch = static_cast<char>(b);
    if (ch == '\n') {
      lines_.push_back(line);
      line.clear();
    } else if (ch != '\r') {
      line.push_back(ch);
    }
  }
  lines_.push_back(line);
  // Trailing blank lines are not entries (files end with one or more newlines).
  while (!lines_.empty() && lines_.back().find_first_not_of(" \t") == std::string::npos)
    lines_.pop_back();
}

std::int64_t MoaoFile::tokens_on_value_line(std::int64_t entry) const {
  const auto index = static_cast<std::size_t>(2 * entry + 1);
  if (index >= lines_.size()) return -1;
  std::istringstream in(lines_[index]);
  std::int64_t n = 0;
  for (std::string t; in >> t;) ++n;
  return n;
}

void MoaoFile::fail(std::string_view name, std::string_view expected,
                    std::string_view found) const {
  const auto it = lines_of_.find(std::string(name));
  const std::string where =
      it == lines_of_.end() ? "" : " (line " + std::to_string(it->second) + ")";
  throw IoError(path_ + ": entry " + std::string(name) + where + ": expected " +
                std::string(expected) + ", found " + std::string(found));
}

std::vector<std::string> MoaoFile::next(std::string_view name) {
  const std::int64_t value_line = static_cast<std::int64_t>(next_) + 2;  // 1-based
  lines_of_[std::string(name)] = value_line;
  if (next_ + 1 >= lines_.size())
    fail(name, "a comment line and a line of values",
         "the end of the file after line " + std::to_string(lines_.size()) + " (file ends early)");
  std::istringstream in(lines_[next_ + 1]);
  next_ += 2;
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  if (tokens.empty()) fail(name, "a line of values", "an empty line");
  return tokens;
}

double MoaoFile::parse(std::string_view name, const std::string& token) const {
  std::string_view t(token);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);  // strtod accepts it, from_chars not
  double v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size())
    fail(name, "a number", "\"" + token + "\"");
  if (!std::isfinite(v)) fail(name, "a finite number", "\"" + token + "\"");
  return v;
}

double MoaoFile::number(std::string_view name) {
  const std::vector<std::string> t = next(name);
  if (t.size() != 1) fail(name, "one value", std::to_string(t.size()) + " values");
  return parse(name, t[0]);
}

std::int64_t MoaoFile::integer(std::string_view name) {
  const double v = number(name);
  if (v != std::floor(v) || std::abs(v) > 1e9) fail(name, "an integer", format_number(v));
  return static_cast<std::int64_t>(v);
}

std::vector<double> MoaoFile::numbers(std::string_view name, std::int64_t count,
                                      std::string_view count_name, bool last_optional) {
  const std::vector<std::string> t = next(name);
  const auto n = static_cast<std::int64_t>(t.size());
  if (n != count && !(last_optional && n == count - 1))
    fail(name,
         std::to_string(count) + " values (" + std::string(count_name) + ")" +
             (last_optional ? " or " + std::to_string(count - 1) + " (the truth sensor's omitted)"
                            : ""),
         std::to_string(n) + (n < count ? " (too few values)" : " (too many values)"));
  std::vector<double> v;
  for (const std::string& token : t) v.push_back(parse(name, token));
  return v;
}

Atmosphere read_moao_atmosphere_entries(MoaoFile& f) {
  const std::int64_t layers = f.integer("Nlayer");
  if (layers < 1) f.fail("Nlayer", "at least 1 layer", std::to_string(layers));
  const double r0 = f.number("r0");
  const std::string count = "Nlayer = " + std::to_string(layers);
  const std::vector<double> cn2 = f.numbers("cn2", layers, count);
  const std::vector<double> h = f.numbers("h", layers, count);
  const std::vector<double> l0 = f.numbers("l0", layers, count);
  double sum = 0;
  for (std::size_t l = 0; l < cn2.size(); ++l) {
    const std::string at = " (value " + std::to_string(l + 1) + ")";
    if (cn2[l] < 0) f.fail("cn2", "strengths >= 0", format_number(cn2[l]) + at);
    if (h[l] < 0) f.fail("h", "altitudes >= 0", format_number(h[l]) + at);
    if (!(l0[l] > 0)) f.fail("l0", "outer scales > 0", format_number(l0[l]) + at);
    sum += cn2[l];
  }
  if (!(sum > 0)) f.fail("cn2", "strengths with a positive sum", "a sum of 0");
  Atmosphere a;
  // The covariance depends on the strengths only; the r0 line is their summary. A file whose r0
  // disagrees (an r0 at another wavelength, a hand-edited cn2) is ambiguous, so it is refused.
  a.r0_m = std::pow(sum, -3.0 / 5.0);
  if (!(std::abs(r0 - a.r0_m) <= 1e-3 * a.r0_m))
    f.fail("r0", "sum(cn2)^(-3/5) = " + format_number(a.r0_m) + " m (within 1e-3 relative)",
           format_number(r0));
  for (std::size_t l = 0; l < cn2.size(); ++l) a.layers.push_back({h[l], cn2[l] / sum, l0[l]});
  return a;
}

}  // namespace detail

namespace {

using detail::format_number;
using detail::MoaoFile;

void expect_end(const MoaoFile& f, std::string_view last_entry) {
  if (!f.at_end())
    f.fail(last_entry, "the end of the file after this entry",
           "more lines from line " + std::to_string(f.next_line()));
}

Atmosphere read_atmosphere_file(const std::filesystem::path& path) {
  MoaoFile f(path);
  Atmosphere a = detail::read_moao_atmosphere_entries(f);
  expect_end(f, "l0");
  return a;
}

}  // namespace

Atmosphere read_moao_atmosphere(const std::filesystem::path& path) {
  return read_atmosphere_file(path);
}

bool is_moao_short_layout(const std::filesystem::path& path) {
  if (io::extension_of(path) == "json") return false;
  const MoaoFile f(path);
  return detail::is_short_layout(f);
}

AoSystem read_ao_system(const std::filesystem::path& path,
                        const std::filesystem::path& atmosphere_path) {
  if (io::extension_of(path) == "json") {
    if (!atmosphere_path.empty())
      throw InvalidInput(atmosphere_path.string() +
                         ": an atmosphere file goes with a MOAO sys-params file, not with " +
                         path.string() + " (a JSON system holds its atmosphere)");
    return read_ao_system_json(path);
  }
  MoaoFile f(path);
  AoSystem s = detail::read_moao_system_entries(f);
  if (!f.at_end()) {
    if (!atmosphere_path.empty())
      throw IoError(path.string() + ": expected the end of the file after the system entries (" +
                    "an atmosphere file was given as well), found more lines from line " +
                    std::to_string(f.next_line()));
    s.atmosphere = detail::read_moao_atmosphere_entries(f);
    expect_end(f, "l0");
  } else if (!atmosphere_path.empty()) {
    s.atmosphere = read_atmosphere_file(atmosphere_path);
  } else {
    throw IoError(path.string() +
                  ": expected an atmosphere (Nlayer, r0, cn2, h, l0 entries after the system, or "
                  "a separate atmosphere file such as prof0-atmos-night0.txt), found none");
  }
  try {
    validate(s, path.string() + (atmosphere_path.empty() ? "" : " + " + atmosphere_path.string()));
  } catch (const InvalidInput& e) {
    throw IoError(e.what());
  }
  return s;
}

}  // namespace halfscope::ao
