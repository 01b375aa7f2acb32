// Antenna tables (sim/radio.hpp): the built-in MeerKAT table and user CSV files.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/sim/radio.hpp"

namespace halfscope::sim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    line.remove_prefix(comma + 1);
  }
}

// Positions are metres from the reference point; from_chars is locale-independent, and a leading
// '+' (which it refuses) is accepted as people write it.
bool parse_metres(std::string_view text, double& value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

[[noreturn]] void bad_row(std::string_view source, std::int64_t line, const std::string& what) {
  throw InvalidInput(std::string(source) + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

AntennaTable parse_antenna_csv(std::string_view text, std::string_view source) {
  static const char* const kFields[] = {"name", "east (m)", "north (m)", "up (m)"};
  AntennaTable table;
  table.source = std::string(source);
  std::set<std::string, std::less<>> names;
  bool header_seen = false;
  std::int64_t line_no = 0;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte-order mark
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    const std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const auto fields = split_fields(line);
    if (fields.size() != 4)
      bad_row(source, line_no,
              "expected 4 fields (name,east,north,up in metres), found " +
                  std::to_string(fields.size()) + ": \"" + std::string(line) + "\"");
    if (!header_seen) {
      // The header's names are free (east_m, E, x, ...): only its place is fixed. A first line
      // whose position fields are numbers is data without a header, which we refuse rather than
      // silently dropping an antenna.
      double probe = 0;
      if (parse_metres(fields[1], probe) && parse_metres(fields[2], probe))
        bad_row(source, line_no,
                "expected a header line (e.g. name,east_m,north_m,up_m) before the antennas, "
                "found \"" +
                    std::string(line) + "\"");
      header_seen = true;
      continue;
    }
    Antenna a;
    a.name = std::string(fields[0]);
    if (a.name.empty()) bad_row(source, line_no, "field 1 (name): expected a name, found nothing");
    if (!names.insert(a.name).second)
      bad_row(source, line_no, "field 1 (name): duplicate antenna name \"" + a.name + "\"");
    double* const targets[] = {&a.east, &a.north, &a.up};
    for (int f = 1; f < 4; ++f)
      if (!parse_metres(fields[f], *targets[f - 1]))
        bad_row(source, line_no,
                "field " + std::to_string(f + 1) + " (" + kFields[f] +
                    "): expected a finite number, found \"" + std::string(fields[f]) + "\"");
    table.antennas.push_back(std::move(a));
  }
  if (table.antennas.size() < 2)
    throw InvalidInput(std::string(source) +
                       ": expected at least 2 antennas (one baseline), found " +
                       std::to_string(table.antennas.size()));
  return table;
}

AntennaTable read_antenna_csv(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path.string() + ": cannot open the antenna table");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(path.string() + ": error reading the antenna table");
  return parse_antenna_csv(text.str(), path.string());
}

AntennaTable meerkat_antennas() {
  // Parsed on every call (64 lines, microseconds) rather than cached: no shared state.
  AntennaTable t = parse_antenna_csv(detail::meerkat_csv_text(), "meerkat (built in)");
  if (t.antennas.size() != 64)
    throw Error("the built-in MeerKAT table has " + std::to_string(t.antennas.size()) +
                " antennas, expected 64 (a broken build)");
  return t;
}

AntennaTable load_antennas(std::string_view spec) {
  std::string lower(spec);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "meerkat") return meerkat_antennas();
  return read_antenna_csv(std::filesystem::path(std::string(spec)));
}

std::int64_t baseline_count(const AntennaTable& table) {
  const auto n = static_cast<std::int64_t>(table.antennas.size());
  return n * (n - 1) / 2;
}

double max_baseline_m(const AntennaTable& table) {
  double m = 0;
  const auto& a = table.antennas;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = i + 1; j < a.size(); ++j)
      m = std::max(m,
                   std::hypot(a[j].east - a[i].east, a[j].north - a[i].north, a[j].up - a[i].up));
  return m;
}

}  // namespace halfscope::sim
