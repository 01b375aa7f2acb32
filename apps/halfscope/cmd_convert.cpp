// `halfscope convert IN OUT`: any supported file to any supported format (by extension).
#include <memory>
#include <optional>
#include <string>

#include "cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

struct ConvertOptions {
  std::string input, output;
  std::string scale = "linear", colormap = "gray", dtype, member;
  std::optional<double> vmin, vmax;
  bool fill_gaps = false;
  std::string png_options_given;  // "--scale, --vmin": the PNG options on the command line
};

void run_convert(const Globals& g, const ConvertOptions& o) {
  // Fail on a bad output before reading anything large.
  check_distinct_paths({{"input", o.input}}, {{"output", o.output}});
  const io::Format out_format = io::format_of(o.output);
  const io::Format in_format = io::format_of(o.input);
  // An option that cannot apply is a mistake about the files, said rather than ignored.
  if (out_format != io::Format::png && !o.png_options_given.empty())
    throw InvalidInput(o.png_options_given + ": applies to PNG outputs; " + o.output + " is " +
                       std::string(io::format_name(out_format)));
  if (!o.member.empty() && in_format != io::Format::npz)
    throw InvalidInput("--member " + o.member + ": picks an array of an .npz input; " + o.input +
                       " is " + std::string(io::format_name(in_format)));
  if (o.fill_gaps && in_format != io::Format::mseed)
    throw InvalidInput("--fill-gaps: joins the segments of MiniSEED inputs; " + o.input + " is " +
                       std::string(io::format_name(in_format)));
  io::check_output_path(o.output);
  io::WriteOptions w;
  w.png.scale = io::parse_scale(o.scale);
  w.png.colormap = io::parse_colormap(o.colormap);
  w.png.vmin = o.vmin;
  w.png.vmax = o.vmax;
  if (!o.dtype.empty()) w.dtype = parse_dtype(o.dtype);
  // A float16 input is widened to float32 for FITS (exact, as conv and simulate do), but a
  // float16 the user asked for cannot be written there: say so before reading anything.
  if (out_format == io::Format::fits && (w.dtype == DType::f16 || w.dtype == DType::bf16))
    throw InvalidInput("--dtype " + o.dtype + ": " + o.output + ": FITS has no " +
                       std::string(dtype_name(*w.dtype)) +
                       " images: expected --dtype float32 (exact for " +
                       std::string(dtype_name(*w.dtype)) + " values) or an .npy output");
  w.member = o.member;
  w.history = "halfscope " HALFSCOPE_VERSION " convert from " +
              std::filesystem::path(o.input).filename().string();

  io::ReadOptions r;
  r.fill_gaps = o.fill_gaps;
  // FITS to FITS keeps the stored integers and their BSCALE/BZERO unless the dtype changes.
  r.fits_raw = in_format == io::Format::fits && out_format == io::Format::fits && !w.dtype;
  const io::Dataset d = io::read_dataset(o.input, r);
  if (d.waveforms)
    for (const auto& gap : d.waveforms->gaps)
      warn(o.input + ": " + gap.id + ": " +
           (gap.missing_samples > 0
                ? "gap of " + std::to_string(gap.missing_samples) + " samples"
                : "overlap of " + std::to_string(-gap.missing_samples) + " samples") +
           " from " + io::format_iso8601(gap.start_ns, 6) + " to " +
           io::format_iso8601(gap.end_ns, 6) +
           (o.fill_gaps && gap.missing_samples > 0 ? " (zero-filled)" : ""));
  const io::WriteReport report = io::write_dataset(o.output, d, w);
  for (const auto& note : report.notes) warn(o.output + ": " + note);
  info(g, "wrote " + o.output + " (" + std::string(io::format_name(out_format)) + ")");
}

}  // namespace

void register_convert(CLI::App& app, Globals& g) {
  auto o = std::make_shared<ConvertOptions>();
  auto* cmd = app.add_subcommand(
      "convert", "convert between .npy, .npz, .fits, .mseed, .sac, .csv and .png (by extension)");
  cmd->add_option("input", o->input, "input file")->required();
  cmd->add_option("output", o->output, "output file (written atomically)")->required();
  cmd->add_option("--scale", o->scale, "PNG intensity scale: linear, log or cbrt")
      ->capture_default_str();
  cmd->add_option("--colormap", o->colormap, "PNG colormap: gray or perceptual")
      ->capture_default_str();
  cmd->add_option("--vmin", o->vmin, "PNG: value drawn black (default: the minimum)");
  cmd->add_option("--vmax", o->vmax, "PNG: value drawn white (default: the maximum)");
  cmd->add_option("--dtype", o->dtype,
                  "convert the values (float16, float32, int16, ...) first; without it, float16 "
                  "and bfloat16 arrays are written to FITS as float32 (exact), with a note");
  cmd->add_option("--member", o->member, "npz input: the array to write to a single-array format");
  cmd->add_flag("--fill-gaps", o->fill_gaps,
                "MiniSEED input: join each channel, zero-filling gaps");
  cmd->callback([&g, o, cmd] {
    for (const char* name : {"--scale", "--colormap", "--vmin", "--vmax"})
      if (cmd->count(name) > 0)
        o->png_options_given += (o->png_options_given.empty() ? "" : ", ") + std::string(name);
    run_convert(g, *o);
  });
}

}  // namespace halfscope::cli
