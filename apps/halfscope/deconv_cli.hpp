// Registration of the deconvolution commands (issue 7): declared here rather than in cli.hpp so
// that main.cpp, cmd_bench.cpp and cmd_demo.cpp each gain one include and one call.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

namespace halfscope::cli {

struct Globals;

/// `halfscope deconv DIRTY PSF -o SKY` (cmd_deconv.cpp).
void register_deconv(CLI::App& app, Globals& g);

/// `halfscope bench deconv` (cmd_bench_deconv.cpp).
void register_bench_deconv(CLI::App& bench, Globals& g);

/// The demo's "Deconvolution" section (demo_deconv.cpp): a 256 x 256 MeerKAT observation at 37 dB
/// simulated now, every solver x precision on it (criterion curves as SVG), cube-root pictures of
/// the sky, the dirty image and the restored sky written into `dir`, and the recorded GPU runs of
/// `bench deconv` found in `results`. With `measure` false nothing is computed and the section
/// shows only the recorded runs. Returns the section's HTML.
std::string demo_deconv_section(const Globals& g, const std::filesystem::path& dir,
                                const std::filesystem::path& results, bool measure);

}  // namespace halfscope::cli
