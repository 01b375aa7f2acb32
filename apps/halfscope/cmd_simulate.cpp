// `halfscope simulate ...`: the studies' synthetic inputs.
#include <memory>

#include "cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/sim/kernels.hpp"

namespace halfscope::cli {

void register_simulate(CLI::App& app, Globals& g) {
  auto* sim = app.add_subcommand("simulate", "make synthetic inputs (kernels, images)");
  sim->require_subcommand(1);

  struct KernelOptions {
    std::int64_t width = 15;
    double sigma = 0;
    std::string dtype = "float64", output;
  };
  auto k = std::make_shared<KernelOptions>();
  auto* gk = sim->add_subcommand("gaussian-kernel", "study 000's normalised Gaussian kernel");
  gk->add_option("--width", k->width, "kernel width in pixels")->capture_default_str();
  gk->add_option("--sigma", k->sigma, "standard deviation in pixels (default: width / 6)");
  gk->add_option("--dtype", k->dtype, "float64, float32 or float16")->capture_default_str();
  gk->add_option("-o,--output", k->output, "output file (.npy, .fits, ...)")->required();
  gk->callback([&g, k] {
    const Array a = sim::gaussian_kernel(k->width, k->sigma);
    write_array(
        g, k->output, a.astype(parse_dtype(k->dtype)),
        "halfscope " HALFSCOPE_VERSION " gaussian kernel width " + std::to_string(k->width));
  });

  struct ImageOptions {
    std::int64_t rows = 512, cols = 512;
    std::uint64_t seed = 1;
    double lo = 0, hi = 1;
    std::string dtype = "float32", output;
  };
  auto im = std::make_shared<ImageOptions>();
  auto* ri = sim->add_subcommand("random-image", "uniform random image, reproducible from --seed");
  ri->add_option("--rows", im->rows)->capture_default_str();
  ri->add_option("--cols", im->cols)->capture_default_str();
  ri->add_option("--seed", im->seed)->capture_default_str();
  ri->add_option("--low", im->lo)->capture_default_str();
  ri->add_option("--high", im->hi)->capture_default_str();
  ri->add_option("--dtype", im->dtype)->capture_default_str();
  ri->add_option("-o,--output", im->output, "output file")->required();
  ri->callback([&g, im] {
    const Array a = sim::random_image(im->rows, im->cols, im->seed, im->lo, im->hi);
    write_array(g, im->output, a.astype(parse_dtype(im->dtype)),
                "halfscope " HALFSCOPE_VERSION " random image");
  });
}

}  // namespace halfscope::cli
