// .npy reading and writing. The header dict is parsed here by hand, strictly: NumPy evaluates it
// as a Python literal, but a file reader must not run a Python parser on hostile input, and the
// only dicts NumPy ever writes use a tiny subset of Python (quoted strings, True/False, a tuple of
// non-negative ints), which is all this accepts.
#include "halfscope/io/npy.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "io/npy_detail.hpp"

namespace halfscope::io {

namespace {

constexpr std::size_t kMagicLen = 6;  // "\x93NUMPY"
constexpr unsigned char kMagic[kMagicLen] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::int64_t kArrayAlign = 64;           // NumPy's ARRAY_ALIGN
constexpr std::int64_t kGrowthAxisMaxDigits = 21;  // NumPy's GROWTH_AXIS_MAX_DIGITS
constexpr std::size_t kMaxDims = 64;               // NumPy 2's NPY_MAXDIMS

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw IoError(std::string(name) + ": " + what);
}

std::uint32_t load_le(const std::byte* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint32_t>(p[i]);
  return v;
}

/// The three values a header dict holds, as parsed.
struct HeaderDict {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
};

/// Recursive-descent parser for the header dict. `allow_long_suffix` accepts the "3L" integers
/// that Python 2 wrote into version 1.0 and 2.0 headers (NumPy filters them out too).
class DictParser {
 public:
  DictParser(std::string_view text, std::string_view name, bool allow_long_suffix)
      : s_(text), name_(name), allow_long_(allow_long_suffix) {}

  HeaderDict parse() {
    HeaderDict d;
    skip_ws();
    expect('{');
    skip_ws();
    while (peek() != '}') {
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (d.descr) bad("duplicate key 'descr'");
        if (peek() == '[')
          throw Unsupported(std::string(name_) +
                            ": structured (record) dtypes are not supported; "
                            "save each field as its own array");
        d.descr = parse_string();
      } else if (key == "fortran_order") {
        if (d.fortran_order) bad("duplicate key 'fortran_order'");
        d.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (d.shape) bad("duplicate key 'shape'");
        d.shape = parse_shape();
      } else {
        bad("unexpected key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != '}') {
        bad_here("',' or '}'");
      }
    }
    ++pos_;
    skip_ws();
    if (pos_ != s_.size()) bad_here("only padding after the closing '}'");
    if (!d.descr || !d.fortran_order || !d.shape)
      bad("header dict lacks " + std::string(!d.descr           ? "'descr'"
                                             : !d.fortran_order ? "'fortran_order'"
                                                                : "'shape'"));
    return d;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail(name_, "bad .npy header: " + what); }
  [[noreturn]] void bad_here(const std::string& expected) const {
    std::string found = pos_ < s_.size() ? "'" + std::string(1, s_[pos_]) + "'" : "the end";
    if (pos_ < s_.size() && (static_cast<unsigned char>(s_[pos_]) < 0x20 ||
                             static_cast<unsigned char>(s_[pos_]) > 0x7e))
      found = "byte " + std::to_string(static_cast<unsigned char>(s_[pos_]));
    bad("expected " + expected + " at offset " + std::to_string(pos_) + ", found " + found);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void expect(char c) {
    if (peek() != c) bad_here(std::string("'") + c + "'");
    ++pos_;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad_here("a quoted string");
    const std::size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '\\' || c < 0x20 || c > 0x7e) bad_here("a plain ASCII string");
      ++pos_;
    }
    if (pos_ >= s_.size()) bad("unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }
  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad_here("True or False");
  }
  std::int64_t parse_int() {
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    const std::size_t start = pos_;
    std::uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (v > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / 10)
        bad("shape extent " + std::string(s_.substr(start, 20)) + "... does not fit in 64 bits");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) bad_here("an integer");
    if (pos_ - start > 1 && s_[start] == '0') bad("integer with a leading zero in shape");
    if (allow_long_ && (peek() == 'L' || peek() == 'l')) ++pos_;
    if (negative && v != 0) bad("negative dimension -" + std::to_string(v) + " in shape");
    return static_cast<std::int64_t>(v);
  }
  Shape parse_shape() {
    expect('(');
    skip_ws();
    Shape shape;
    bool trailing_comma = false;
    while (peek() != ')') {
      if (shape.size() == kMaxDims) bad("more than " + std::to_string(kMaxDims) + " dimensions");
      shape.push_back(parse_int());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (peek() != ')') {
        bad_here("',' or ')' in shape");
      }
    }
    ++pos_;
    // Python: "(3)" is the int 3, not a tuple; NumPy rejects it, and so do we.
    if (shape.size() == 1 && !trailing_comma) bad("shape (n) is not a tuple; write (n,)");
    return shape;
  }

  std::string_view s_;
  std::string_view name_;
  bool allow_long_;
  std::size_t pos_ = 0;
};

[[noreturn]] void unsupported_dtype(std::string_view name, const std::string& descr,
                                    std::string_view what) {
  throw Unsupported(std::string(name) + ": unsupported dtype '" + descr + "' (" +
                    std::string(what) + "): halfscope reads float16/32/64, int8..64 and uint8..64");
}

/// Maps a descr string such as '<f4' to a DType and byte order.
void parse_descr(const std::string& descr, std::string_view name, NpyHeader& h) {
  std::string_view d = descr;
  char order = '=';
  if (!d.empty() && std::string_view("<>|=").find(d[0]) != std::string_view::npos) {
    order = d[0];
    d.remove_prefix(1);
  }
  static constexpr std::pair<std::string_view, DType> kTypes[] = {
      {"f2", DType::f16}, {"f4", DType::f32}, {"f8", DType::f64}, {"i1", DType::i8},
      {"i2", DType::i16}, {"i4", DType::i32}, {"i8", DType::i64}, {"u1", DType::u8},
      {"u2", DType::u16}, {"u4", DType::u32}, {"u8", DType::u64}};
  for (const auto& [code, t] : kTypes) {
    if (d != code) continue;
    h.dtype = t;
    h.big_endian = dtype_size(t) > 1 &&
                   (order == '>' || (order == '=' && std::endian::native == std::endian::big));
    return;
  }
  // Valid NumPy dtypes that halfscope has no type for, by kind letter.
  static constexpr std::pair<char, std::string_view> kOthers[] = {{'c', "complex"},
                                                                  {'b', "bool"},
                                                                  {'?', "bool"},
                                                                  {'O', "Python objects"},
                                                                  {'M', "date/time"},
                                                                  {'m', "date/time"},
                                                                  {'U', "string or void"},
                                                                  {'S', "string or void"},
                                                                  {'a', "string or void"},
                                                                  {'V', "string or void"},
                                                                  {'f', "float of this size"},
                                                                  {'i', "integer of this size"},
                                                                  {'u', "integer of this size"}};
  const bool sized = d.size() >= 2 && d.substr(1).find_first_not_of("0123456789") == d.npos;
  for (const auto& [kind, what] : kOthers)
    if (!d.empty() && d[0] == kind && (sized || std::string_view("fiu").find(kind) == d.npos))
      unsupported_dtype(name, descr, what);
  fail(name, "bad .npy header: 'descr' is '" + descr + "', not a NumPy dtype descriptor");
}

std::string descr_of(DType t) {
  const char order = dtype_size(t) == 1                           ? '|'
                     : std::endian::native == std::endian::little ? '<'
                                                                  : '>';
  const char kind = dtype_is_float(t) ? 'f' : dtype_is_signed_int(t) ? 'i' : 'u';
  return std::string{order, kind} + std::to_string(dtype_size(t));
}

}  // namespace

NpyHeader parse_npy_header(std::span<const std::byte> bytes, std::string_view name) {
  if (bytes.size() < kMagicLen || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    fail(name, "not a .npy file (expected the magic \\x93NUMPY at the start)");
  if (bytes.size() < 10) fail(name, "truncated: the file ends inside the .npy preamble");
  NpyHeader h;
  const auto major = static_cast<int>(bytes[6]);
  const auto minor = static_cast<int>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
  h.major_version = major;
  const int len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < static_cast<std::size_t>(8 + len_bytes))
    fail(name, "truncated: the file ends inside the .npy preamble");
  const std::uint64_t header_len = load_le(bytes.data() + 8, len_bytes);
  const std::uint64_t header_start = 8 + static_cast<std::uint64_t>(len_bytes);
  if (header_start + header_len > bytes.size())
    fail(name, "truncated: the .npy header claims " + std::to_string(header_len) +
                   " bytes but only " + std::to_string(bytes.size() - header_start) + " follow");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + header_start,
                              static_cast<std::size_t>(header_len));
  const HeaderDict d = DictParser(text, name, major <= 2).parse();
  parse_descr(*d.descr, name, h);
  h.fortran_order = *d.fortran_order;
  h.shape = *d.shape;
  h.data_offset = static_cast<std::int64_t>(header_start + header_len);
  // Like NumPy, refuse shapes whose non-zero extents overflow even when one extent is zero:
  // their strides would overflow too.
  std::int64_t n = dtype_size(h.dtype), strided = n;
  for (const std::int64_t e : h.shape) {
    if (__builtin_mul_overflow(strided, std::max<std::int64_t>(e, 1), &strided))
      fail(name, "bad .npy header: shape " + shape_to_string(h.shape) + " of " +
                     std::string(dtype_name(h.dtype)) + " is too big (more than 2^63 bytes)");
    n *= e;
  }
  h.data_bytes = n;
  return h;
}

namespace detail {

void check_npy_data_size(const NpyHeader& h, std::int64_t available, std::string_view name) {
  if (available < h.data_bytes)
    fail(name, "truncated: header says " + std::to_string(h.data_bytes) + " bytes of data (" +
                   std::string(dtype_name(h.dtype)) + shape_to_string(h.shape) + "), file has " +
                   std::to_string(available));
  if (available > h.data_bytes)
    fail(name, std::to_string(available - h.data_bytes) + " unexpected bytes after the " +
                   std::to_string(h.data_bytes) + " bytes of data the header describes");
}

void to_native_order(const NpyHeader& h, std::byte* data, std::int64_t count) {
  const auto itemsize = dtype_size(h.dtype);
  if (h.big_endian == (std::endian::native == std::endian::big) || itemsize < 2) return;
  for (std::int64_t i = 0; i < count; ++i) {
    std::byte* p = data + i * itemsize;
    for (std::int64_t a = 0, b = itemsize - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
  }
}

NpyHeader read_npy_file_header(InputFile& file, std::string_view name) {
  const std::int64_t size = file.size;
  // The preamble names the header's length (2 bytes in version 1, 4 in 2 and 3); what it claims
  // beyond the file's end is parse_npy_header's "truncated".
  std::array<std::byte, 12> preamble{};
  const std::int64_t got = file.read_at(preamble.data(), std::min<std::int64_t>(12, size), 0);
  std::int64_t header_end = got;
  if (got >= 10) {
    const auto u = [&](int i) { return static_cast<std::int64_t>(preamble[i]); };
    header_end =
        u(6) == 1 ? 10 + (u(8) | u(9) << 8) : 12 + (u(8) | u(9) << 8 | u(10) << 16 | u(11) << 24);
  }
  std::vector<std::byte> head(static_cast<std::size_t>(std::min(header_end, size)));
  head.resize(static_cast<std::size_t>(file.read_at(head.data(), std::ssize(head), 0)));
  const NpyHeader h = parse_npy_header(head, name);
  check_npy_data_size(h, size - h.data_offset, name);
  return h;
}

NpyPartReader::NpyPartReader(const std::filesystem::path& path)
    : name_(path.string()), file_(open_input_file(path)) {
  header_ = read_npy_file_header(file_, name_);
}

std::string NpyPartReader::describe() const {
  return name_ + " (" + std::string(dtype_name(header_.dtype)) + shape_to_string(header_.shape) +
         ")";
}

void NpyPartReader::read(std::byte* out, std::int64_t count, std::int64_t offset) const {
  const std::lock_guard lock(mutex_);  // one stream: one read at a time
  file_.read_exact(out, count, header_.data_offset + offset, name_);
}

Array NpyPartReader::read_rows(std::int64_t begin, std::int64_t end) const {
  const Shape& shape = header_.shape;
  Shape rows_shape = shape;
  rows_shape.front() = end - begin;
  const std::int64_t T = shape.front(), n = end - begin, es = dtype_size(header_.dtype);
  const std::int64_t row = T == 0 ? 0 : shape_size(shape) / T;
  Array out(header_.dtype, rows_shape);
  auto* bytes = static_cast<std::byte*>(out.data());
  // Fortran order differs from C order once two axes have more than one element.
  const auto long_axes = std::count_if(shape.begin(), shape.end(), [](auto e) { return e > 1; });
  if (n > 0 && header_.fortran_order && long_axes >= 2) {
    // Element j of row t (j in Fortran order over the other axes) lies at t + T * j: the n rows'
    // elements j are one run, landing `row` apart at j's C-order place in the result. A single
    // row (T = 1) is the whole array: one read.
    std::vector<std::byte> run(static_cast<std::size_t>((T == 1 ? row : n) * es));
    if (T == 1) read(run.data(), row * es, 0);
    std::vector<std::int64_t> index(shape.size(), 0);  // j's indices, axes 1.. (0 unused)
    for (std::int64_t j = 0; j < row; ++j) {
      std::int64_t c_index = 0;
      for (std::size_t a = 1; a < shape.size(); ++a) c_index = c_index * shape[a] + index[a];
      if (T != 1) read(run.data(), n * es, (j * T + begin) * es);
      const std::byte* from = run.data() + (T == 1 ? j * es : 0);
      for (std::int64_t t = 0; t < n; ++t)
        std::copy_n(from + t * es, es, bytes + (t * row + c_index) * es);
      for (std::size_t a = 1; a < shape.size() && ++index[a] == shape[a]; ++a) index[a] = 0;
    }
  } else if (n > 0 && row > 0) {
    read(bytes, n * row * es, begin * row * es);
  }
  to_native_order(header_, bytes, n * row);
  return out;
}

}  // namespace detail

Array parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  const NpyHeader h = parse_npy_header(bytes, name);
  detail::check_npy_data_size(h, static_cast<std::int64_t>(bytes.size()) - h.data_offset, name);
  auto buffer = Buffer::allocate(h.data_bytes, Memory::host);
  if (h.data_bytes > 0) {
    auto* dst = static_cast<std::byte*>(buffer->data());
    std::memcpy(dst, bytes.data() + h.data_offset, static_cast<std::size_t>(h.data_bytes));
    detail::to_native_order(h, dst, h.data_bytes / dtype_size(h.dtype));
  }
  Shape strides = h.fortran_order ? f_strides(h.shape) : c_strides(h.shape);
  return Array(std::move(buffer), h.dtype, h.shape, std::move(strides), 0);
}

Array read_npy(const std::filesystem::path& path) {
  // The data go straight into the array's buffer: no copy of the whole file in memory.
  const std::string name = path.string();
  InputFile f = open_input_file(path);
  const NpyHeader h = detail::read_npy_file_header(f, name);
  auto buffer = Buffer::allocate(h.data_bytes, Memory::host);
  if (h.data_bytes > 0) {
    auto* dst = static_cast<std::byte*>(buffer->data());
    const std::int64_t got = f.read_at(dst, h.data_bytes, h.data_offset);
    if (got != h.data_bytes)
      throw IoError(name + ": read failed after " + std::to_string(h.data_offset + got) + " of " +
                    std::to_string(f.size) + " bytes");
    detail::to_native_order(h, dst, h.data_bytes / dtype_size(h.dtype));
  }
  Shape strides = h.fortran_order ? f_strides(h.shape) : c_strides(h.shape);
  return Array(std::move(buffer), h.dtype, h.shape, std::move(strides), 0);
}

std::vector<std::byte> npy_header(DType dtype, const Shape& shape, bool fortran) {
  if (dtype == DType::bf16)
    throw Unsupported("write .npy: bfloat16 has no NumPy dtype; convert the array first");
  // The dict exactly as NumPy's _write_array_header writes it: sorted keys, repr() values, a
  // trailing ", ", then spare spaces so the growth axis can later be rewritten in place.
  std::string dict = "{'descr': '" + descr_of(dtype) +
                     "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  if (!shape.empty()) {
    const auto digits =
        static_cast<std::int64_t>(std::to_string(fortran ? shape.back() : shape.front()).size());
    dict.append(static_cast<std::size_t>(std::max<std::int64_t>(kGrowthAxisMaxDigits - digits, 0)),
                ' ');
  }
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  const auto hlen = static_cast<std::int64_t>(dict.size()) + 1;
  int major = 1;
  std::int64_t padlen = kArrayAlign - ((8 + 2 + hlen) % kArrayAlign);
  if (hlen + padlen > 0xffff) {
    major = 2;
    padlen = kArrayAlign - ((8 + 4 + hlen) % kArrayAlign);
  }
  dict.append(static_cast<std::size_t>(padlen), ' ');
  dict += '\n';
  const auto total = static_cast<std::uint32_t>(dict.size());
  std::vector<std::byte> out;
  for (unsigned char c : kMagic) out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out.push_back(static_cast<std::byte>((total >> (8 * i)) & 0xffu));
  for (char c : dict) out.push_back(static_cast<std::byte>(c));
  return out;
}

NpyParts npy_parts(const Array& a) {
  if (a.empty()) throw InvalidInput("write .npy: the array holds no data (default-constructed)");
  if (a.dtype() == DType::bf16)
    throw Unsupported(
        "write .npy: bfloat16 has no NumPy dtype; convert the array first, e.g. to "
        "float32 (Array::astype(DType::f32), or --dtype float32 on the command line)");
  NpyParts parts;
  parts.data = a.memory() == Memory::device ? a.to(Memory::host) : a;
  bool fortran = false;
  if (!parts.data.is_c_contiguous()) {
    if (parts.data.is_f_contiguous())
      fortran = true;
    else
      parts.data = parts.data.contiguous();
  }
  parts.header = npy_header(a.dtype(), parts.data.shape(), fortran);
  return parts;
}

std::vector<std::byte> serialize_npy(const Array& a) {
  NpyParts parts = npy_parts(a);
  std::vector<std::byte> out = std::move(parts.header);
  const auto* p = static_cast<const std::byte*>(parts.data.data());
  out.insert(out.end(), p, p + parts.data.nbytes());
  return out;
}

void write_npy(const std::filesystem::path& path, const Array& a) {
  const NpyParts parts = npy_parts(a);
  AtomicOutput out(path);
  out.write(parts.header);
  out.write(std::span<const std::byte>(static_cast<const std::byte*>(parts.data.data()),
                                       static_cast<std::size_t>(parts.data.nbytes())));
  out.commit();
}

}  // namespace halfscope::io
