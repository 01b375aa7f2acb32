#include "halfscope/io/dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "halfscope/core/error.hpp"
#include "halfscope/io/csv.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/mseed.hpp"

namespace halfscope::io {

namespace fs = std::filesystem;

namespace {
struct Extension {
  std::string_view ext;
  Format format;
};
constexpr std::array<Extension, 10> kExtensions{{{"npy", Format::npy},
                                                 {"npz", Format::npz},
                                                 {"fits", Format::fits},
                                                 {"fit", Format::fits},
                                                 {"fts", Format::fits},
                                                 {"mseed", Format::mseed},
                                                 {"miniseed", Format::mseed},
                                                 {"ms", Format::mseed},
                                                 {"sac", Format::sac},
                                                 {"csv", Format::csv}}};
}  // namespace

std::string_view format_name(Format f) noexcept {
  switch (f) {
    case Format::npy:
      return "npy";
    case Format::npz:
      return "npz";
    case Format::fits:
      return "FITS";
    case Format::mseed:
      return "MiniSEED";
    case Format::sac:
      return "SAC";
    case Format::csv:
      return "CSV";
    case Format::png:
      return "PNG";
  }
  return "unknown";
}

Format format_of(const fs::path& path) {
  const std::string ext = extension_of(path);
  if (ext == "png") return Format::png;
  for (const auto& e : kExtensions)
    if (ext == e.ext) return e.format;
  // A folder has no file type: say what it is rather than that its "extension" is unknown.
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw IoError(path.string() + ": is a folder, expected a file");
  throw InvalidInput(path.string() + ": unknown file type '" +
                     (ext.empty() ? "(none)" : "." + ext) +
                     "': expected .npy, .npz, .fits (.fit, .fts), .mseed (.miniseed, .ms), .sac, "
                     ".csv or .png");
}

Dataset read_dataset(const fs::path& path, const ReadOptions& options) {
  Dataset d;
  d.source = path;
  d.format = format_of(path);
  switch (d.format) {
    case Format::npy:
      d.arrays.emplace_back("", read_npy(path));
      break;
    case Format::npz:
      d.arrays = read_npz(path);
      break;
    case Format::csv:
      d.arrays.emplace_back("", read_csv(path));
      break;
    case Format::png:
      d.arrays.emplace_back("", read_png(path));
      break;
    case Format::fits: {
      FitsImage img = read_fits(path, options.fits_raw ? FitsValues::raw : FitsValues::physical);
      d.arrays.emplace_back("", img.data);
      img.data = Array();
      d.fits = std::move(img);
      break;
    }
    case Format::mseed: {
      Waveforms w = read_mseed(path);
      d.waveforms = options.fill_gaps ? merge_traces(w, true) : std::move(w);
      break;
    }
    case Format::sac: {
      SacFile s = read_sac(path);
      d.waveforms = Waveforms{{s.trace}, {}};
      d.sac = std::move(s);
      break;
    }
  }
  return d;
}

namespace {

// `a` (of d.source) in the requested dtype for `out`. Errors name both files: the library's
// conversion messages know only the array.
Array convert_dtype(const Array& a, const WriteOptions& o, WriteReport& report, const Dataset& d,
                    const fs::path& out) {
  if (!o.dtype || *o.dtype == a.dtype()) return a;
  const std::string what =
      d.source.string() + " -> " + out.string() + " as " + std::string(dtype_name(*o.dtype));
  ConversionReport r;
  Array converted;
  try {
    converted = a.astype(*o.dtype, &r);
  } catch (const InvalidInput& e) {
    std::string why = e.what();
    if (why.starts_with("astype: ")) why.erase(0, 8);
    throw InvalidInput(what + ": " + why);
  }
  require_finite(r, what);
  report.conversion += r;
  return converted;
}

// The one array a single-array format gets from `d`.
Array single_array(const fs::path& out, const Dataset& d, const WriteOptions& o) {
  if (d.waveforms) {
    const auto& tr = d.waveforms->traces;
    if (tr.empty()) throw InvalidInput(d.source.string() + ": holds no trace to write");
    if (tr.size() == 1) return tr.front().data;
    // Several channels of equal length and dtype stack into channels x samples.
    for (const auto& t : tr)
      if (t.size() != tr.front().size() || t.data.dtype() != tr.front().data.dtype())
        throw InvalidInput(d.source.string() + ": " + std::to_string(tr.size()) +
                           " traces of different lengths or types (" + tr.front().id() + " has " +
                           std::to_string(tr.front().size()) + " samples, " + t.id() + " " +
                           std::to_string(t.size()) + "): cannot write one array to " +
                           out.string() + "; try --fill-gaps or a MiniSEED output");
    // The rows of one array share one time axis: channels sampled at other rates, or starting
    // half a sample or more apart, would be written as if they were aligned.
    for (const auto& t : tr) {
      const double rate = tr.front().sample_rate;
      const double apart_ns = std::abs(static_cast<double>(t.start_ns - tr.front().start_ns));
      if (t.sample_rate != rate || apart_ns * rate >= 0.5e9)
        throw InvalidInput(
            d.source.string() + ": " + t.id() + " " +
            (t.sample_rate != rate
                 ? "is sampled at " + std::to_string(t.sample_rate) + " Hz, " + tr.front().id() +
                       " at " + std::to_string(rate) + " Hz"
                 : "starts at " + format_iso8601(t.start_ns, 6) + ", " + tr.front().id() + " at " +
                       format_iso8601(tr.front().start_ns, 6)) +
            ": cannot write them as the rows of one array to " + out.string() +
            " (it has one time axis); expected channels of one rate and start, or a MiniSEED "
            "output");
    }
    Array stacked(tr.front().data.dtype(),
                  {static_cast<std::int64_t>(tr.size()), tr.front().size()});
    const std::int64_t row = tr.front().data.nbytes();
    for (std::size_t i = 0; i < tr.size(); ++i) {
      const Array c = tr[i].data.contiguous();
      std::memcpy(static_cast<std::byte*>(stacked.data()) + static_cast<std::int64_t>(i) * row,
                  c.data(), static_cast<std::size_t>(row));
    }
    return stacked;
  }
  if (d.arrays.size() == 1) return d.arrays.front().second;
  std::string names;
  for (const auto& [name, a] : d.arrays) {
    if (name == o.member) return a;
    names += (names.empty() ? "" : ", ") + name;
  }
  if (!o.member.empty())
    throw InvalidInput(d.source.string() + ": no member '" + o.member + "' (members: " + names +
                       ")");
  throw InvalidInput(d.source.string() + ": holds " + std::to_string(d.arrays.size()) +
                     " arrays (" + names + "): choose one with --member NAME to write " +
                     out.string());
}

Waveforms waveforms_for(const fs::path& out, const Dataset& d) {
  if (!d.waveforms)
    throw InvalidInput(out.string() + ": " + std::string(format_name(format_of(out))) +
                       " needs waveforms with sample rate and start time; " + d.source.string() +
                       " holds arrays (convert from MiniSEED or SAC)");
  return *d.waveforms;
}

}  // namespace

WriteReport write_dataset(const fs::path& path, const Dataset& d, const WriteOptions& o) {
  WriteReport report;
  const Format f = format_of(path);
  check_output_path(path);
  switch (f) {
    case Format::npy:
      write_npy(path, convert_dtype(single_array(path, d, o), o, report, d, path));
      break;
    case Format::csv:
      write_csv(path, convert_dtype(single_array(path, d, o), o, report, d, path));
      break;
    case Format::png:
      write_png(path, single_array(path, d, o), o.png);
      break;
    case Format::fits: {
      FitsImage img = d.fits ? *d.fits : FitsImage{};
      if (o.dtype == DType::f16 || o.dtype == DType::bf16)
        throw InvalidInput(path.string() + ": FITS has no " + std::string(dtype_name(*o.dtype)) +
                           " images: convert to float32 (exact for " +
                           std::string(dtype_name(*o.dtype)) + " values), or write .npy");
      img.data = convert_dtype(single_array(path, d, o), o, report, d, path);
      // As the other commands' FITS outputs (write_array): FITS has no 16-bit floats, and float32
      // holds every float16 and bfloat16 value exactly, so the values are unchanged.
      if (img.data.dtype() == DType::f16 || img.data.dtype() == DType::bf16) {
        report.notes.push_back(std::string(dtype_name(img.data.dtype())) +
                               " values written as float32 (exact): FITS has no " +
                               std::string(dtype_name(img.data.dtype())) + " images");
        img.data = img.data.astype(DType::f32);
      }
      if (o.dtype) img.bscale.reset(), img.bzero.reset();  // new values carry no stored scaling
      write_fits(path, img, o.history);
      break;
    }
    case Format::npz: {
      NamedArrays out;
      if (d.waveforms) {
        for (const auto& t : d.waveforms->traces)
          out.emplace_back(t.id(), convert_dtype(t.data, o, report, d, path));
      } else {
        int i = 0;
        for (const auto& [name, a] : d.arrays)
          out.emplace_back(name.empty() ? "arr_" + std::to_string(i++) : name,
                           convert_dtype(a, o, report, d, path));
      }
      write_npz(path, out);
      break;
    }
    case Format::mseed: {
      Waveforms w = waveforms_for(path, d);
      for (auto& t : w.traces) t.data = convert_dtype(t.data, o, report, d, path);
      write_mseed(path, w);
      break;
    }
    case Format::sac: {
      const Waveforms w = waveforms_for(path, d);
      if (w.traces.size() != 1)
        throw InvalidInput(path.string() + ": SAC holds one trace; " + d.source.string() + " has " +
                           std::to_string(w.traces.size()) +
                           " (write MiniSEED, or one SAC per channel)");
      SacFile s = d.sac ? *d.sac : make_sac(w.traces.front());
      const Array& samples = w.traces.front().data;
      // SAC stores float32: other types must convert exactly, or we say so.
      Array f32 =
          samples.dtype() == DType::f32 ? samples : samples.astype(DType::f32, &report.conversion);
      if (samples.dtype() != DType::f32) {
        const Array back = f32.astype(samples.dtype());
        const Array c = samples.contiguous();
        if (std::memcmp(back.data(), c.data(), static_cast<std::size_t>(c.nbytes())) != 0)
          throw InvalidInput(path.string() + ": SAC stores float32 and the " +
                             std::string(dtype_name(samples.dtype())) + " samples of " +
                             w.traces.front().id() + " are not all exact in float32");
      }
      s.trace = w.traces.front();
      s.trace.data = f32;
      write_sac(path, s);
      break;
    }
  }
  if (report.conversion.nan > 0)
    report.notes.push_back(std::to_string(report.conversion.nan) + " NaN values carried through");
  if (report.conversion.underflow > 0)
    report.notes.push_back(std::to_string(report.conversion.underflow) +
                           " nonzero values underflowed to zero");
  if (report.conversion.subnormal > 0)
    report.notes.push_back(std::to_string(report.conversion.subnormal) +
                           " values became subnormal (reduced precision)");
  return report;
}

}  // namespace halfscope::io
