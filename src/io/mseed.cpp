// MiniSEED 2 reader and writer over libmseed 2.x, both in memory: records are parsed one by one
// from a buffer (msr_parse) and packed into a buffer (msr_pack), so the file system sees only
// read_file_bytes and write_file_atomic.
#include "halfscope/io/mseed.hpp"

#include <cmath>
#include <cstring>
#include <limits>
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

Waveforms parse_mseed(std::span<const std::byte>, std::string_view) { no_mseed(); }
Waveforms read_mseed(const std::filesystem::path&) { no_mseed(); }
std::vector<std::byte> serialize_mseed(const Waveforms&, const MseedWriteOptions&) { no_mseed(); }
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
    std::call_once(once, [] { ms_loginit(collect_log, "", collect_log, ""); });
    g_log.clear();
  }
  /// " (libmseed: ...)" or "" when libmseed said nothing.
  static std::string messages() { return g_log.empty() ? "" : " (libmseed: " + g_log + ")"; }

 private:
  std::lock_guard<std::mutex> lock_;
};

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

// One record's samples as a Trace (numeric records only).
Trace record_trace(const MSRecord* msr, const std::string& name, std::int64_t offset) {
  const auto where = [&] { return name + ": record at byte offset " + std::to_string(offset); };
  Trace t;
  t.network = msr->network;
  t.station = msr->station;
  t.location = msr->location;
  t.channel = msr->channel;
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
    case 'i': dtype = DType::i32; break;
    case 'f': dtype = DType::f32; break;
    case 'd': dtype = DType::f64; break;
    default:
      throw IoError(where() + ": unexpected sample type '" + std::string(1, msr->sampletype) + "'");
  }
  t.data = Array(dtype, Shape{msr->numsamples});
  std::memcpy(t.data.data(), msr->datasamples, static_cast<std::size_t>(t.data.nbytes()));
  return t;
}

}  // namespace

Waveforms parse_mseed(std::span<const std::byte> bytes, std::string_view name_view) {
  const std::string name(name_view);
  if (bytes.empty()) throw IoError(name + ": empty file, expected miniSEED records");
  // libmseed takes `char*`; give it a private copy rather than casting const away.
  std::vector<char> buf(reinterpret_cast<const char*>(bytes.data()),
                        reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  const auto size = static_cast<std::int64_t>(buf.size());

  LibmseedSession session;
  RecordGuard rec;
  Waveforms records;
  std::int64_t offset = 0;
  while (offset < size) {
    const std::int64_t remaining = size - offset;
    const auto at = [&] { return name + ": record at byte offset " + std::to_string(offset); };
    if (remaining < 48)
      throw IoError(at() + ": truncated: a miniSEED header is 48 bytes, " +
                    std::to_string(remaining) + " remain");
    char* p = buf.data() + offset;
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
    if (reclen > remaining)
      throw IoError(at() + ": truncated: record length " + std::to_string(reclen) + ", " +
                    std::to_string(remaining) + " bytes remain");
    const int rc = msr_parse(p, static_cast<int>(reclen), &rec.msr, static_cast<int>(reclen), 1, 0);
    if (rc != 0 || !rec.msr)
      throw IoError(at() + ": " +
                    (rc > 0 ? "truncated: " + std::to_string(rc) + " more bytes needed"
                            : std::string(ms_errorstr(rc))) +
                    LibmseedSession::messages());
    if (rec.msr->numsamples > 0 && rec.msr->sampletype != 'a')
      records.traces.push_back(record_trace(rec.msr, name, offset));
    offset += reclen;
  }
  return merge_traces(records, false);
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
  if (t.data.ndim() != 1) throw InvalidInput(id + ": miniSEED traces are 1-D, got " + t.data.describe());
  if (!(t.sample_rate > 0.0) || !std::isfinite(t.sample_rate))
    throw InvalidInput(id + ": expected a positive sample rate, got " + std::to_string(t.sample_rate));
  Array data = (t.data.on_device() ? t.data.to(Memory::host) : t.data).contiguous();
  switch (data.dtype()) {
    case DType::i8:
    case DType::i16:
    case DType::u8:
    case DType::u16: data = data.astype(DType::i32); break;
    case DType::f16:
    case DType::bf16: data = data.astype(DType::f32); break;
    case DType::i32:
    case DType::f32:
    case DType::f64: break;
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
  const std::int64_t us = t.start_ns >= 0 ? (t.start_ns + 500) / 1000 : -((-t.start_ns + 499) / 1000);
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
    case DType::f32: msr->sampletype = 'f', msr->encoding = DE_FLOAT32; break;
    default: msr->sampletype = 'd', msr->encoding = DE_FLOAT64; break;
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
