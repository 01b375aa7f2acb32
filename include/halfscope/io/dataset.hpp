// Any supported file, read into one form and written to any other format: what `halfscope
// convert` and every subcommand that takes "an image" or "waveforms" use. The format comes from
// the file extension.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/io/fits.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/png.hpp"
#include "halfscope/io/sac.hpp"
#include "halfscope/io/waveform.hpp"

namespace halfscope::io {

enum class Format { npy, npz, fits, mseed, sac, csv, png };

/// The format of a path from its extension: .npy, .npz, .fits/.fit/.fts, .mseed/.miniseed/.ms,
/// .sac, .csv, .png. Throws InvalidInput naming the path and listing the extensions (IoError "is
/// a folder" for an existing folder).
Format format_of(const std::filesystem::path& path);
std::string_view format_name(Format f) noexcept;

/// The contents of one file. Arrays for .npy/.npz/.fits/.csv/.png (npz: several, named), waveforms
/// for .mseed/.sac; the FITS header and the SAC header ride along so that writing the same format
/// again keeps them.
struct Dataset {
  std::filesystem::path source;
  Format format = Format::npy;
  NamedArrays arrays;  // one unnamed entry for single-array formats
  std::optional<Waveforms> waveforms;
  std::optional<FitsImage> fits;  // header cards (data moved into `arrays`)
  std::optional<SacFile> sac;     // full SAC header of a SAC input
};

struct ReadOptions {
  bool fill_gaps = false;  // waveforms: merge segments of a channel, zero-filling gaps
  bool fits_raw = false;   // FITS: keep stored integers and BSCALE/BZERO (for FITS -> FITS)
};

Dataset read_dataset(const std::filesystem::path& path, const ReadOptions& options = {});

struct WriteOptions {
  PngOptions png;
  std::optional<DType> dtype;  // convert arrays / waveform samples before writing
  std::string member;          // npz input -> single-array output: which member
  std::string history;         // FITS HISTORY line
};

/// What a write did that the user should know (e.g. values that underflowed in a dtype change).
struct WriteReport {
  ConversionReport conversion;
  std::vector<std::string> notes;
};

/// Writes `data` in the format of `path`, atomically. Throws InvalidInput when the data does not
/// fit the format (several arrays into .npy without --member, an array into MiniSEED, which
/// needs times and rates, float16 / bfloat16 asked for in FITS), NumericalError when a dtype change
/// overflows; conversion errors name the source and `path`. FITS has no 16-bit floats: a float16
/// or bfloat16 array is written as float32 (exact), with a note in the report.
WriteReport write_dataset(const std::filesystem::path& path, const Dataset& data,
                          const WriteOptions& options = {});

}  // namespace halfscope::io
