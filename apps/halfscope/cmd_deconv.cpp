// `halfscope deconv DIRTY PSF -o SKY`: Tikhonov deconvolution of a dirty image (deconv.hpp) with
// one solver in one precision, writing the restored sky (.fits with HISTORY cards, or .npy) and,
// on request, the trace (CSV), a cube-root picture of the sky (PNG, study 000 Fig. 6) and the
// criterion curve (SVG, Fig. 7). The outputs appear together or not at all (ao_output_set.hpp).
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <span>
#include <string>

#include "ao_output_set.hpp"
#include "cli.hpp"
#include "deconv_cli.hpp"
#include "deconv_outputs.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/deconv.hpp"
#include "halfscope/io/dataset.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/fits.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/png.hpp"
#include "svg_chart.hpp"

namespace halfscope::cli {
namespace {

struct DeconvCliOptions {
  std::string dirty, psf, output, solver = "cg", precision = "single", boundary = "circular";
  std::string device, trace, png, plot;
  double lambda = 0.01, step = 0, target = 0;
  std::int64_t iterations = 200, trace_every = 0, half_iterations = 0;
  int backtrack_retries = 20;
  bool half_iterations_given = false, backtrack_retries_given = false;  // from the options' counts
};

// One image of a file: its single array with the size-1 axes dropped (radio FITS images often
// carry degenerate frequency and Stokes axes: NAXIS3 = NAXIS4 = 1), and the FITS header when the
// file is FITS (kept so that a FITS sky carries the dirty image's WCS over). The library checks
// the rest (2-D, shapes, finite values) and names the argument.
struct InputImage {
  Array data;
  std::vector<io::FitsCard> cards;
};

InputImage read_image(const std::string& path) {
  io::Dataset d = io::read_dataset(path);
  if (d.waveforms || d.arrays.size() != 1)
    throw InvalidInput(path + ": expected a file holding one 2-D image (.fits or .npy), found " +
                       std::to_string(d.arrays.size()) + " arrays");
  Array a = d.arrays.front().second;
  Shape squeezed;
  for (const std::int64_t n : a.shape())
    if (n != 1) squeezed.push_back(n);
  if (squeezed.size() != 2)
    throw InvalidInput(path + ": expected a 2-D image (size-1 axes aside), found " + a.describe());
  InputImage out;
  out.data = a.contiguous().reshape(squeezed);
  if (d.fits) out.cards = d.fits->cards;
  return out;
}

// The extension a path must have, checked before any work: InvalidInput naming the option.
void require_extension(const std::string& option, const std::string& path, const char* ext) {
  if (io::extension_of(path) != ext)
    throw InvalidInput(option + ": expected a ." + ext + " file, found '" + path + "'");
  io::check_output_path(path);
}

// The criterion curve: J in FP64 (and as the solver computed it, where it did) against the
// iteration, log-scale y (J falls by decades).
std::string criterion_svg(const deconv::DeconvOptions& o, const deconv::DeconvResult& r) {
  std::vector<Series> series{criterion_series(r.trace, "J (FP64)")};
  Series own = solver_criterion_series(
      r.trace, "J as the solver computed it (" + std::string(precision_name(o.precision)) + ")");
  if (!own.points.empty()) series.push_back(std::move(own));
  ChartOptions c;
  c.title = "Tikhonov criterion, " + std::string(deconv::solver_name(o.solver)) + " in " +
            std::string(precision_name(o.precision));
  c.x_label = "iteration";
  c.y_label = "J(f)";
  c.log_y = true;
  return svg_line_chart(series, c) + "\n";
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  io::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

void run_deconv(const Globals& g, const DeconvCliOptions& c) {
  // Everything that can be checked without the data fails first.
  deconv::DeconvOptions o;
  o.solver = deconv::parse_solver(c.solver);
  // A solver's own option given to another solver is a mistake about the run: said, not ignored.
  const auto only_for = [&](bool given, const char* option, deconv::Solver s) {
    if (given && o.solver != s)
      throw InvalidInput(std::string(option) + ": applies to --solver " +
                         std::string(deconv::solver_name(s)) + ", found --solver " + c.solver);
  };
  only_for(c.half_iterations_given, "--half-iterations", deconv::Solver::HalfThenFloat);
  only_for(c.backtrack_retries_given, "--backtrack-retries", deconv::Solver::Backtracking);
  o.precision = parse_precision(c.precision);
  try {
    o.boundary = parse_boundary(c.boundary);
  } catch (const InvalidInput&) {  // the library lists only the canonical names, not SciPy's
    throw InvalidInput("--boundary: expected circular (alias wrap) or zero (alias fill), found '" +
                       c.boundary + "'");
  }
  o.device = parse_device_kind(c.device.empty() ? g.device : c.device);
  o.lambda = c.lambda;
  o.iterations = c.iterations;
  o.step = c.step;
  o.target_distance = c.target;
  o.backtrack_retries = c.backtrack_retries;
  o.half_iterations = c.half_iterations;
  o.trace_distance = true;
  // The first and last rows are always recorded; without a trace file or a plot only those are
  // needed (the summary), so the FP64 evaluation does not run every iteration.
  const bool want_rows = !c.trace.empty() || !c.plot.empty();
  o.trace_every = c.trace_every > 0 ? c.trace_every
                  : want_rows       ? 1
                                    : std::max<std::int64_t>(c.iterations, 1);
  check_distinct_paths(
      {{"dirty", c.dirty}, {"psf", c.psf}},
      {{"-o", c.output}, {"--trace", c.trace}, {"--png", c.png}, {"--plot", c.plot}});
  const io::Format format = io::format_of(c.output);
  if (format != io::Format::fits && format != io::Format::npy)
    throw InvalidInput("-o: expected a .fits or .npy sky, found '" + c.output + "'");
  io::check_output_path(c.output);
  if (!c.trace.empty()) require_extension("--trace", c.trace, "csv");
  if (!c.png.empty()) require_extension("--png", c.png, "png");
  if (!c.plot.empty()) require_extension("--plot", c.plot, "svg");

  const InputImage dirty = read_image(c.dirty);
  const InputImage psf = read_image(c.psf);
  detail(g, "deconv: " + dirty.data.describe() + ", " + std::string(deconv::solver_name(o.solver)) +
                " in " + c.precision + ", " + std::to_string(o.iterations) + " iterations");
  const deconv::DeconvResult r = deconv::deconvolve(dirty.data, psf.data, o);

  std::cout << deconv_summary(o, r) << std::flush;
  AoOutputSet outputs;
  if (format == io::Format::fits) {
    io::FitsImage image;
    image.data = r.image;
    image.cards = dirty.cards;
    const std::vector<io::FitsCard> history = deconv_history_cards(o, r);
    image.cards.insert(image.cards.end(), history.begin(), history.end());
    io::write_fits(outputs.partial(c.output), image, "");
  } else {
    io::write_npy(outputs.partial(c.output), r.image);
  }
  if (!c.trace.empty()) write_text(outputs.partial(c.trace), trace_csv(r.trace));
  if (!c.png.empty()) {
    io::PngOptions picture;
    picture.scale = io::Scale::cbrt;  // study 000 Fig. 6: faint halo and bright sources together
    io::write_png(outputs.partial(c.png), r.image, picture);
  }
  if (!c.plot.empty()) write_text(outputs.partial(c.plot), criterion_svg(o, r));
  outputs.commit();
  info(g, "wrote " + c.output);
}

}  // namespace

void register_deconv(CLI::App& app, Globals& g) {
  auto c = std::make_shared<DeconvCliOptions>();
  auto* cmd = app.add_subcommand(
      "deconv", "Tikhonov deconvolution of a dirty image by its PSF (study 000), any precision");
  cmd->add_option("dirty", c->dirty, "dirty image g (.fits or .npy, 2-D)")->required();
  cmd->add_option("psf", c->psf, "PSF h, the image's shape, origin at (rows/2, cols/2)")
      ->required();
  cmd->add_option("-o,--output", c->output, "restored sky (.fits with HISTORY cards, or .npy)")
      ->required();
  cmd->add_option("--solver", c->solver,
                  "fixed, optimal, backtracking, half-then-float, cg or wiener (exact)")
      ->capture_default_str();
  cmd->add_option("--precision", c->precision, "double, single, half, mixed or split")
      ->capture_default_str();
  cmd->add_option("--lambda", c->lambda, "Tikhonov weight (>= 0)")->capture_default_str();
  cmd->add_option("--iterations", c->iterations, "operator iterations (the most)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  cmd->add_option("--step", c->step, "fixed step (0: 1 / L from the PSF spectrum)")
      ->capture_default_str();
  cmd->add_option("--boundary", c->boundary,
                  "circular (alias wrap) or zero (alias fill: linear convolution)")
      ->capture_default_str();
  cmd->add_option("--device", c->device, "auto, cpu or cuda (default: the global --device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--target", c->target,
                  "stop once the relative distance to the exact solution is below (0: never)")
      ->capture_default_str();
  cmd->add_option("--trace", c->trace, "write the trace (CSV, one row per traced iteration)");
  cmd->add_option("--trace-every", c->trace_every,
                  "trace every k-th iteration (default 1 with --trace / --plot)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  cmd->add_option("--png", c->png, "write the restored sky as a PNG in cube-root scale");
  cmd->add_option("--plot", c->plot, "write the criterion against the iteration (SVG)");
  cmd->add_option("--backtrack-retries", c->backtrack_retries,
                  "backtracking: halvings per iteration before the run stalls")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--half-iterations", c->half_iterations,
                  "half-then-float: the most iterations in half (0: iterations / 2)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  cmd->callback([&g, c, cmd] {
    c->half_iterations_given = cmd->count("--half-iterations") > 0;
    c->backtrack_retries_given = cmd->count("--backtrack-retries") > 0;
    run_deconv(g, *c);
  });
}

}  // namespace halfscope::cli
