// SAC binary reader and writer (header version 6), written by hand: the format is a fixed header
// and a float32 array, so no library is needed.
#include "halfscope/io/sac.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::io {

namespace {

constexpr std::int64_t kFloatWords = 70, kIntWords = 40, kCharBytes = 192;
constexpr std::int64_t kNvhdrWord = 76;  // NVHDR's position counted in 4-byte words
constexpr std::int64_t kNsPerMs = 1'000'000;
// Start times a SAC file may have here: whole years inside the int64 ns range (1677-09-21 to
// 2262-04-11), so that moving the reference time to the start's ms can never overflow.
const std::int64_t kMinStart = utc_to_ns(1678, 1, 0, 0, 0, 0);
const std::int64_t kMaxStart = utc_to_ns(2262, 1, 0, 0, 0, 0) - 1;
constexpr std::array<int, 13> kMarkers = {
    sac_float::o,      sac_float::a,      sac_float::t0,     sac_float::t0 + 1, sac_float::t0 + 2,
    sac_float::t0 + 3, sac_float::t0 + 4, sac_float::t0 + 5, sac_float::t0 + 6, sac_float::t0 + 7,
    sac_float::t0 + 8, sac_float::t0 + 9, sac_float::f};

std::uint32_t load_word(const std::byte* p, bool swap) {
  std::uint32_t w;
  std::memcpy(&w, p, 4);
  return swap ? __builtin_bswap32(w) : w;
}

void store_word(std::byte* p, std::uint32_t w, bool swap) {
  if (swap) w = __builtin_bswap32(w);
  std::memcpy(p, &w, 4);
}

// Swap needed to turn the file's order into the host's: the file is big-endian and the host is not,
// or the other way round.
bool needs_swap(bool file_big_endian) {
  return file_big_endian != (std::endian::native == std::endian::big);
}

bool undefined(float v) {
  return v == kSacUndefinedFloat;
}

// The sample rate a DELTA stands for, divided in float32 as ObsPy does: DELTA = 0.01f (which is
// 0.0099999998) gives exactly 100 Hz, where a double division would give 100.0000002.
double rate_of_delta(float delta) {
  return static_cast<double>(1.0f / delta);
}

// An 8-character field without trailing blanks or NULs; SAC's "-12345" means empty.
std::string get_code(const SacFile& s, int offset) {
  std::string v(s.chars.data() + offset, 8);
  const auto end = v.find_last_not_of(std::string(" \0", 2));
  v.erase(end == std::string::npos ? 0 : end + 1);
  if (const auto nul = v.find('\0'); nul != std::string::npos) v.erase(nul);
  return v == "-12345" ? std::string() : v;
}

void set_code(SacFile& s, int offset, const std::string& value, const char* field) {
  if (value.size() > 8)
    throw InvalidInput(std::string("SAC ") + field + " holds at most 8 characters, got '" + value +
                       "'");
  const std::string text = value.empty() ? std::string("-12345") : value;
  std::fill_n(s.chars.begin() + offset, 8, ' ');
  std::copy(text.begin(), text.end(), s.chars.begin() + offset);
}

// Reference time from NZYEAR..NZMSEC: std::nullopt with `why` set if a field is out of range. An
// undefined NZYEAR means "no reference time" and counts as the epoch.
std::optional<std::int64_t> reference_ns(const SacFile& s, std::string& why) {
  const auto& i = s.ints;
  if (i[sac_int::nzyear] == kSacUndefinedInt) return 0;
  struct Field {
    int index;
    const char* name;
    std::int32_t lo, hi;
  };
  // NZSEC 60 admits a leap second (it becomes the next minute's 0, as ObsPy does).
  const Field fields[] = {{sac_int::nzjday, "NZJDAY", 1, 366},
                          {sac_int::nzhour, "NZHOUR", 0, 23},
                          {sac_int::nzmin, "NZMIN", 0, 59},
                          {sac_int::nzsec, "NZSEC", 0, 60},
                          {sac_int::nzmsec, "NZMSEC", 0, 999}};
  for (const Field& f : fields) {
    const std::int32_t v = i[f.index];
    if (v < f.lo || v > f.hi) {
      why = std::string("expected ") + f.name + " in " + std::to_string(f.lo) + ".." +
            std::to_string(f.hi) + ", found " + std::to_string(v);
      return std::nullopt;
    }
  }
  try {
    return utc_to_ns(i[sac_int::nzyear], i[sac_int::nzjday], i[sac_int::nzhour], i[sac_int::nzmin],
                     i[sac_int::nzsec], std::int64_t{i[sac_int::nzmsec]} * kNsPerMs);
  } catch (const InvalidInput& e) {
    why = std::string("NZYEAR: ") + e.what();
    return std::nullopt;
  }
}

// Start of the first sample: reference + B (an undefined B counts as 0).
std::optional<std::int64_t> start_ns(const SacFile& s, std::string& why) {
  const auto ref = reference_ns(s, why);
  if (!ref) return std::nullopt;
  const float b = s.floats[sac_float::b];
  if (undefined(b)) return *ref;
  // 1e9 s is over three decades: anything larger is garbage, and could overflow the ns count.
  if (!std::isfinite(b) || std::abs(b) > 1e9f) {
    why = "expected a finite B within 1e9 s, found " + std::to_string(b);
    return std::nullopt;
  }
  const std::int64_t start = *ref + std::llround(static_cast<double>(b) * 1e9);
  if (start < kMinStart || start > kMaxStart) {
    why = "reference time + B is outside 1678..2261";
    return std::nullopt;
  }
  return start;
}

// Makes the header fields that describe the samples agree with s.trace, touching only those that
// disagree (see serialize_sac). `data` is the trace's samples as float32.
void sync_header(SacFile& s, const float* data, std::int64_t n) {
  const Trace& t = s.trace;
  if (!(t.sample_rate > 0.0) || !std::isfinite(t.sample_rate))
    throw InvalidInput(t.id() + ": SAC needs a positive finite sample rate, got " +
                       std::to_string(t.sample_rate));
  if (t.start_ns < kMinStart || t.start_ns > kMaxStart)
    throw InvalidInput(t.id() + ": SAC start time " + format_iso8601(t.start_ns) +
                       " is outside 1678..2261");
  if (n > std::numeric_limits<std::int32_t>::max())
    throw InvalidInput(t.id() + ": SAC holds at most 2^31-1 samples, got " + std::to_string(n));
  auto& fl = s.floats;
  auto& in = s.ints;
  bool timing_changed = in[sac_int::npts] != n;
  in[sac_int::npts] = static_cast<std::int32_t>(n);
  in[sac_int::nvhdr] = kSacHeaderVersion;
  in[sac_int::iftype] = kSacItime;
  in[sac_int::leven] = 1;

  if (rate_of_delta(fl[sac_float::delta]) != t.sample_rate) {
    fl[sac_float::delta] = static_cast<float>(1.0 / t.sample_rate);
    timing_changed = true;
  }

  std::string why;
  const auto old_start = start_ns(s, why);
  if (!old_start || *old_start != t.start_ns) {
    // New reference: the start truncated to the ms; B holds the sub-ms rest, exact in float32.
    const std::int64_t ref = t.start_ns - (((t.start_ns % kNsPerMs) + kNsPerMs) % kNsPerMs);
    const auto old_ref = old_start ? reference_ns(s, why) : std::nullopt;
    if (old_ref) {
      const double shift = static_cast<double>(*old_ref - ref) * 1e-9;
      for (int m : kMarkers)
        if (!undefined(fl[m])) fl[m] = static_cast<float>(static_cast<double>(fl[m]) + shift);
    }
    const UtcFields u = ns_to_utc(ref);
    in[sac_int::nzyear] = static_cast<std::int32_t>(u.year);
    in[sac_int::nzjday] = static_cast<std::int32_t>(u.day_of_year);
    in[sac_int::nzhour] = static_cast<std::int32_t>(u.hour);
    in[sac_int::nzmin] = static_cast<std::int32_t>(u.minute);
    in[sac_int::nzsec] = static_cast<std::int32_t>(u.second);
    in[sac_int::nzmsec] = static_cast<std::int32_t>(u.nanosecond / kNsPerMs);
    fl[sac_float::b] = static_cast<float>(static_cast<double>(t.start_ns - ref) * 1e-9);
    timing_changed = true;
  }
  if (timing_changed || undefined(fl[sac_float::e]))
    fl[sac_float::e] = static_cast<float>(static_cast<double>(fl[sac_float::b]) +
                                          static_cast<double>(std::max<std::int64_t>(n - 1, 0)) *
                                              static_cast<double>(fl[sac_float::delta]));

  if (n > 0) {
    float lo = data[0], hi = data[0];
    double sum = 0.0;
    for (std::int64_t k = 0; k < n; ++k) {
      lo = std::min(lo, data[k]);
      hi = std::max(hi, data[k]);
      sum += data[k];
    }
    if (timing_changed || fl[sac_float::depmin] != lo || fl[sac_float::depmax] != hi) {
      fl[sac_float::depmin] = lo;
      fl[sac_float::depmax] = hi;
      fl[sac_float::depmen] = static_cast<float>(sum / static_cast<double>(n));
    }
  }

  const std::pair<int, const std::string*> codes[] = {{sac_char::knetwk, &t.network},
                                                      {sac_char::kstnm, &t.station},
                                                      {sac_char::khole, &t.location},
                                                      {sac_char::kcmpnm, &t.channel}};
  const char* names[] = {"KNETWK", "KSTNM", "KHOLE", "KCMPNM"};
  for (int k = 0; k < 4; ++k)
    if (get_code(s, codes[k].first) != *codes[k].second)
      set_code(s, codes[k].first, *codes[k].second, names[k]);
}

// The trace's samples as a contiguous 1-D float32 array.
Array float_samples(const Trace& t) {
  if (t.data.empty()) return Array(DType::f32, Shape{0});
  if (t.data.ndim() != 1)
    throw InvalidInput(t.id() + ": SAC holds 1-D traces, got " + t.data.describe());
  const Array host = t.data.on_device() ? t.data.to(Memory::host) : t.data;
  return host.dtype() == DType::f32 ? host.contiguous() : host.astype(DType::f32);
}

}  // namespace

SacHeader parse_sac_header(std::span<const std::byte> header, std::int64_t size,
                           std::string_view name) {
  const std::string file(name);
  if (size < kSacHeaderBytes || std::ssize(header) < kSacHeaderBytes)
    throw IoError(file + ": truncated: a SAC header is 632 bytes, file has " +
                  std::to_string(size));
  const std::byte* p = header.data();
  const auto little = static_cast<std::int32_t>(load_word(p + 4 * kNvhdrWord, needs_swap(false)));
  const auto big = static_cast<std::int32_t>(load_word(p + 4 * kNvhdrWord, needs_swap(true)));
  SacHeader h;
  if (little == kSacHeaderVersion) {
    h.big_endian = false;
  } else if (big == kSacHeaderVersion) {
    h.big_endian = true;
  } else {
    throw IoError(file + ": not a SAC file: expected header version NVHDR=6, found " +
                  std::to_string(little) + " (little-endian) / " + std::to_string(big) +
                  " (big-endian)");
  }
  const bool swap = needs_swap(h.big_endian);

  SacFile& s = h.sac;
  for (std::int64_t k = 0; k < kFloatWords; ++k)
    s.floats[k] = std::bit_cast<float>(load_word(p + 4 * k, swap));
  for (std::int64_t k = 0; k < kIntWords; ++k)
    s.ints[k] = static_cast<std::int32_t>(load_word(p + 4 * (kFloatWords + k), swap));
  std::memcpy(s.chars.data(), p + 4 * (kFloatWords + kIntWords), kCharBytes);

  const std::int32_t npts = s.ints[sac_int::npts];
  if (npts < 0) throw IoError(file + ": expected NPTS >= 0, found " + std::to_string(npts));
  if (s.ints[sac_int::iftype] != kSacItime || s.ints[sac_int::leven] != 1)
    throw IoError(file +
                  ": only evenly sampled time series are supported (IFTYPE=1, LEVEN=1), "
                  "found IFTYPE=" +
                  std::to_string(s.ints[sac_int::iftype]) +
                  ", LEVEN=" + std::to_string(s.ints[sac_int::leven]));
  const std::int64_t data_bytes = std::int64_t{npts} * 4;
  if (size - kSacHeaderBytes != data_bytes)
    throw IoError(file + (size - kSacHeaderBytes < data_bytes ? ": truncated" : ": size mismatch") +
                  ": header says NPTS=" + std::to_string(npts) + " (" + std::to_string(data_bytes) +
                  " bytes of samples), file has " + std::to_string(size - kSacHeaderBytes) +
                  " bytes after the header");
  const float delta = s.floats[sac_float::delta];
  if (!(delta > 0.0f) || !std::isfinite(rate_of_delta(delta)))
    throw IoError(file + ": expected DELTA > 0 with a finite 1 / DELTA, found " +
                  std::to_string(delta));

  std::string why;
  const auto start = start_ns(s, why);
  if (!start) throw IoError(file + ": bad start time: " + why);

  Trace& t = s.trace;
  t.network = get_code(s, sac_char::knetwk);
  t.station = get_code(s, sac_char::kstnm);
  t.location = get_code(s, sac_char::khole);
  t.channel = get_code(s, sac_char::kcmpnm);
  t.start_ns = *start;
  t.sample_rate = rate_of_delta(delta);
  h.samples = npts;
  return h;
}

void sac_samples_to_native(const SacHeader& h, std::byte* data, std::int64_t count) {
  const bool swap = needs_swap(h.big_endian);
  for (std::int64_t k = 0; k < count; ++k) {
    const std::uint32_t w = load_word(data + 4 * k, swap);
    std::memcpy(data + 4 * k, &w, 4);
  }
}

SacFile parse_sac(std::span<const std::byte> bytes, std::string_view name) {
  SacHeader h = parse_sac_header(bytes, std::ssize(bytes), name);
  Trace& t = h.sac.trace;
  t.data = Array(DType::f32, Shape{h.samples});
  auto* out = static_cast<std::byte*>(t.data.data());
  std::copy_n(bytes.data() + kSacHeaderBytes, h.samples * 4, out);
  sac_samples_to_native(h, out, h.samples);
  return std::move(h.sac);
}

SacFile read_sac(const std::filesystem::path& path) {
  const auto bytes = read_file_bytes(path);
  return parse_sac(bytes, path.string());
}

SacHeader read_sac_header(const std::filesystem::path& path) {
  InputFile f = open_input_file(path);
  std::vector<std::byte> header(static_cast<std::size_t>(kSacHeaderBytes));
  header.resize(static_cast<std::size_t>(f.read_at(header.data(), kSacHeaderBytes, 0)));
  return parse_sac_header(header, f.size, path.string());
}

SacFile make_sac(const Trace& trace) {
  SacFile s;
  s.floats.fill(kSacUndefinedFloat);
  s.ints.fill(kSacUndefinedInt);
  s.chars.fill(' ');
  for (int field = 0; field < kCharBytes / 8; ++field)
    if (field != 2) std::memcpy(s.chars.data() + 8 * field, "-12345", 6);  // field 2: KEVNM's tail
  s.ints[sac_int::iztype] = kSacIb;
  s.ints[sac_int::idep] = kSacIunkn;
  s.ints[sac_int::lpspol] = 0;
  s.ints[sac_int::lovrok] = 1;
  s.ints[sac_int::lcalda] = 1;
  s.trace = trace;
  s.trace.data = float_samples(trace);
  sync_header(s, s.trace.data.data_as<float>(), s.trace.data.size());
  return s;
}

std::vector<std::byte> serialize_sac(const SacFile& sac, bool big_endian) {
  SacFile s = sac;
  const Array data = float_samples(sac.trace);
  const float* samples = data.data_as<float>();
  const std::int64_t n = data.size();
  sync_header(s, samples, n);

  const bool swap = needs_swap(big_endian);
  std::vector<std::byte> out(static_cast<std::size_t>(kSacHeaderBytes + 4 * n));
  std::byte* p = out.data();
  for (std::int64_t k = 0; k < kFloatWords; ++k)
    store_word(p + 4 * k, std::bit_cast<std::uint32_t>(s.floats[k]), swap);
  for (std::int64_t k = 0; k < kIntWords; ++k)
    store_word(p + 4 * (kFloatWords + k), static_cast<std::uint32_t>(s.ints[k]), swap);
  std::memcpy(p + 4 * (kFloatWords + kIntWords), s.chars.data(), kCharBytes);
  for (std::int64_t k = 0; k < n; ++k)
    store_word(p + kSacHeaderBytes + 4 * k, std::bit_cast<std::uint32_t>(samples[k]), swap);
  return out;
}

void write_sac(const std::filesystem::path& path, const SacFile& sac, bool big_endian) {
  const auto bytes = serialize_sac(sac, big_endian);
  write_file_atomic(path, bytes);
}

}  // namespace halfscope::io
