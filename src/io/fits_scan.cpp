// HDU walk over FITS headers (see fits_scan.hpp for why cfitsio does not do it).
#include "io/fits_scan.hpp"

#include <limits>
#include <optional>
#include <string_view>

#include "halfscope/core/error.hpp"

namespace halfscope::io::detail {

namespace {

constexpr std::int64_t kBlock = 2880, kCard = 80;

std::int64_t round_up_blocks(std::int64_t n) {
  return n > std::numeric_limits<std::int64_t>::max() - kBlock ? -1
                                                               : (n + kBlock - 1) / kBlock * kBlock;
}

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

// One 80-character card: its keyword and the text after "= " (empty view if none).
struct Card {
  std::string_view keyword, value;
};

Card read_card(const char* p) {
  const std::string_view card(p, kCard);
  Card c{trim(card.substr(0, 8)), {}};
  if (card.substr(8, 2) == "= ") c.value = card.substr(10);
  return c;
}

// An integer value in FITS free format: optional sign, digits, then blanks or a comment.
std::optional<std::int64_t> int_value(std::string_view v) {
  v = trim(v);
  std::size_t i = 0;
  const bool negative = i < v.size() && v[i] == '-';
  if (i < v.size() && (v[i] == '-' || v[i] == '+')) ++i;
  std::int64_t x = 0;
  std::size_t digits = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, ++digits) {
    if (digits >= 18) return std::nullopt;  // beyond any sensible size, and int64's reach
    x = x * 10 + (v[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  const std::string_view rest = trim(v.substr(i));
  if (!rest.empty() && rest[0] != '/') return std::nullopt;
  return negative ? -x : x;
}

// A string value: 'TEXT    ' -> "TEXT" (quotes doubled inside are not needed for XTENSION).
std::string string_value(std::string_view v) {
  v = trim(v);
  if (v.size() < 2 || v[0] != '\'') return {};
  const auto close = v.find('\'', 1);
  if (close == std::string_view::npos) return {};
  return std::string(trim(v.substr(1, close - 1)));
}

// Reads the header at `start`, checking the mandatory keywords in their required order.
FitsHduSpan scan_hdu(std::span<const std::byte> bytes, std::int64_t start, int index,
                     const std::string& name, bool& compressed) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  const char* base = reinterpret_cast<const char*>(bytes.data());
  const std::string where = name + ": HDU " + std::to_string(index);
  const bool primary = index == 1;
  FitsHduSpan h;
  h.header_start = start;
  std::int64_t bitpix = 0, pcount = 0, gcount = 1, count = 1;
  std::int64_t k = 0;  // card number within the header
  const auto need_int = [&](const Card& c, std::string_view key, std::int64_t lo, std::int64_t hi) {
    const auto v = c.keyword == key ? int_value(c.value) : std::nullopt;
    if (!v || *v < lo || *v > hi)
      throw IoError(where + ": expected " + std::string(key) + " (an integer " +
                    std::to_string(lo) + ".." + std::to_string(hi) + ") as card " +
                    std::to_string(k + 1) + ", found '" +
                    std::string(trim(std::string_view(base + start + k * kCard, kCard))) + "'");
    return *v;
  };
  compressed = false;
  for (;; ++k) {
    const std::int64_t at = start + k * kCard;
    if (at + kCard > size) throw IoError(where + ": header has no END card (truncated file?)");
    const Card c = read_card(base + at);
    if (k == 0) {
      if (primary && !(c.keyword == "SIMPLE" && trim(c.value).substr(0, 1) == "T"))
        throw IoError(name + ": not a FITS file: expected SIMPLE = T as the first card");
      if (!primary) {
        if (c.keyword != "XTENSION") throw IoError(where + ": expected XTENSION as the first card");
        h.xtension = string_value(c.value);
        static const char* known[] = {"IMAGE", "BINTABLE", "TABLE", "A3DTABLE", "IUEIMAGE"};
        bool ok = false;
        for (const char* x : known) ok = ok || h.xtension == x;
        if (!ok) throw IoError(where + ": unknown extension type XTENSION = '" + h.xtension + "'");
      }
    } else if (k == 1) {
      bitpix = need_int(c, "BITPIX", -64, 64);
      if (bitpix != 8 && bitpix != 16 && bitpix != 32 && bitpix != 64 && bitpix != -32 &&
          bitpix != -64)
        throw IoError(where + ": BITPIX = " + std::to_string(bitpix) +
                      " is not 8, 16, 32, 64, -32 or -64");
    } else if (k == 2) {
      h.naxis = need_int(c, "NAXIS", 0, 999);
    } else if (k <= 2 + h.naxis) {
      const std::int64_t n =
          need_int(c, "NAXIS" + std::to_string(k - 2), 0, std::numeric_limits<std::int64_t>::max());
      if (__builtin_mul_overflow(count, n, &count))
        throw IoError(where + ": NAXISn product overflows");
    } else if (!primary && k == 3 + h.naxis) {
      pcount = need_int(c, "PCOUNT", 0, std::numeric_limits<std::int64_t>::max() / 16);
    } else if (!primary && k == 4 + h.naxis) {
      gcount = need_int(c, "GCOUNT", 0, std::numeric_limits<std::int64_t>::max() / 16);
    } else if (!primary && h.xtension.find("TABLE") != std::string::npos && k == 5 + h.naxis) {
      need_int(c, "TFIELDS", 0, 999);
    } else if (c.keyword == "END") {
      break;
    } else if (c.keyword == "ZIMAGE" && trim(c.value).substr(0, 1) == "T") {
      compressed = true;
    }
  }
  h.data_start = round_up_blocks(start + (k + 1) * kCard);
  if (h.naxis == 0) count = 0;
  std::int64_t elements = 0;
  if (__builtin_add_overflow(count, pcount, &elements) ||
      __builtin_mul_overflow(elements, gcount, &elements) ||
      __builtin_mul_overflow(elements, std::abs(bitpix) / 8, &h.data_bytes))
    throw IoError(where + ": data size overflows");
  const std::int64_t padded = round_up_blocks(h.data_bytes);
  if (padded < 0 || __builtin_add_overflow(h.data_start, padded, &h.end))
    throw IoError(where + ": data size overflows");
  return h;
}

}  // namespace

FitsImageLocation locate_fits_image(std::span<const std::byte> bytes, const std::string& name) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  FitsImageLocation loc;
  bool compressed = false, saw_compressed = false;
  loc.primary = scan_hdu(bytes, 0, 1, name, compressed);
  loc.image = loc.primary;
  if (loc.primary.naxis > 0) return loc;
  std::int64_t next = loc.primary.end;
  for (int index = 2; next < size; ++index) {
    const FitsHduSpan h = scan_hdu(bytes, next, index, name, compressed);
    saw_compressed = saw_compressed || compressed;
    if (h.xtension == "IMAGE" && h.naxis > 0) {
      loc.image = h;
      loc.index = index;
      return loc;
    }
    next = h.end;
  }
  if (saw_compressed)
    throw Unsupported(name +
                      ": the image is tile-compressed (ZIMAGE = T), which halfscope does not "
                      "read (cfitsio's decoders are not safe on untrusted files); "
                      "decompress it first, e.g. funpack");
  throw IoError(name +
                ": no image: the primary HDU has NAXIS = 0 and no image extension with "
                "data follows");
}

}  // namespace halfscope::io::detail
