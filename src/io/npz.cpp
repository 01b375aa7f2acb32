// .npz: ZIP archives of .npy members (PKWARE APPNOTE 6.3, the subset NumPy and Python's zipfile
// write). The central directory is the authority for sizes, offsets and CRCs, because NumPy
// writes members through a streaming zipfile handle whose local headers may carry placeholders;
// local headers are only used to find where each member's data starts.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::io {

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t k32 = 0xffffffffu;  // a 32-bit field that defers to the ZIP64 extra
constexpr std::uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible files

[[noreturn]] void fail(std::string_view name, const std::string& what) {
  throw IoError(std::string(name) + ": " + what);
}

/// Bounds-checked little-endian reads from the archive.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string_view name) : b_(bytes), name_(name) {}
  std::uint64_t get(std::uint64_t at, int n, const char* what) const {
    if (at > b_.size() || b_.size() - at < static_cast<std::uint64_t>(n))
      fail(name_, std::string("truncated: ") + what + " at offset " + std::to_string(at) +
                      " runs past the end of the " + std::to_string(b_.size()) + "-byte file");
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(b_[at + i]);
    return v;
  }
  std::uint16_t u16(std::uint64_t at, const char* what) const {
    return static_cast<std::uint16_t>(get(at, 2, what));
  }
  std::uint32_t u32(std::uint64_t at, const char* what) const {
    return static_cast<std::uint32_t>(get(at, 4, what));
  }
  std::uint64_t u64(std::uint64_t at, const char* what) const { return get(at, 8, what); }
  std::span<const std::byte> span(std::uint64_t at, std::uint64_t n, const char* what) const {
    if (at > b_.size() || b_.size() - at < n)
      fail(name_, std::string("truncated: ") + what + " (" + std::to_string(n) +
                      " bytes at offset " + std::to_string(at) + ") runs past the end of the " +
                      std::to_string(b_.size()) + "-byte file");
    return b_.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
  }
  [[nodiscard]] std::uint64_t size() const { return b_.size(); }

 private:
  std::span<const std::byte> b_;
  std::string_view name_;
};

/// One central-directory entry, ZIP64 values applied.
struct Entry {
  std::string name;
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0;
  std::uint64_t usize = 0;
  std::uint64_t local_offset = 0;
  std::uint64_t data_start = 0;
};

/// Where the central directory lies, from the end-of-central-directory records.
struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t end = 0;  // where the (ZIP64) end record starts: the directory must end before
};

Directory find_directory(const Reader& r, std::string_view name) {
  if (r.size() < 22) fail(name, "not a ZIP/.npz archive (" + std::to_string(r.size()) + " bytes)");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes: scan back for it.
  std::uint64_t eocd = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t lowest = r.size() > 22 + 0xffff ? r.size() - 22 - 0xffff : 0;
  for (std::uint64_t p = r.size() - 22;; --p) {
    if (r.u32(p, "end record") == kEndSig && p + 22 + r.u16(p + 20, "comment length") <= r.size()) {
      eocd = p;
      break;
    }
    if (p == lowest) break;
  }
  if (eocd == std::numeric_limits<std::uint64_t>::max())
    fail(name, "not a ZIP/.npz archive (no end-of-central-directory record)");
  if (r.u16(eocd + 4, "disk number") != 0 || r.u16(eocd + 6, "directory disk") != 0)
    fail(name, "multi-disk ZIP archives are not supported");
  Directory d{r.u16(eocd + 10, "entry count"), r.u32(eocd + 16, "directory offset"),
              r.u32(eocd + 12, "directory size"), eocd};
  if (eocd >= 20 && r.u32(eocd - 20, "ZIP64 locator") == kZip64LocatorSig) {
    const std::uint64_t z = r.u64(eocd - 12, "ZIP64 end record offset");
    if (z > eocd - 20 || eocd - 20 - z < 56 || r.u32(z, "ZIP64 end record") != kZip64EndSig)
      fail(name, "bad ZIP64 locator: no ZIP64 end record at offset " + std::to_string(z));
    if (r.u32(z + 16, "ZIP64 disk number") != 0 || r.u32(z + 20, "ZIP64 directory disk") != 0)
      fail(name, "multi-disk ZIP archives are not supported");
    d = {r.u64(z + 32, "ZIP64 entry count"), r.u64(z + 48, "ZIP64 directory offset"),
         r.u64(z + 40, "ZIP64 directory size"), z};
  }
  if (d.offset > d.end || d.size > d.end - d.offset)
    fail(name, "central directory (" + std::to_string(d.size) + " bytes at offset " +
                   std::to_string(d.offset) + ") overlaps the end record at " +
                   std::to_string(d.end));
  if (d.entries > d.size / 46)
    fail(name, "central directory claims " + std::to_string(d.entries) + " entries in " +
                   std::to_string(d.size) + " bytes");
  return d;
}

/// Applies the ZIP64 extra field (id 1) to the entry's sentinel fields, in APPNOTE order.
void apply_zip64(const Reader& r, std::uint64_t at, std::uint64_t len, Entry& e,
                 std::string_view name) {
  const std::uint64_t end = at + len;
  while (at + 4 <= end) {
    const std::uint16_t id = r.u16(at, "extra field");
    const std::uint16_t n = r.u16(at + 2, "extra field");
    if (at + 4 + n > end) fail(name, "member " + e.name + ": extra field runs past its header");
    if (id == 1) {
      std::uint64_t p = at + 4;
      const auto take = [&](std::uint64_t& field) {
        if (p + 8 > at + 4 + n) fail(name, "member " + e.name + ": ZIP64 extra field too short");
        field = r.u64(p, "ZIP64 extra");
        p += 8;
      };
      if (e.usize == k32) take(e.usize);
      if (e.csize == k32) take(e.csize);
      if (e.local_offset == k32) take(e.local_offset);
      return;
    }
    at += 4 + n;
  }
}

std::vector<Entry> read_directory(const Reader& r, const Directory& d, std::string_view name) {
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(d.entries));
  std::uint64_t p = d.offset;
  for (std::uint64_t i = 0; i < d.entries; ++i) {
    if (r.u32(p, "central directory entry") != kCentralSig)
      fail(name, "bad central directory: entry " + std::to_string(i) + " at offset " +
                     std::to_string(p) + " lacks its signature");
    Entry e;
    e.flags = r.u16(p + 8, "flags");
    e.method = r.u16(p + 10, "method");
    e.crc = r.u32(p + 16, "CRC");
    e.csize = r.u32(p + 20, "compressed size");
    e.usize = r.u32(p + 24, "size");
    const std::uint16_t name_len = r.u16(p + 28, "name length");
    const std::uint16_t extra_len = r.u16(p + 30, "extra length");
    const std::uint16_t comment_len = r.u16(p + 32, "comment length");
    if (r.u16(p + 34, "disk") != 0) fail(name, "multi-disk ZIP archives are not supported");
    e.local_offset = r.u32(p + 42, "local header offset");
    const auto n = r.span(p + 46, name_len, "member name");
    e.name.assign(reinterpret_cast<const char*>(n.data()), n.size());
    apply_zip64(r, p + 46 + name_len, extra_len, e, name);
    p += 46 + static_cast<std::uint64_t>(name_len) + extra_len + comment_len;
    if (p > d.offset + d.size) fail(name, "central directory entry " + e.name + " overruns it");
    entries.push_back(std::move(e));
  }
  return entries;
}

/// Inflates a raw deflate stream, never producing more than `limit` bytes and stopping as soon as
/// the .npy header inside shows how long the member can honestly be.
std::vector<std::byte> inflate_member(std::span<const std::byte> in, std::uint64_t limit,
                                      const std::string& where) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw IoError(where + ": zlib inflateInit failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::vector<std::byte> out;
  std::uint64_t consumed = 0;
  bool header_checked = false;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0 && consumed < in.size()) {
      const auto chunk = std::min<std::uint64_t>(in.size() - consumed, 1u << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + consumed));
      z.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    // One byte more room than `limit` allows, so that a stream longer than it cannot end quietly.
    const std::uint64_t room = std::min<std::uint64_t>(limit - out.size(), (1u << 20) - 1) + 1;
    const std::size_t before = out.size();
    out.resize(before + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(before + room - z.avail_out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && consumed == in.size())
      throw IoError(where + ": truncated: the deflate stream ends early");
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw IoError(where + ": corrupt deflate data (" + (z.msg ? z.msg : "zlib error") + ")");
    if (out.size() > limit)
      throw IoError(where + ": inflates to more than the " + std::to_string(limit) +
                    " bytes it claims");
    if (!header_checked && out.size() >= 12) {
      const bool magic = std::memcmp(out.data(), "\x93NUMPY", 6) == 0;
      const std::uint64_t len =
          static_cast<unsigned>(out[6]) == 1
              ? 10 + (static_cast<std::uint64_t>(out[8]) | static_cast<std::uint64_t>(out[9]) << 8)
              : 12 + (static_cast<std::uint64_t>(out[8]) | static_cast<std::uint64_t>(out[9]) << 8 |
                      static_cast<std::uint64_t>(out[10]) << 16 |
                      static_cast<std::uint64_t>(out[11]) << 24);
      if (!magic || out.size() >= len || rc == Z_STREAM_END) {
        const NpyHeader h = parse_npy_header(out, where);
        limit = std::min(limit, static_cast<std::uint64_t>(h.data_offset + h.data_bytes));
        header_checked = true;
        if (out.size() > limit)
          throw IoError(where + ": " + std::to_string(out.size() - limit) +
                        " unexpected bytes after the data its .npy header describes");
      }
    }
  }
  if (z.avail_in != 0 || consumed != in.size())
    throw IoError(where + ": " + std::to_string(in.size() - consumed + z.avail_in) +
                  " bytes of compressed data after the end of the deflate stream");
  return out;
}

std::uint32_t crc_of(std::span<const std::byte> bytes, std::uint32_t crc = 0) {
  uLong c = crc;
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 1u << 30);
    c = crc32(c, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<std::uint32_t>(c);
}

}  // namespace

NamedArrays parse_npz(std::span<const std::byte> bytes, std::string_view name) {
  const Reader r(bytes, name);
  const Directory dir = find_directory(r, name);
  std::vector<Entry> entries = read_directory(r, dir, name);
  // Locate each member's data and refuse overlapping members: otherwise a small archive could
  // point many entries at one large member (the "overlapping zip bomb").
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::set<std::string> seen;
  for (Entry& e : entries) {
    const std::string where = std::string(name) + ": member " + e.name;
    if (e.flags & 1u) throw IoError(where + ": encrypted members are not supported");
    if (e.method != 0 && e.method != 8)
      throw IoError(where + ": compression method " + std::to_string(e.method) +
                    " is not supported (expected 0 stored or 8 deflated)");
    if (e.method == 0 && e.csize != e.usize)
      throw IoError(where + ": stored member with compressed size " + std::to_string(e.csize) +
                    " != size " + std::to_string(e.usize));
    if (e.name.size() < 4 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0)
      throw IoError(where + ": not a .npy member (an .npz holds only <name>.npy files)");
    if (!seen.insert(e.name).second) throw IoError(where + ": appears twice in the archive");
    if (e.local_offset >= dir.offset || r.u32(e.local_offset, "local header") != kLocalSig)
      throw IoError(where + ": no local header at offset " + std::to_string(e.local_offset));
    const std::uint16_t name_len = r.u16(e.local_offset + 26, "local name length");
    const std::uint16_t extra_len = r.u16(e.local_offset + 28, "local extra length");
    const auto local_name = r.span(e.local_offset + 30, name_len, "local member name");
    if (std::string_view(reinterpret_cast<const char*>(local_name.data()), local_name.size()) !=
        e.name)
      throw IoError(where + ": the local header names a different file");
    e.data_start = e.local_offset + 30 + name_len + extra_len;
    if (e.data_start > dir.offset || e.csize > dir.offset - e.data_start)
      throw IoError(where + ": " + std::to_string(e.csize) + " bytes of data at offset " +
                    std::to_string(e.data_start) + " run into the central directory at " +
                    std::to_string(dir.offset));
    ranges.emplace_back(e.local_offset, e.data_start + e.csize);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      fail(name, "members overlap at offset " + std::to_string(ranges[i].first));

  NamedArrays out;
  out.reserve(entries.size());
  for (const Entry& e : entries) {
    const std::string where = std::string(name) + ": member " + e.name;
    const auto raw = r.span(e.data_start, e.csize, "member data");
    std::vector<std::byte> inflated;
    std::span<const std::byte> npy = raw;
    if (e.method == 8) {
      inflated = inflate_member(raw, e.usize, where);
      npy = inflated;
    }
    if (npy.size() != e.usize)
      throw IoError(where + ": inflates to " + std::to_string(npy.size()) +
                    " bytes, directory says " + std::to_string(e.usize));
    if (crc_of(npy) != e.crc) throw IoError(where + ": CRC-32 mismatch (corrupt data)");
    out.emplace_back(e.name.substr(0, e.name.size() - 4), parse_npy(npy, where));
  }
  return out;
}

NamedArrays read_npz(const std::filesystem::path& path) {
  return parse_npz(read_file_bytes(path), path.string());
}

namespace {

/// Little-endian field writer for ZIP records.
struct Record {
  std::vector<std::byte> b;
  Record& put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
    return *this;
  }
  Record& put(std::string_view s) {
    for (char c : s) b.push_back(static_cast<std::byte>(c));
    return *this;
  }
};

/// Writes the archive through `sink`; shared by write_npz (to a file) and serialize_npz.
void emit_npz(const NamedArrays& arrays, const NpzWriteOptions& options,
              const std::function<void(std::span<const std::byte>)>& sink) {
  std::set<std::string> names;
  for (const auto& [key, array] : arrays) {
    if (key.empty() || key.find('\0') != std::string::npos)
      throw InvalidInput("write .npz: member names must be non-empty and free of NUL bytes");
    if (!names.insert(key).second)
      throw InvalidInput("write .npz: duplicate member name '" + key + "'");
    if (key.size() + 4 > 0xffff) throw InvalidInput("write .npz: member name too long");
  }
  Record central;
  std::uint64_t offset = 0;
  for (const auto& [key, array] : arrays) {
    const NpyParts parts = npy_parts(array);
    const std::span<const std::byte> data(static_cast<const std::byte*>(parts.data.data()),
                                          static_cast<std::size_t>(parts.data.nbytes()));
    const std::uint64_t size = parts.header.size() + data.size();
    const std::uint32_t crc = crc_of(data, crc_of(parts.header));
    const std::string member = key + ".npy";
    const bool utf8 = std::any_of(member.begin(), member.end(),
                                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    const bool big_size = options.force_zip64 || size >= k32;
    const bool big_offset = options.force_zip64 || offset >= k32;
    const std::uint16_t version = big_size || big_offset ? 45 : 20;
    const std::uint16_t flags = utf8 ? 0x0800 : 0;

    Record local;
    local.put(kLocalSig, 4).put(version, 2).put(flags, 2).put(0, 2).put(0, 2).put(kDosDate1980, 2);
    local.put(crc, 4).put(big_size ? k32 : size, 4).put(big_size ? k32 : size, 4);
    local.put(member.size(), 2).put(big_size ? 20 : 0, 2).put(member);
    if (big_size) local.put(1, 2).put(16, 2).put(size, 8).put(size, 8);
    sink(local.b);
    sink(parts.header);
    sink(data);

    const int extra = (big_size ? 16 : 0) + (big_offset ? 8 : 0);
    central.put(kCentralSig, 4).put(0x0300 | 45, 2).put(version, 2).put(flags, 2).put(0, 2);
    central.put(0, 2).put(kDosDate1980, 2).put(crc, 4);
    central.put(big_size ? k32 : size, 4).put(big_size ? k32 : size, 4);
    central.put(member.size(), 2).put(extra ? extra + 4 : 0, 2).put(0, 2).put(0, 2).put(0, 2);
    central.put(0644u << 16, 4).put(big_offset ? k32 : offset, 4).put(member);
    if (extra) {
      central.put(1, 2).put(extra, 2);
      if (big_size) central.put(size, 8).put(size, 8);
      if (big_offset) central.put(offset, 8);
    }
    offset += local.b.size() + size;
  }
  const std::uint64_t count = arrays.size();
  const std::uint64_t dir_size = central.b.size();
  const bool zip64 = options.force_zip64 || count >= 0xffff || offset >= k32 || dir_size >= k32;
  if (zip64) {
    central.put(kZip64EndSig, 4).put(44, 8).put(0x0300 | 45, 2).put(45, 2).put(0, 4).put(0, 4);
    central.put(count, 8).put(count, 8).put(dir_size, 8).put(offset, 8);
    central.put(kZip64LocatorSig, 4).put(0, 4).put(offset + dir_size, 8).put(1, 4);
  }
  central.put(kEndSig, 4).put(0, 2).put(0, 2);
  central.put(zip64 ? 0xffff : count, 2).put(zip64 ? 0xffff : count, 2);
  central.put(zip64 ? k32 : dir_size, 4).put(zip64 ? k32 : offset, 4).put(0, 2);
  sink(central.b);
}

}  // namespace

std::vector<std::byte> serialize_npz(const NamedArrays& arrays, const NpzWriteOptions& options) {
  std::vector<std::byte> out;
  emit_npz(arrays, options,
           [&](std::span<const std::byte> s) { out.insert(out.end(), s.begin(), s.end()); });
  return out;
}

void write_npz(const std::filesystem::path& path, const NamedArrays& arrays,
               const NpzWriteOptions& options) {
  AtomicOutput out(path);
  emit_npz(arrays, options, [&](std::span<const std::byte> s) { out.write(s); });
  out.commit();
}

}  // namespace halfscope::io
