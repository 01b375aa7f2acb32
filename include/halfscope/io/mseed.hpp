// MiniSEED 2 through libmseed 2.x (the Debian libmseed2 package).
//
// Reading parses the records one by one from memory (msr_parse), decoding whatever libmseed
// decodes (INT16, INT32, FLOAT32, FLOAT64, STEIM1, STEIM2, and the older integer encodings) into
// int32, float32 or float64 samples. Consecutive records of one channel that continue each other
// are joined into one Trace; a hole or an overlap starts a new Trace and is listed in
// Waveforms::gaps (use merge_traces(..., true) to zero-fill). Text (log) records carry no samples
// and are skipped. libmseed's own messages are captured and put into the IoError, never printed.
// A Steim record that decodes but fails its integrity check (last sample != the frame's reverse
// integration constant) is an IoError too: ObsPy only warns there, halfscope does not pass
// possibly wrong samples on silently. Codes must be printable ASCII (trailing blanks dropped).
//
// libmseed 2.19 reads past a record on some malformed headers; every record is checked before
// libmseed sees it (sample count against data bytes, the blockette chain), see mseed.cpp.
//
// miniSEED 2 keeps times to the microsecond: writing rounds start_ns to the nearest µs (with a
// Blockette 1001 for the sub-100µs digits), so a write/read round trip returns start times to the
// µs, and samples and codes exactly. Sample rates come back exactly when the factor/multiplier
// pair libmseed derives from them holds them exactly (integer rates, 1/n Hz, 19.98 Hz, ...);
// otherwise a Blockette 100 carries the rate as a float32, which is what is read back.
//
// Built without libmseed, every function here throws Unsupported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/io/file.hpp"
#include "halfscope/io/waveform.hpp"

namespace halfscope::io {

/// How integer samples are encoded when writing.
enum class MseedIntEncoding : std::uint8_t {
  steim2,  // compressed; a trace whose sample differences do not fit 30 bits falls back to int32
  steim1,  // compressed; a trace whose differences do not fit 32 bits falls back to int32
  int32,   // plain big-endian 32-bit integers
};

/// Options of write_mseed.
struct MseedWriteOptions {
  MseedIntEncoding int_encoding = MseedIntEncoding::steim2;
  int record_length = 4096;  // bytes, a power of two from 128 to 1048576
};

/// Parses miniSEED 2 records held in memory. Throws IoError starting with `name` (and the byte
/// offset of the bad record) for anything libmseed cannot parse or decode, a truncated last
/// record, a non-positive sample rate, or an empty input.
Waveforms parse_mseed(std::span<const std::byte> bytes, std::string_view name);

/// Reads a miniSEED file (see parse_mseed).
Waveforms read_mseed(const std::filesystem::path& path);

/// One record with samples (not a text record) of a miniSEED file, found by scan_mseed: its
/// trace's codes, start time and rate (`trace.data` empty), the type and count of its samples,
/// and where it lies in the file.
struct MseedRecord {
  Trace trace;
  DType dtype = DType::i32;
  std::int64_t samples = 0;
  std::int64_t offset = 0, length = 0;  // bytes
};

/// The records of a miniSEED file in file order, the file read in pieces of 16 MiB (never whole)
/// and every record parsed, decoded and checked as read_mseed does (the same IoError messages),
/// its samples then dropped: what a reader of windows of the data needs to place every record
/// as read_mseed and merge_traces place it.
std::vector<MseedRecord> scan_mseed(const std::filesystem::path& path);

/// The samples of one record found by scan_mseed (int32, float32 or float64) of the file `name`,
/// opened as `file`, decoded and checked again; IoError naming the file when the record is no
/// longer what the scan found.
Array read_mseed_record(InputFile& file, const std::string& name, const MseedRecord& record);

/// The miniSEED records of every trace, in memory. int32 traces are written as Steim-2 (or the
/// chosen encoding), float32 as FLOAT32, float64 as FLOAT64; int8/int16/uint8/uint16 are widened
/// to int32 and float16/bfloat16 to float32. Codes must fit miniSEED 2 (network and location 2
/// characters, station 5, channel 3). Throws InvalidInput otherwise, or for int64/uint32/uint64
/// data (convert to int32 or float64 first). Waveforms::gaps is ignored: gaps are implied by the
/// traces' start times.
std::vector<std::byte> serialize_mseed(const Waveforms& waveforms,
                                       const MseedWriteOptions& options = {});

/// Writes a miniSEED file atomically (see serialize_mseed).
void write_mseed(const std::filesystem::path& path, const Waveforms& waveforms,
                 const MseedWriteOptions& options = {});

}  // namespace halfscope::io
