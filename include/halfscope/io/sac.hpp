// SAC binary files (Seismic Analysis Code, header version 6), read and written by hand.
//
// Layout: a 632-byte header of 70 float32 words, 40 int32 words and 192 characters (24 fields of
// 8 characters, except KEVNM which takes 16), then NPTS float32 samples. Files exist in both byte
// orders: the reader detects the order from NVHDR (word 76), which must read 6 in the file's
// order, and accepts only evenly sampled time series (IFTYPE=ITIME, LEVEN=1). Undefined header
// values are -12345 (float and int) and "-12345" (characters).
//
// Start time = reference time (NZYEAR, NZJDAY, NZHOUR, NZMIN, NZSEC, NZMSEC) + B seconds; a file
// whose reference time is undefined is taken to start B seconds after 1970-01-01 (as ObsPy does).
// The sample rate is 1 / DELTA divided in float32, as ObsPy does, so DELTA = 0.01f (stored as
// 0.0099999998) reads as exactly 100 Hz; a rate that is not a float32 comes back rounded to one.
// Samples are float32, so int32 beyond 2^24 and float64 data lose bits when written.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "halfscope/io/waveform.hpp"

namespace halfscope::io {

/// Word indices into SacFile::floats (the ones halfscope reads or writes).
namespace sac_float {
inline constexpr int delta = 0, depmin = 1, depmax = 2, scale = 3, b = 5, e = 6, o = 7, a = 8;
inline constexpr int t0 = 10, f = 20, depmen = 56;  // t0..t9 are 10..19
}  // namespace sac_float

/// Word indices into SacFile::ints.
namespace sac_int {
inline constexpr int nzyear = 0, nzjday = 1, nzhour = 2, nzmin = 3, nzsec = 4, nzmsec = 5;
inline constexpr int nvhdr = 6, npts = 9, iftype = 15, idep = 16, iztype = 17;
inline constexpr int leven = 35, lpspol = 36, lovrok = 37, lcalda = 38;
}  // namespace sac_int

/// Byte offsets into SacFile::chars of the 8-character fields halfscope maps to a Trace.
namespace sac_char {
inline constexpr int kstnm = 0, kevnm = 8, khole = 24, kcmpnm = 160, knetwk = 168;
}  // namespace sac_char

/// SAC enumerated values used here.
inline constexpr std::int32_t kSacItime = 1, kSacIunkn = 5, kSacIb = 9, kSacHeaderVersion = 6;
inline constexpr float kSacUndefinedFloat = -12345.0f;
inline constexpr std::int32_t kSacUndefinedInt = -12345;

/// Size in bytes of the fixed SAC header.
inline constexpr std::int64_t kSacHeaderBytes = 632;

/// One SAC file: the trace it holds and its complete raw header (native byte order), kept so that
/// writing what was read reproduces every header field, including those halfscope ignores.
/// Network, station, location and channel come from KNETWK, KSTNM, KHOLE and KCMPNM.
struct SacFile {
  Trace trace;  // float32 samples; start = reference time + B; rate = 1 / DELTA
  std::array<float, 70> floats{};
  std::array<std::int32_t, 40> ints{};
  std::array<char, 192> chars{};
};

/// Parses a SAC file held in memory (either byte order). Throws IoError starting with `name` for
/// a short or malformed header, a size that disagrees with NPTS, DELTA <= 0, an unevenly sampled
/// or non-time-series file, or a reference time out of range.
SacFile parse_sac(std::span<const std::byte> bytes, std::string_view name);

/// Reads a SAC file (see parse_sac).
SacFile read_sac(const std::filesystem::path& path);

/// A SAC file's header alone, for readers of parts of its samples: `sac` as parse_sac gives it
/// but with no samples in sac.trace.data, `samples` its NPTS (the samples lie from byte
/// kSacHeaderBytes on, 4 bytes each) and the file's byte order.
struct SacHeader {
  SacFile sac;
  std::int64_t samples = 0;
  bool big_endian = false;
};

/// The header of a SAC file of `size` bytes from its first bytes (at least kSacHeaderBytes),
/// checked as parse_sac checks it (NPTS against `size` included): the same IoError messages.
SacHeader parse_sac_header(std::span<const std::byte> header, std::int64_t size,
                           std::string_view name);

/// Reads only the header of a SAC file (see parse_sac_header).
SacHeader read_sac_header(const std::filesystem::path& path);

/// Brings `count` float32 samples of the file's byte order into the machine's, in place.
void sac_samples_to_native(const SacHeader& h, std::byte* data, std::int64_t count);

/// A SacFile for `trace` with a complete valid header: every field undefined except NPTS, DELTA,
/// B, E, DEPMIN/DEPMAX/DEPMEN, the reference time (the trace's start truncated to the ms, with
/// the sub-ms rest in B), IFTYPE=ITIME, IZTYPE=IB, LEVEN=1, NVHDR=6 and the four codes.
/// Samples are converted to float32. Throws InvalidInput for a bad trace (not 1-D, rate <= 0,
/// a code longer than its 8-character field).
SacFile make_sac(const Trace& trace);

/// The bytes of a SAC file. Header fields that describe the samples (NPTS, DELTA, B, E, the
/// reference time, DEPMIN/DEPMAX/DEPMEN, KNETWK/KSTNM/KHOLE/KCMPNM) are updated from
/// `sac.trace` only where they disagree with it, so serializing what parse_sac returned gives back
/// the same bytes, while an edited trace is never contradicted by a stale header. When the start
/// time changes, the reference time moves and the defined time markers (O, A, T0..T9, F) are
/// shifted to keep their absolute times.
std::vector<std::byte> serialize_sac(const SacFile& sac, bool big_endian = false);

/// Writes a SAC file atomically (see serialize_sac); little-endian unless `big_endian`.
void write_sac(const std::filesystem::path& path, const SacFile& sac, bool big_endian = false);

}  // namespace halfscope::io
