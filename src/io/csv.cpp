// CSV tables of numbers. Parsing is a single pass over the text with one small state machine per
// line; values go straight into a vector of doubles, so memory is the size of the result.
#include "halfscope/io/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::io {

namespace {

struct Field {
  std::string_view text;  // without the quotes; "" escapes are still doubled
  bool quoted = false;
};

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

/// "'abc'" for messages: printable, at most 40 characters.
std::string quote_for_message(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  return out + (s.size() > 40 ? "...'" : "'");
}

/// Value of an out-of-range decimal number ("1e999" -> inf, "1e-999" -> 0): from_chars reports
/// those as errors. Decides from the decimal exponent of the leading significant digit, which is
/// far from zero for any out-of-range input.
double out_of_range_value(std::string_view s) {
  const bool negative = !s.empty() && s[0] == '-';
  std::size_t i = negative ? 1 : 0;
  std::int64_t magnitude = 0;
  bool point = false, significant = false;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      point = true;
    } else if (!significant && s[i] == '0') {
      if (point) --magnitude;
    } else {
      significant = true;
      if (!point) ++magnitude;
    }
  }
  std::int64_t exponent = 0;
  if (i < s.size()) {
    const bool neg_exp = i + 1 < s.size() && s[i + 1] == '-';
    for (std::size_t j = i + 1; j < s.size(); ++j)
      if (s[j] >= '0' && s[j] <= '9')
        exponent = std::min<std::int64_t>(exponent * 10 + (s[j] - '0'), 1'000'000'000);
    if (neg_exp) exponent = -exponent;
  }
  const double v = magnitude + exponent > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  return negative ? -v : v;
}

enum class Parsed { number, text, too_large };

/// Parses a whole field as a float64. A decimal number below float64's smallest subnormal reads
/// as +-0, its nearest float64, as any other rounding; one beyond the largest finite float64 is
/// `too_large`, not inf: a table value that large is a corrupt or mis-scaled file, and an
/// infinity must be written as one ("inf").
Parsed parse_number(std::string_view s, double& out) {
  if (s.empty()) return Parsed::text;
  if (s[0] == '+') {
    s.remove_prefix(1);
    if (s.empty() || s[0] == '-' || s[0] == '+') return Parsed::text;
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ptr != s.data() + s.size()) return Parsed::text;
  if (ec == std::errc::result_out_of_range) {
    out = out_of_range_value(s);
    return std::isinf(out) ? Parsed::too_large : Parsed::number;
  }
  return ec == std::errc() ? Parsed::number : Parsed::text;
}

/// "t.csv: line 3, field 2: " for messages.
std::string at_field(std::string_view name, std::int64_t line, std::size_t column) {
  return std::string(name) + ": line " + std::to_string(line) + ", field " +
         std::to_string(column + 1) + ": ";
}

/// Splits one line into fields. An unquoted '#' ends the line (a comment).
class LineSplitter {
 public:
  LineSplitter(std::string_view name, std::int64_t line) : name_(name), line_(line) {}

  void split(std::string_view s, std::vector<Field>& fields) {
    fields.clear();
    std::size_t i = 0;
    while (true) {
      while (i < s.size() && is_blank(s[i])) ++i;
      Field f;
      if (i < s.size() && s[i] == '"') {
        const std::size_t start = ++i;
        while (true) {
          if (i >= s.size()) fail("unterminated quoted field");
          if (s[i] == '"') {
            if (i + 1 < s.size() && s[i + 1] == '"') {
              i += 2;
              continue;
            }
            break;
          }
          ++i;
        }
        f = {s.substr(start, i - start), true};
        ++i;
        while (i < s.size() && is_blank(s[i])) ++i;
        if (i < s.size() && s[i] != ',' && s[i] != '#')
          fail("unexpected " + quote_for_message(s.substr(i, 1)) + " after a quoted field");
      } else {
        const std::size_t start = i;
        while (i < s.size() && s[i] != ',' && s[i] != '#') ++i;
        std::size_t end = i;
        while (end > start && is_blank(s[end - 1])) --end;
        f = {s.substr(start, end - start), false};
      }
      fields.push_back(f);
      if (i >= s.size() || s[i] == '#') return;
      ++i;  // the comma
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw IoError(std::string(name_) + ": line " + std::to_string(line_) + ": " + what);
  }
  std::string_view name_;
  std::int64_t line_;
};

std::string unescape(const Field& f) {
  std::string out(f.text);
  if (f.quoted) {
    for (std::size_t p = out.find("\"\""); p != std::string::npos; p = out.find("\"\"", p + 1))
      out.erase(p, 1);
  }
  return out;
}

}  // namespace

CsvTable parse_csv_table(std::span<const std::byte> bytes, std::string_view name) {
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  CsvTable table;
  std::vector<double> values;
  std::vector<Field> fields;
  std::size_t columns = 0;
  std::int64_t first_line = 0;  // the line that fixed the column count
  std::int64_t rows = 0;
  std::int64_t line = 0;
  std::string header_refusal;  // why the header line is not data, for a file without data rows
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view s = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line;
    std::size_t lead = 0;
    while (lead < s.size() && is_blank(s[lead])) ++lead;
    if (lead == s.size() || s[lead] == '#') continue;
    LineSplitter(name, line).split(s, fields);
    if (first_line != 0 && fields.size() != columns)
      throw IoError(std::string(name) + ": line " + std::to_string(line) + " has " +
                    std::to_string(fields.size()) + " fields, expected " + std::to_string(columns) +
                    " like line " + std::to_string(first_line));
    if (first_line == 0) {
      first_line = line;
      columns = fields.size();
      double v = 0;
      const auto text_field = std::find_if(fields.begin(), fields.end(), [&](const Field& f) {
        return f.quoted || parse_number(f.text, v) == Parsed::text;
      });
      if (text_field != fields.end()) {
        for (const Field& f : fields) table.header.push_back(unescape(f));
        header_refusal =
            at_field(name, line, static_cast<std::size_t>(text_field - fields.begin())) +
            "expected a number, found " + (text_field->quoted ? "quoted text " : "") +
            quote_for_message(text_field->text);
        continue;
      }
    }
    for (std::size_t c = 0; c < fields.size(); ++c) {
      double v = 0;
      const Parsed parsed = fields[c].quoted ? Parsed::text : parse_number(fields[c].text, v);
      if (parsed == Parsed::too_large)
        throw IoError(
            at_field(name, line, c) + "expected a number within float64's range (|x| <= " +
            "1.7976931348623157e308, or 'inf'), found " + quote_for_message(fields[c].text));
      if (parsed == Parsed::text)
        throw IoError(at_field(name, line, c) + "expected a number, found " +
                      (fields[c].quoted ? "quoted text " : "") + quote_for_message(fields[c].text));
      values.push_back(v);
    }
    ++rows;
  }
  // A table without rows is refused rather than read as an empty array: every reader of a CSV
  // wants numbers, and an empty result only fails later, far from the file. A first line with
  // text is a header only when data follow it, so a lone "1,x" is a bad data row, not a header.
  if (rows == 0) {
    if (!header_refusal.empty())
      throw IoError(header_refusal + "; no data rows (a line with text is a header only when " +
                    "data rows follow it)");
    throw IoError(std::string(name) +
                  ": no data rows: expected lines of comma-separated numbers, " + "found " +
                  (line == 0 ? "an empty file" : "only blank lines and comments"));
  }
  table.data = Array(DType::f64, {rows, static_cast<std::int64_t>(columns)});
  std::memcpy(table.data.data(), values.data(), values.size() * sizeof(double));
  return table;
}

CsvTable read_csv_table(const std::filesystem::path& path) {
  return parse_csv_table(read_file_bytes(path), path.string());
}

Array parse_csv(std::span<const std::byte> bytes, std::string_view name) {
  return parse_csv_table(bytes, name).data;
}

Array read_csv(const std::filesystem::path& path) {
  return read_csv_table(path).data;
}

namespace {

/// A header name as it must be written to read back as itself, and as header text.
std::string header_field(const std::string& h) {
  if (h.find_first_of("\n\r") != std::string::npos)
    throw InvalidInput("write .csv: header names cannot contain line breaks");
  double v = 0;
  const bool needs_quotes = h.empty() || h.find_first_of(",\"#") != std::string::npos ||
                            is_blank(h.front()) || is_blank(h.back()) ||
                            parse_number(h, v) != Parsed::text ||
                            h.starts_with("\xEF\xBB\xBF");  // else read as a byte-order mark
  if (!needs_quotes) return h;
  std::string out = "\"";
  for (char c : h) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

template <class T>
void append_value(std::string& out, T x) {
  char buf[64];
  std::to_chars_result r{};
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(x));
  else
    r = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, r.ptr);
}

/// Produces the CSV text in pieces of about 1 MiB, so a large array is never doubled in memory.
void emit_csv(const Array& a, const std::vector<std::string>& header,
              const std::function<void(const std::string&)>& sink) {
  if (a.empty()) throw InvalidInput("write .csv: the array holds no data (default-constructed)");
  if (a.ndim() > 2)
    throw InvalidInput("write .csv: expected a 0-D, 1-D or 2-D array, found " + a.describe());
  const Array h = (a.memory() == Memory::device ? a.to(Memory::host) : a).contiguous();
  const std::int64_t rows = h.ndim() == 0 ? 1 : h.dim(0);
  const std::int64_t cols = h.ndim() == 2 ? h.dim(1) : 1;
  if (!header.empty() && static_cast<std::int64_t>(header.size()) != cols)
    throw InvalidInput("write .csv: " + std::to_string(header.size()) + " header names for " +
                       std::to_string(cols) + " columns");
  std::string out;
  for (std::size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + header_field(header[i]);
  if (!header.empty()) out += '\n';
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(h.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        if (c) out += ',';
        append_value(out, p[r * cols + c]);
      }
      out += '\n';
      if (out.size() >= (1u << 20)) {
        sink(out);
        out.clear();
      }
    }
  });
  sink(out);
}

}  // namespace

std::string format_csv(const Array& a, const std::vector<std::string>& header) {
  std::string text;
  emit_csv(a, header, [&](const std::string& s) { text += s; });
  return text;
}

void write_csv(const std::filesystem::path& path, const Array& a,
               const std::vector<std::string>& header) {
  AtomicOutput out(path);
  emit_csv(a, header, [&](const std::string& s) { out.write(s); });
  out.commit();
}

}  // namespace halfscope::io
