// MiniSEED 2 reader and writer over libmseed 2.x, both in memory: records are parsed one by one
// from a buffer (msr_parse) and packed into a buffer (msr_pack), so the file system sees only
// read_file_bytes and write_file_atomic.
#include "halfscope/io/mseed.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

#if HALFSCOPE_HAS_MSEED
#include <libmseed.h>
#endif

namespace halfscope::io {

#if !HALFSCOPE_HAS_MSEED

namespace {
[[noreturn]] void no_mseed() {
  throw Unsupported("MiniSEED support was not built: install libmseed-dev and rebuild");
}
}  // namespace

Waveforms parse_mseed(std::span<const std::byte>, std::string_view) {
  no_mseed();
}
Waveforms read_mseed(const std::filesystem::path&) {
  no_mseed();
}
std::vector<MseedRecord> scan_mseed(const std::filesystem::path&) {
  no_mseed();
}
Array read_mseed_record(InputFile&, const std::string&, const MseedRecord&) {
  no_mseed();
}
std::vector<std::byte> serialize_mseed(const Waveforms&, const MseedWriteOptions&) {
  no_mseed();
}
void write_mseed(const std::filesystem::path&, const Waveforms&, const MseedWriteOptions&) {
  no_mseed();
}

#else

namespace {

// libmseed 2 logs through one process-wide pair of print functions with no user pointer. They are
// installed once and append to `g_log`; every use of libmseed holds `mseed_mutex()`, so the
// messages collected belong to the call that holds it.
std::string g_log;

std::mutex& mseed_mutex() {
  static std::mutex m;
  return m;
}

void collect_log(char* message) {
  std::string s(message ? message : "");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n') c = ' ';
  if (s.empty()) return;
  if (g_log.size() < 1000) g_log += (g_log.empty() ? "" : "; ") + s;
}

// Takes the lock, installs the handlers (once) and clears the log.
class LibmseedSession {
 public:
  LibmseedSession() : lock_(mseed_mutex()) {
    static std::once_flag once;
    std::call_once(once, [] {
      ms_loginit(collect_log, "", collect_log, "");
      // Pin what libmseed would otherwise take from UNPACK_* environment variables, so that
      // decoding (and check_record's view of it) never depends on the environment.
      unpackheaderbyteorder = -1;
      unpackdatabyteorder = -1;
      unpackencodingformat = -1;
      unpackencodingfallback = DE_STEIM1;
    });
    g_log.clear();
  }
  /// " (libmseed: ...)" or "" when libmseed said nothing.
  static std::string messages() { return g_log.empty() ? "" : " (libmseed: " + g_log + ")"; }

 private:
  std::lock_guard<std::mutex> lock_;
};

// Zeros after the copy of the input: more than libmseed's largest over-read (192 bytes, below).
constexpr std::size_t kPadding = 512;
// Bytes of a file held at once while scanning its records.
constexpr std::int64_t kScanChunk = std::int64_t{16} << 20;

// Frees a record on every path out. `borrowed` records point at our samples, which must not be
// freed with them.
struct RecordGuard {
  MSRecord* msr = nullptr;
  bool borrowed = false;
  ~RecordGuard() {
    if (!msr) return;
    if (borrowed) msr->datasamples = nullptr;
    msr_free(&msr);
  }
};

bool valid_record_length(std::int64_t n) {
  return n >= MINRECLEN && n <= MAXRECLEN && (n & (n - 1)) == 0;
}

// libmseed 2.19 reads or writes past a record in several ways, which this check rules out before
// it is called: the INT16/INT32/FLOAT/ASCII and older decoders trust the sample count without
// comparing it with the data bytes (fuzz/fuzz_mseed.cpp crashed in msr_decode_int16); a
// Blockette 2000 whose length field is 1..3 underflows to a 64 KiB copy, and one shorter than 15
// bytes has its fields byte-swapped past the end of libmseed's copy of it; a later Blockette 1000
// can announce a longer record than the one being parsed. (Its other small over-reads, blockette
// structs larger than the lengths it checks, by up to 192 bytes for Blockette 500, stay inside
// the zero padding parse_mseed adds.) This walks the blockette chain exactly as msr_unpack does.
// Returns an empty string when the record is safe.
std::string check_record(const unsigned char* p, std::int64_t reclen) {
  // Header byte order as libmseed decides it: the order in which year and day look valid.
  const auto u16le = [&](std::int64_t at) {
    return static_cast<unsigned>(p[at] | (p[at + 1] << 8));
  };
  const auto u16be = [&](std::int64_t at) {
    return static_cast<unsigned>((p[at] << 8) | p[at + 1]);
  };
  const bool little = u16le(20) >= 1900 && u16le(20) <= 2100 && u16le(22) >= 1 && u16le(22) <= 366;
  const auto u16 = [&](std::int64_t at) { return little ? u16le(at) : u16be(at); };
  const std::int64_t samples = u16(30), data_offset = u16(44);
  int encoding = DE_STEIM1;  // libmseed's fallback without a Blockette 1000 (pinned at startup)
  std::int64_t off = u16(46);
  for (int guard = 0; off != 0 && off < reclen && guard < 4096; ++guard) {
    const unsigned type = u16(off), next = u16(off + 2);
    std::int64_t len = 0;
    switch (type) {
      case 100:
        len = 12;
        break;
      case 200:
      case 320:
      case 390:
        len = 28;
        break;
      case 201:
        len = 36;
        break;
      case 300:
      case 310:
        len = 32;
        break;
      case 395:
      case 400:
        len = 16;
        break;
      case 500:
      case 1000:
      case 1001:
        len = 8;
        break;
      case 2000:
        len = u16(off + 4);
        break;
      default:
        len = 0;
    }
    if (len == 0 || off + len > reclen) break;  // where libmseed stops too
    // Below 15 bytes libmseed's copy is shorter than the fields it byte-swaps in it.
    if (type == 2000 && len < 15)
      return "Blockette 2000 length " + std::to_string(len) + " is shorter than its own header";
    if (type == 1000) {
      const int exponent = p[off + 6];
      if (exponent < 7 || exponent > 20 || (std::int64_t{1} << exponent) != reclen)
        return "Blockette 1000 gives record length 2^" + std::to_string(exponent) + ", expected " +
               std::to_string(reclen);
      encoding = p[off + 4];
    }
    if (next != 0 && next < off + len) break;
    off = next;
  }
  if (samples == 0) return {};
  if (data_offset < 48 || data_offset >= reclen)
    return "data offset " + std::to_string(data_offset) + " is outside the record";
  std::int64_t bytes_per_sample = 0;  // Steim decoders bound themselves by the data bytes
  switch (encoding) {
    case DE_ASCII:
      bytes_per_sample = 1;
      break;
    case DE_INT16:
    case DE_GEOSCOPE163:
    case DE_GEOSCOPE164:
    case DE_CDSN:
    case DE_SRO:
    case DE_DWWSSN:
      bytes_per_sample = 2;
      break;
    case DE_GEOSCOPE24:
      bytes_per_sample = 3;
      break;
    case DE_INT32:
    case DE_FLOAT32:
      bytes_per_sample = 4;
      break;
    case DE_FLOAT64:
      bytes_per_sample = 8;
      break;
    default:
      break;
  }
  if (samples * bytes_per_sample > reclen - data_offset)
    return "header announces " + std::to_string(samples) + " samples of " +
           std::to_string(bytes_per_sample) + " bytes, the record holds " +
           std::to_string(reclen - data_offset) + " bytes of data";
  return {};
}

// SEED codes are printable ASCII; anything else means a corrupt header (and would not survive
// libmseed's C strings on the way back out).
bool printable(const std::string& code) {
  return std::all_of(code.begin(), code.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

// One record's samples as a Trace (numeric records only).
Trace record_trace(const MSRecord* msr, const std::string& name, std::int64_t offset) {
  const auto where = [&] { return name + ": record at byte offset " + std::to_string(offset); };
  Trace t;
  t.network = msr->network;
  t.station = msr->station;
  t.location = msr->location;
  t.channel = msr->channel;
  for (std::string* code : {&t.network, &t.station, &t.location, &t.channel}) {
    if (!printable(*code))
      throw IoError(where() + ": codes hold bytes that are not printable ASCII (corrupt header?)");
    code->erase(code->find_last_not_of(' ') + 1);  // SEED pads with blanks; a NUL can hide some
  }
  t.sample_rate = msr_samprate(const_cast<MSRecord*>(msr));
  if (!(t.sample_rate > 0.0) || !std::isfinite(t.sample_rate))
    throw IoError(where() + " (" + t.id() + "): expected a positive sample rate, found " +
                  std::to_string(t.sample_rate));
  if (msr->starttime > std::numeric_limits<std::int64_t>::max() / 1000 ||
      msr->starttime < std::numeric_limits<std::int64_t>::min() / 1000)
    throw IoError(where() + " (" + t.id() + "): start time out of range");
  t.start_ns = msr->starttime * 1000;  // libmseed 2 counts microseconds
  DType dtype;
  switch (msr->sampletype) {
    case 'i':
      dtype = DType::i32;
      break;
    case 'f':
      dtype = DType::f32;
      break;
    case 'd':
      dtype = DType::f64;
      break;
    default:
      throw IoError(where() + ": unexpected sample type '" + std::string(1, msr->sampletype) + "'");
  }
  t.data = Array(dtype, Shape{msr->numsamples});
  std::memcpy(t.data.data(), msr->datasamples, static_cast<std::size_t>(t.data.nbytes()));
  return t;
}

}  // namespace

namespace {

// The bytes of a miniSEED input from `offset` on: at least min(size - offset, MAXRECLEN) of them
// at the returned pointer, followed by kPadding zeros (libmseed reads a little past a record).
class RecordWindow {
 public:
  using Read = std::function<void(std::byte* out, std::int64_t count, std::int64_t offset)>;
  RecordWindow(std::int64_t size, std::int64_t chunk, Read read)
      : size_(size), chunk_(std::max<std::int64_t>(chunk, MAXRECLEN)), read_(std::move(read)) {}

  char* at(std::int64_t offset) {
    const std::int64_t want = std::min<std::int64_t>(size_ - offset, MAXRECLEN);
    if (offset < base_ || offset + want > base_ + held_) {
      held_ = std::min(size_ - offset, chunk_);
      buf_.assign(static_cast<std::size_t>(held_) + kPadding, '\0');
      read_(reinterpret_cast<std::byte*>(buf_.data()), held_, offset);
      base_ = offset;
    }
    return buf_.data() + (offset - base_);
  }

 private:
  std::int64_t size_, chunk_;
  Read read_;
  std::vector<char> buf_;
  std::int64_t base_ = 0, held_ = 0;
};

// Parses and decodes every record of `name` (`size` bytes read through `window`), checking each
// as read_mseed does, and calls on_record(msr, offset, record length) for every numeric record.
template <class OnRecord>
void walk_records(const std::string& name, std::int64_t size, RecordWindow& window,
                  const OnRecord& on_record) {
  if (size == 0) throw IoError(name + ": empty file, expected miniSEED records");
  LibmseedSession session;
  RecordGuard rec;
  std::int64_t offset = 0;
  while (offset < size) {
    const std::int64_t remaining = size - offset;
    const auto at = [&] { return name + ": record at byte offset " + std::to_string(offset); };
    if (remaining < 48)
      throw IoError(at() + ": truncated: a miniSEED header is 48 bytes, " +
                    std::to_string(remaining) + " remain");
    char* p = window.at(offset);
    const int avail = static_cast<int>(std::min<std::int64_t>(remaining, MAXRECLEN));
    std::int64_t reclen = ms_detect(p, avail);
    if (reclen < 0)
      throw IoError(at() + ": not a miniSEED 2 record (no valid fixed header found)" +
                    LibmseedSession::messages());
    if (reclen == 0) {
      // No Blockette 1000 and no next record to measure against: the last record of a file
      // written without Blockette 1000 spans the rest of the file.
      if (!valid_record_length(remaining))
        throw IoError(at() + ": cannot determine the record length (no Blockette 1000, and " +
                      std::to_string(remaining) + " remaining bytes is not a record length)");
      reclen = remaining;
    }
    if (!valid_record_length(reclen))
      throw IoError(at() + ": record length " + std::to_string(reclen) +
                    " is not a power of two from 128 to 1048576");
    if (reclen > remaining)
      throw IoError(at() + ": truncated: record length " + std::to_string(reclen) + ", " +
                    std::to_string(remaining) + " bytes remain");
    if (const std::string why = check_record(reinterpret_cast<const unsigned char*>(p), reclen);
        !why.empty())
      throw IoError(at() + ": " + why);
    const int rc = msr_parse(p, static_cast<int>(reclen), &rec.msr, static_cast<int>(reclen), 1, 0);
    if (rc != 0 || !rec.msr)
      throw IoError(at() + ": " +
                    (rc > 0 ? "truncated: " + std::to_string(rc) + " more bytes needed"
                            : std::string(ms_errorstr(rc))) +
                    LibmseedSession::messages());
    // libmseed decodes a record whose last Steim sample disagrees with the frame's check value and
    // only warns: the samples may be wrong, and halfscope does not pass wrong data on silently.
    if (g_log.find("integrity check") != std::string::npos)
      throw IoError(at() + ": corrupt compressed data" + LibmseedSession::messages());
    g_log.clear();
    if (rec.msr->numsamples > 0 && rec.msr->sampletype != 'a') on_record(rec.msr, offset, reclen);
    offset += reclen;
  }
}

// Reads from a file (IoError naming it when it holds fewer bytes than it did when opened).
RecordWindow::Read file_reader(const std::string& name, std::shared_ptr<InputFile> file) {
  return [name, file](std::byte* out, std::int64_t count, std::int64_t offset) {
    file->read_exact(out, count, offset, name);
  };
}

}  // namespace

Waveforms parse_mseed(std::span<const std::byte> bytes, std::string_view name_view) {
  const std::string name(name_view);
  const auto size = static_cast<std::int64_t>(bytes.size());
  RecordWindow window(size, size, [&](std::byte* out, std::int64_t count, std::int64_t offset) {
    std::memcpy(out, bytes.data() + offset, static_cast<std::size_t>(count));
  });
  Waveforms records;
  walk_records(name, size, window, [&](const MSRecord* msr, std::int64_t offset, std::int64_t) {
    records.traces.push_back(record_trace(msr, name, offset));
  });
  return merge_traces(records, false);
}

std::vector<MseedRecord> scan_mseed(const std::filesystem::path& path) {
  const std::string name = path.string();
  auto file = std::make_shared<InputFile>(open_input_file(path));
  RecordWindow window(file->size, kScanChunk, file_reader(name, file));
  std::vector<MseedRecord> records;
  walk_records(name, file->size, window,
               [&](const MSRecord* msr, std::int64_t offset, std::int64_t length) {
                 Trace t = record_trace(msr, name, offset);
                 MseedRecord r{std::move(t), DType::f32, 0, offset, length};
                 r.dtype = r.trace.data.dtype();
                 r.samples = r.trace.size();
                 r.trace.data = Array();
                 records.push_back(std::move(r));
               });
  return records;
}

Array read_mseed_record(InputFile& file, const std::string& name, const MseedRecord& record) {
  // The record alone, as if it were the whole input: walk_records checks and decodes it.
  RecordWindow window(record.length, record.length,
                      [&](std::byte* out, std::int64_t count, std::int64_t offset) {
                        file.read_exact(out, count, record.offset + offset, name);
                      });
  Array samples;
  walk_records(name, record.length, window, [&](const MSRecord* msr, std::int64_t, std::int64_t) {
    samples = record_trace(msr, name, record.offset).data;
  });
  if (samples.size() != record.samples || samples.dtype() != record.dtype)
    throw IoError(name + ": record at byte offset " + std::to_string(record.offset) +
                  " changed since the file was scanned");
  return samples;
}

Waveforms read_mseed(const std::filesystem::path& path) {
  const auto bytes = read_file_bytes(path);
  return parse_mseed(bytes, path.string());
}

namespace {

void append_record(char* record, int length, void* out) {
  auto* v = static_cast<std::vector<std::byte>*>(out);
  const auto* p = reinterpret_cast<const std::byte*>(record);
  v->insert(v->end(), p, p + length);
}

void copy_code(char* dst, const std::string& code, std::size_t max, const char* what,
               const std::string& id) {
  if (code.size() > max)
    throw InvalidInput(id + ": miniSEED 2 allows a " + what + " code of at most " +
                       std::to_string(max) + " characters, got '" + code + "'");
  if (!printable(code))
    throw InvalidInput(id + ": miniSEED codes are printable ASCII; the " + what + " code is not");
  std::memcpy(dst, code.c_str(), code.size() + 1);
}

// The rate libmseed reads back from the SEED factor/multiplier pair that `rate` packs into.
double factor_multiplier_rate(double rate) {
  std::int16_t f = 0, m = 0;
  if (ms_genfactmult(rate, &f, &m) != 0 || f == 0 || m == 0) return 0.0;
  if (f > 0 && m > 0) return double(f) * double(m);
  if (f > 0) return -double(f) / double(m);
  if (m > 0) return -double(m) / double(f);
  return 1.0 / (double(f) * double(m));
}

// Whether consecutive differences fit `bits` signed bits (what Steim encodings can store).
bool differences_fit(const std::int32_t* x, std::int64_t n, int bits) {
  const std::int64_t hi = (std::int64_t{1} << (bits - 1)) - 1, lo = -hi - 1;
  for (std::int64_t k = 1; k < n; ++k) {
    const std::int64_t d = std::int64_t{x[k]} - x[k - 1];
    if (d < lo || d > hi) return false;
  }
  return true;
}

void pack_trace(const Trace& t, const MseedWriteOptions& options, std::vector<std::byte>& out) {
  const std::string id = t.id();
  if (t.data.ndim() != 1)
    throw InvalidInput(id + ": miniSEED traces are 1-D, got " + t.data.describe());
  if (!(t.sample_rate > 0.0) || !std::isfinite(t.sample_rate))
    throw InvalidInput(id + ": expected a positive sample rate, got " +
                       std::to_string(t.sample_rate));
  Array data = (t.data.on_device() ? t.data.to(Memory::host) : t.data).contiguous();
  switch (data.dtype()) {
    case DType::i8:
    case DType::i16:
    case DType::u8:
    case DType::u16:
      data = data.astype(DType::i32);
      break;
    case DType::f16:
    case DType::bf16:
      data = data.astype(DType::f32);
      break;
    case DType::i32:
    case DType::f32:
    case DType::f64:
      break;
    default:
      throw InvalidInput(id + ": miniSEED stores int32, float32 or float64 samples, got " +
                         std::string(dtype_name(data.dtype())) + " (convert first)");
  }
  if (data.size() > std::numeric_limits<int>::max() / 8)
    throw InvalidInput(id + ": too many samples for one libmseed pack call");

  RecordGuard rec;
  rec.borrowed = true;
  rec.msr = msr_init(nullptr);
  if (!rec.msr) throw std::bad_alloc();
  MSRecord* msr = rec.msr;
  copy_code(msr->network, t.network, 2, "network", id);
  copy_code(msr->station, t.station, 5, "station", id);
  copy_code(msr->location, t.location, 2, "location", id);
  copy_code(msr->channel, t.channel, 3, "channel", id);
  msr->dataquality = 'D';
  // Nearest microsecond (floor division keeps times before 1970 right).
  const std::int64_t us =
      t.start_ns >= 0 ? (t.start_ns + 500) / 1000 : -((-t.start_ns + 499) / 1000);
  msr->starttime = us;
  msr->samprate = t.sample_rate;
  msr->reclen = options.record_length;
  msr->byteorder = 1;  // big-endian, as SEED prescribes and most software writes
  const std::int64_t n = data.size();
  switch (data.dtype()) {
    case DType::i32: {
      const auto* x = data.data_as<std::int32_t>();
      msr->sampletype = 'i';
      msr->encoding = DE_INT32;
      if (options.int_encoding == MseedIntEncoding::steim2 && differences_fit(x, n, 30))
        msr->encoding = DE_STEIM2;
      if (options.int_encoding == MseedIntEncoding::steim1 && differences_fit(x, n, 32))
        msr->encoding = DE_STEIM1;
      break;
    }
    case DType::f32:
      msr->sampletype = 'f', msr->encoding = DE_FLOAT32;
      break;
    default:
      msr->sampletype = 'd', msr->encoding = DE_FLOAT64;
      break;
  }
  // Blockette 1001 carries the microseconds the fixed header's 100 µs ticks cannot; Blockette
  // 100 the rate, when the factor/multiplier pair would change it (msr_pack fills both in).
  blkt_1001_s b1001{};
  if (!msr_addblockette(msr, reinterpret_cast<char*>(&b1001), sizeof b1001, 1001, 0))
    throw InvalidInput(id + ": cannot add Blockette 1001" + LibmseedSession::messages());
  if (factor_multiplier_rate(t.sample_rate) != t.sample_rate) {
    blkt_100_s b100{};
    b100.samprate = static_cast<float>(t.sample_rate);
    if (!msr_addblockette(msr, reinterpret_cast<char*>(&b100), sizeof b100, 100, 0))
      throw InvalidInput(id + ": cannot add Blockette 100" + LibmseedSession::messages());
  }
  msr->datasamples = const_cast<void*>(data.data());
  msr->numsamples = n;
  std::int64_t packed = 0;
  const int records = msr_pack(msr, append_record, &out, &packed, 1, 0);
  if (records < 0 || packed != n)
    throw InvalidInput(id + ": libmseed could not pack the samples (" + std::to_string(packed) +
                       " of " + std::to_string(n) + " packed)" + LibmseedSession::messages());
}

}  // namespace

std::vector<std::byte> serialize_mseed(const Waveforms& waveforms,
                                       const MseedWriteOptions& options) {
  if (!valid_record_length(options.record_length))
    throw InvalidInput("miniSEED record length must be a power of two from 128 to 1048576, got " +
                       std::to_string(options.record_length));
  LibmseedSession session;
  std::vector<std::byte> out;
  for (const Trace& t : waveforms.traces)
    if (t.size() > 0) pack_trace(t, options, out);  // an empty trace has no record to carry it
  return out;
}

void write_mseed(const std::filesystem::path& path, const Waveforms& waveforms,
                 const MseedWriteOptions& options) {
  check_output_path(path);
  const auto bytes = serialize_mseed(waveforms, options);
  write_file_atomic(path, bytes);
}

#endif  // HALFSCOPE_HAS_MSEED

}  // namespace halfscope::io
