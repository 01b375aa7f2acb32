// `halfscope demo [-o DIR]`: runs what halfscope can do on built-in data and writes DIR/index.html
// with the machine, the devices, the ceilings measured now and those recorded on GPU machines, and
// one section per study. Each operation adds its section as it lands (see docs/roadmap in README).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>

#include "cli.hpp"
#include "deconv_cli.hpp"
#include "demo_ao.hpp"
#include "demo_html.hpp"
#include "halfscope/bench/ceilings.hpp"
#include "halfscope/core/build_info.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace fs = std::filesystem;

namespace {

struct DemoOptions {
  std::string out_dir = "demo";
  std::string results_dir = "bench/results";
  std::string camera = "data/camera.npy";
  std::string seismic = "tests/data/seismic/example.npy";
  bool skip_measure = false;
};

// Recorded ceilings reports (bench/results/*ceilings*.json), newest first.
std::vector<bench::BenchReport> recorded_ceilings(const fs::path& dir) {
  std::vector<bench::BenchReport> out;
  for (const fs::path& path : bench::recorded_report_files(dir, "ceilings"))
    out.push_back(bench::read_bench_report(path));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.date > b.date; });
  return out;
}

void run_demo(const Globals& g, const DemoOptions& o) {
  const fs::path dir(o.out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(o.out_dir + ": cannot create the demo folder: " + ec.message());
  const auto t0 = std::chrono::steady_clock::now();

  DemoPage page;
  page.build = build_info();
  page.host = host_info();
  page.devices = query_devices();

  bench::CeilingsOptions copt;
  copt.quick = true;
  copt.progress = [&g](const std::string& m) { detail(g, "  " + m); };
  if (!o.skip_measure) {
    info(g, "demo: measuring the CPU ceilings (a few seconds)");
    page.cpu_ceilings = bench::measure_cpu_ceilings(copt);
    if (cuda_available()) {
      info(g, "demo: measuring the GPU ceilings (quick sizes)");
      page.gpu_ceilings = bench::measure_gpu_ceilings(0, copt);
    }
  }
  page.recorded = recorded_ceilings(o.results_dir);
  page.conv_section = demo_conv_section(g, o.camera, o.results_dir, !o.skip_measure);
  page.mfilter_section = demo_mfilter_section(g, o.seismic, o.results_dir, !o.skip_measure);
  page.ao_section = demo_ao_section(g, dir, !o.skip_measure);
  // The page has no slot of its own for issue 7 (demo_html.hpp): its section follows the AO one.
  page.ao_section += demo_deconv_section(g, dir, o.results_dir, !o.skip_measure);
  page.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (page.cpu_ceilings) page.cpu_ceilings->write(dir / "ceilings-cpu.json");
  if (page.gpu_ceilings) page.gpu_ceilings->write(dir / "ceilings-gpu.json");
  io::AtomicOutput html(dir / "index.html");
  html.write(render_demo_page(page));
  html.commit();
  std::cout << "demo: wrote " << (dir / "index.html").string() << " in " << std::fixed
            << std::setprecision(1) << page.seconds << " s";
  if (page.cpu_ceilings)
    std::cout << " (CPU copy " << std::setprecision(1) << page.cpu_ceilings->ceilings.copy_GBps
              << " GB/s";
  if (page.gpu_ceilings)
    std::cout << "; GPU " << page.gpu_ceilings->device.name << " copy "
              << page.gpu_ceilings->ceilings.copy_GBps << " GB/s";
  else
    std::cout << "; no GPU here";
  if (page.cpu_ceilings) std::cout << ")";
  std::cout << "\n";
}

}  // namespace

void register_demo(CLI::App& app, Globals& g) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd =
      app.add_subcommand("demo", "run the studies on built-in data and write DIR/index.html");
  cmd->add_option("-o,--output", o->out_dir, "folder for index.html and its files")
      ->capture_default_str();
  cmd->add_option("--results", o->results_dir, "folder of recorded benchmark results")
      ->capture_default_str();
  cmd->add_option("--camera", o->camera, "the study's test image (.npy)")->capture_default_str();
  cmd->add_option("--seismic", o->seismic, "real seismic data for matched filtering (.npy (C,L))")
      ->capture_default_str();
  cmd->add_flag("--no-measure", o->skip_measure, "skip measuring the ceilings (faster)");
  cmd->callback([&g, o, cmd] {
    // The defaults are the repository's files, shown as "not found" where the demo runs
    // elsewhere; a path the user typed must exist (and the seismic data be a .npy array).
    const auto given = [cmd](const char* name) { return cmd->count(name) > 0; };
    if (given("--results") && !fs::is_directory(o->results_dir))
      throw InvalidInput("--results " + o->results_dir + ": expected a folder of recorded results");
    for (const auto& [name, path] :
         {std::pair<const char*, std::string>{"--camera", o->camera}, {"--seismic", o->seismic}})
      if (given(name) && (!fs::is_regular_file(path) || io::extension_of(path) != "npy"))
        throw InvalidInput(std::string(name) + " " + path + ": expected an existing .npy file");
    run_demo(g, *o);
  });
}

}  // namespace halfscope::cli
