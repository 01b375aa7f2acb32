// FITS image reader and writer over cfitsio, both in memory (see fits.hpp for the value rules).
#include "halfscope/io/fits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

#if HALFSCOPE_HAS_FITS
#include <fitsio.h>

#include "io/fits_scan.hpp"
#endif

namespace halfscope::io {

std::string FitsCard::text() const {
  if (value.size() < 2 || value.front() != '\'') return value;
  std::string out;
  for (std::size_t i = 1; i < value.size(); ++i) {
    if (value[i] != '\'') {
      out += value[i];
    } else if (i + 1 < value.size() && value[i + 1] == '\'') {
      out += '\'';  // FITS escapes a quote by doubling it
      ++i;
    } else {
      break;
    }
  }
  out.erase(out.find_last_not_of(' ') + 1);  // trailing blanks are not significant in FITS strings
  return out;
}

const FitsCard* find_card(const std::vector<FitsCard>& cards, std::string_view keyword) {
  for (const FitsCard& c : cards)
    if (c.keyword == keyword) return &c;
  return nullptr;
}

#if !HALFSCOPE_HAS_FITS

namespace {
[[noreturn]] void no_fits() {
  throw Unsupported("FITS support was not built: install libcfitsio-dev and rebuild");
}
}  // namespace

FitsImage parse_fits(std::span<const std::byte>, std::string_view, FitsValues) {
  no_fits();
}
FitsImage read_fits(const std::filesystem::path&, FitsValues) {
  no_fits();
}
std::vector<std::byte> serialize_fits(const FitsImage&, const std::string&) {
  no_fits();
}
void write_fits(const std::filesystem::path&, const FitsImage&, const std::string&) {
  no_fits();
}

#else

namespace {

// cfitsio keeps one process-wide error-message stack; holding this lock while using cfitsio keeps
// another thread's messages out of ours.
std::mutex& fits_mutex() {
  static std::mutex m;
  return m;
}

// Throws IoError with cfitsio's status text and its error stack, if `status` is set.
void check(int status, const std::string& name, const char* what) {
  if (status == 0) return;
  char text[FLEN_STATUS] = {};
  fits_get_errstatus(status, text);
  std::string msg = name + ": " + what + ": " + text;
  std::string stack;
  char line[FLEN_ERRMSG] = {};
  for (int n = 0; fits_read_errmsg(line) && n < 8; ++n) {
    // cfitsio quotes offending header bytes verbatim: keep the message one printable line.
    std::string s(line);
    for (char& c : s)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    s.erase(s.find_last_not_of(' ') + 1);
    if (!s.empty() && s != "halfscope") stack += (stack.empty() ? "" : "; ") + s;
  }
  fits_clear_errmsg();
  if (!stack.empty()) msg += " (cfitsio: " + stack + ")";
  throw IoError(msg);
}

// Closes the file on every path out; the close status of an error path is ignored.
struct FitsHandle {
  fitsfile* f = nullptr;
  ~FitsHandle() {
    int st = 0;
    if (f) fits_close_file(f, &st);
  }
};

bool is_structural(const std::string& key) {
  static const char* fixed[] = {"SIMPLE", "XTENSION", "BITPIX", "NAXIS",    "EXTEND",  "BSCALE",
                                "BZERO",  "PCOUNT",   "GCOUNT", "CHECKSUM", "DATASUM", "END"};
  for (const char* k : fixed)
    if (key == k) return true;
  return key.size() > 5 && key.compare(0, 5, "NAXIS") == 0 &&
         key.find_first_not_of("0123456789", 5) == std::string::npos;
}

FitsCard parse_card(const char* record, int* status) {
  std::string card(record);
  card.resize(80, ' ');
  FitsCard c;
  const bool hierarch = card.compare(0, 9, "HIERARCH ") == 0;
  // cfitsio reads cards it would refuse to write (illegal keyword characters, control bytes);
  // holding the reader to the writer's rules keeps write(read(x)) possible for every file read.
  fits_test_record(card.data(), status);
  std::string key = card.substr(0, 8);
  key.erase(key.find_last_not_of(' ') + 1);
  if (!hierarch && !key.empty()) fits_test_keyword(key.c_str(), status);
  if (*status) return c;
  if (!hierarch && !(card[8] == '=' && card[9] == ' ')) {
    c.keyword = card.substr(0, 8);
    c.keyword.erase(c.keyword.find_last_not_of(' ') + 1);
    c.comment = card.substr(8);
    c.comment.erase(c.comment.find_last_not_of(' ') + 1);
    c.commentary = true;
    return c;
  }
  char name[FLEN_KEYWORD] = {}, value[FLEN_VALUE] = {}, comment[FLEN_COMMENT] = {};
  int length = 0;
  fits_get_keyname(card.data(), name, &length, status);
  fits_parse_value(card.data(), value, comment, status);
  c.keyword = hierarch ? "HIERARCH " + std::string(name) : std::string(name);
  c.value = value;
  c.comment = comment;
  return c;
}

struct ReadPlan {
  DType dtype;
  int datatype;        // cfitsio TBYTE, TSHORT, ...
  bool nan_for_blank;  // integers read into floats: BLANK pixels become NaN
};

// What dtype a read returns and how cfitsio is asked for it (see fits.hpp).
ReadPlan plan_read(int bitpix, double bscale, double bzero, FitsValues values) {
  const bool unscaled = values == FitsValues::raw || (bscale == 1.0 && bzero == 0.0);
  if (unscaled) {
    switch (bitpix) {
      case 8:
        return {DType::u8, TBYTE, false};
      case 16:
        return {DType::i16, TSHORT, false};
      case 32:
        return {DType::i32, TINT, false};
      case 64:
        return {DType::i64, TLONGLONG, false};
      case -32:
        return {DType::f32, TFLOAT, false};
      default:
        return {DType::f64, TDOUBLE, false};
    }
  }
  if (bscale == 1.0) {
    if (bitpix == 8 && bzero == -128.0) return {DType::i8, TSBYTE, false};
    if (bitpix == 16 && bzero == 32768.0) return {DType::u16, TUSHORT, false};
    if (bitpix == 32 && bzero == 2147483648.0) return {DType::u32, TUINT, false};
    if (bitpix == 64 && bzero == 9223372036854775808.0) return {DType::u64, TULONGLONG, false};
  }
  return {DType::f64, TDOUBLE, bitpix > 0};
}

// The bytes cfitsio gets: the primary header and the image HDU only (see fits_scan.hpp), padded
// with zeros to whole 2880-byte blocks, because cfitsio's memory driver reads whole blocks and
// would read past the end of a file whose last block is short (found by fuzz/fuzz_fits.cpp).
// `real` is how many of them the file really has, for the truncation check.
std::vector<char> image_bytes(std::span<const std::byte> bytes,
                              const detail::FitsImageLocation& loc, std::int64_t& real) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  const auto* p = reinterpret_cast<const char*>(bytes.data());
  std::vector<char> out;
  if (loc.index == 1) {
    out.assign(p, p + size);
  } else {
    // NAXIS = 0: the primary is all header (and ends before the image HDU starts).
    out.assign(p, p + std::min(loc.primary.data_start, size));
    out.insert(out.end(), p + loc.image.header_start, p + std::min(loc.image.end, size));
  }
  real = static_cast<std::int64_t>(out.size());
  out.resize((out.size() + 2879) / 2880 * 2880, '\0');
  return out;
}

}  // namespace

FitsImage parse_fits(std::span<const std::byte> bytes, std::string_view name_view,
                     FitsValues values) {
  const std::string name(name_view);
  if (bytes.empty()) throw IoError(name + ": empty file, expected a FITS header");
  const detail::FitsImageLocation loc = detail::locate_fits_image(bytes, name);
  std::int64_t file_bytes = 0;
  std::vector<char> copy = image_bytes(bytes, loc, file_bytes);
  void* mem = copy.data();
  std::size_t mem_size = copy.size();

  std::lock_guard lock(fits_mutex());
  fits_clear_errmsg();
  FitsHandle h;
  int status = 0;
  // The name only selects an HDU in cfitsio's syntax; a fixed one keeps user paths out of it.
  fits_open_memfile(&h.f, "halfscope", READONLY, &mem, &mem_size, 0, nullptr, &status);
  check(status, name, "not a readable FITS file");
  if (loc.index > 1) {
    int type = 0;
    fits_movabs_hdu(h.f, 2, &type, &status);
    check(status, name,
          ("cannot read the image extension (HDU " + std::to_string(loc.index) + ")").c_str());
  }

  int naxis = 0;
  fits_get_img_dim(h.f, &naxis, &status);
  check(status, name, "cannot read the image header");
  if (naxis < 1 || naxis > 8)
    throw IoError(name +
                  ": expected an image with NAXIS 1..8, found NAXIS = " + std::to_string(naxis));
  int bitpix = 0;
  LONGLONG naxes[8] = {};
  fits_get_img_paramll(h.f, naxis, &bitpix, &naxis, naxes, &status);
  check(status, name, "cannot read the image dimensions");

  // Check the announced size before allocating: a hostile header must not cost more memory
  // than the file could honestly hold.
  Shape shape(static_cast<std::size_t>(naxis));
  std::int64_t count = 1;
  for (int k = 0; k < naxis; ++k) {
    if (naxes[k] < 0 || __builtin_mul_overflow(count, naxes[k], &count))
      throw IoError(name + ": NAXIS" + std::to_string(k + 1) + " = " + std::to_string(naxes[k]) +
                    " gives an impossible image size");
    shape[static_cast<std::size_t>(naxis - 1 - k)] = naxes[k];
  }
  const std::int64_t stored_bytes = count > std::numeric_limits<std::int64_t>::max() / 8
                                        ? std::numeric_limits<std::int64_t>::max()
                                        : count * (std::abs(bitpix) / 8);
  LONGLONG head = 0, data_start = 0, data_end = 0;
  fits_get_hduaddrll(h.f, &head, &data_start, &data_end, &status);
  check(status, name, "cannot locate the image data");
  if (stored_bytes > file_bytes - data_start)
    throw IoError(name + ": truncated: header announces " + std::to_string(stored_bytes) +
                  " bytes of image data, file has " +
                  std::to_string(std::max<std::int64_t>(file_bytes - data_start, 0)) +
                  " after the header");

  FitsImage img;
  img.bitpix = bitpix;
  int nexist = 0, nmore = 0;
  fits_get_hdrspace(h.f, &nexist, &nmore, &status);
  check(status, name, "cannot read the header");
  img.cards.reserve(static_cast<std::size_t>(nexist));
  for (int k = 1; k <= nexist; ++k) {
    char record[FLEN_CARD] = {};
    fits_read_record(h.f, k, record, &status);
    FitsCard c = parse_card(record, &status);
    check(status, name, ("malformed header card " + std::to_string(k)).c_str());
    // By keyword alone: cfitsio also takes a value from a card with a misplaced "=", which the
    // standard calls commentary, so such a card must not be written back to be read again.
    if (is_structural(c.keyword)) continue;
    img.cards.push_back(std::move(c));
  }

  double bscale = 1.0, bzero = 0.0;
  bool has_bscale = true, has_bzero = true;
  fits_read_key(h.f, TDOUBLE, "BSCALE", &bscale, nullptr, &status);
  if (status == KEY_NO_EXIST) status = 0, has_bscale = false, bscale = 1.0;
  fits_read_key(h.f, TDOUBLE, "BZERO", &bzero, nullptr, &status);
  if (status == KEY_NO_EXIST) status = 0, has_bzero = false, bzero = 0.0;
  fits_clear_errmsg();
  check(status, name, "bad BSCALE or BZERO");
  if (bscale == 0.0 || !std::isfinite(bscale) || !std::isfinite(bzero))
    throw IoError(name + ": expected a finite nonzero BSCALE and a finite BZERO, found BSCALE = " +
                  std::to_string(bscale) + ", BZERO = " + std::to_string(bzero));
  if (values == FitsValues::raw) {
    if (has_bscale) img.bscale = bscale;
    if (has_bzero) img.bzero = bzero;
    fits_set_bscale(h.f, 1.0, 0.0, &status);  // hand back the stored numbers
    check(status, name, "cannot disable scaling");
  }

  const ReadPlan plan = plan_read(bitpix, bscale, bzero, values);
  img.data = Array(plan.dtype, shape);
  if (count > 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    int anynull = 0;
    fits_read_img(h.f, plan.datatype, 1, count,
                  plan.nan_for_blank ? const_cast<double*>(&nan) : nullptr, img.data.data(),
                  &anynull, &status);
    check(status, name, "cannot read the image data");
  }
  return img;
}

FitsImage read_fits(const std::filesystem::path& path, FitsValues values) {
  const auto bytes = read_file_bytes(path);
  return parse_fits(bytes, path.string(), values);
}

namespace {

struct WritePlan {
  int bitpix_code;  // cfitsio's: SBYTE_IMG, USHORT_IMG, ... write their BZERO themselves
  int datatype;
};

WritePlan plan_write(const FitsImage& img) {
  const DType t = img.data.dtype();
  if (t == DType::f16 || t == DType::bf16)
    throw Unsupported("FITS has no " + std::string(dtype_name(t)) +
                      " images: convert to float32 first");
  if (img.bscale || img.bzero) {
    switch (t) {
      case DType::u8:
        return {BYTE_IMG, TBYTE};
      case DType::i16:
        return {SHORT_IMG, TSHORT};
      case DType::i32:
        return {LONG_IMG, TINT};
      case DType::i64:
        return {LONGLONG_IMG, TLONGLONG};
      case DType::f32:
        return {FLOAT_IMG, TFLOAT};
      case DType::f64:
        return {DOUBLE_IMG, TDOUBLE};
      default:
        throw InvalidInput(
            "FITS: bscale/bzero are set, so the data must be stored values "
            "(uint8, int16, int32, int64, float32 or float64), got " +
            std::string(dtype_name(t)));
    }
  }
  switch (t) {
    case DType::u8:
      return {BYTE_IMG, TBYTE};
    case DType::i8:
      return {SBYTE_IMG, TSBYTE};
    case DType::i16:
      return {SHORT_IMG, TSHORT};
    case DType::u16:
      return {USHORT_IMG, TUSHORT};
    case DType::i32:
      return {LONG_IMG, TINT};
    case DType::u32:
      return {ULONG_IMG, TUINT};
    case DType::i64:
      return {LONGLONG_IMG, TLONGLONG};
    case DType::u64:
      return {ULONGLONG_IMG, TULONGLONG};
    case DType::f32:
      return {FLOAT_IMG, TFLOAT};
    default:
      return {DOUBLE_IMG, TDOUBLE};
  }
}

// A FITS number that reads back as exactly `v`: integers in full and without a decimal point
// (astropy recognises BZERO = -128 or 32768 as the signed-byte / unsigned conventions only when
// written as integers), others with 17 significant digits.
std::string format_number(double v) {
  if (!std::isfinite(v)) throw InvalidInput("FITS: BSCALE/BZERO must be finite");
  char buf[64];
  if (v == std::floor(v) && std::abs(v) < 1e19)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.17G", v);
  return buf;
}

std::string card_record(const FitsCard& c, const std::string& name, int& status) {
  if (c.commentary) {
    std::string r = c.keyword;
    r.resize(8, ' ');
    return (r + c.comment).substr(0, 80);
  }
  char record[FLEN_CARD] = {};
  fits_make_key(c.keyword.c_str(), const_cast<char*>(c.value.c_str()), c.comment.c_str(), record,
                &status);
  check(status, name, ("cannot format header card " + c.keyword).c_str());
  return record;
}

std::vector<std::byte> serialize(const FitsImage& img, const std::string& history,
                                 const std::string& name) {
  if (img.data.empty() || img.data.ndim() == 0)
    throw InvalidInput(name + ": FITS needs an image of 1 or more dimensions, got " +
                       (img.data.empty() ? std::string("no data") : img.data.describe()));
  const WritePlan plan = plan_write(img);
  const Array data = (img.data.on_device() ? img.data.to(Memory::host) : img.data).contiguous();
  const bool float_data = dtype_is_float(data.dtype());

  std::lock_guard lock(fits_mutex());
  fits_clear_errmsg();
  void* mem = nullptr;
  std::size_t mem_size = 0;
  struct MemGuard {
    void*& p;
    ~MemGuard() { std::free(p); }
  } mem_guard{mem};
  FitsHandle h;
  int status = 0;
  fits_create_memfile(&h.f, &mem, &mem_size, 0, std::realloc, &status);
  check(status, name, "cannot create the FITS file in memory");
  std::vector<LONGLONG> naxes(data.shape().rbegin(), data.shape().rend());
  fits_create_imgll(h.f, plan.bitpix_code, static_cast<int>(naxes.size()), naxes.data(), &status);
  check(status, name, "cannot write the image header");

  // cfitsio writes its own standard COMMENT cards; a kept copy of one must not double it.
  std::vector<std::string> written;
  int nexist = 0, nmore = 0;
  fits_get_hdrspace(h.f, &nexist, &nmore, &status);
  for (int k = 1; k <= nexist && status == 0; ++k) {
    char record[FLEN_CARD] = {};
    fits_read_record(h.f, k, record, &status);
    written.emplace_back(record);
  }
  for (const FitsCard& c : img.cards) {
    if (is_structural(c.keyword) || (float_data && c.keyword == "BLANK")) continue;
    std::string record = card_record(c, name, status);
    record.erase(record.find_last_not_of(' ') + 1);
    if (c.commentary) {
      const auto same = std::find_if(written.begin(), written.end(), [&](const std::string& w) {
        return w.substr(0, w.find_last_not_of(' ') + 1) == record;
      });
      if (same != written.end()) {
        written.erase(same);
        continue;
      }
    }
    fits_write_record(h.f, record.c_str(), &status);
  }
  if (img.bscale) {
    const std::string v = format_number(*img.bscale);
    fits_write_record(h.f, card_record({"BSCALE", v, "", false}, name, status).c_str(), &status);
  }
  if (img.bzero) {
    const std::string v = format_number(*img.bzero);
    fits_write_record(h.f, card_record({"BZERO", v, "", false}, name, status).c_str(), &status);
  }
  if (!history.empty()) fits_write_history(h.f, history.c_str(), &status);
  check(status, name, "cannot write the header cards");

  // Re-read the header so cfitsio knows its final size; then, for stored values with explicit
  // scaling, switch the scaling off so the numbers go to the file untouched.
  fits_set_hdustruc(h.f, &status);
  if (img.bscale || img.bzero) fits_set_bscale(h.f, 1.0, 0.0, &status);
  if (data.size() > 0)
    fits_write_img(h.f, plan.datatype, 1, data.size(), const_cast<void*>(data.data()), &status);
  fits_flush_file(h.f, &status);
  LONGLONG head = 0, data_start = 0, data_end = 0;
  fits_get_hduaddrll(h.f, &head, &data_start, &data_end, &status);
  check(status, name, "cannot write the image data");
  fits_close_file(h.f, &status);
  h.f = nullptr;
  check(status, name, "cannot finish the FITS file");
  if (data_end < 0 || static_cast<std::size_t>(data_end) > mem_size)
    throw IoError(name + ": cfitsio reported a file end beyond its buffer");
  const auto* p = static_cast<const std::byte*>(mem);
  return {p, p + data_end};
}

}  // namespace

std::vector<std::byte> serialize_fits(const FitsImage& image, const std::string& history) {
  return serialize(image, history, "FITS output");
}

void write_fits(const std::filesystem::path& path, const FitsImage& image,
                const std::string& history) {
  check_output_path(path);
  const auto bytes = serialize(image, history, path.string());
  write_file_atomic(path, bytes);
}

#endif  // HALFSCOPE_HAS_FITS

}  // namespace halfscope::io
