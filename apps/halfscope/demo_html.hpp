// The demo report page: plain HTML with inline CSS, no script, readable offline.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/bench/report.hpp"
#include "halfscope/core/build_info.hpp"
#include "halfscope/core/device.hpp"

namespace halfscope::cli {

struct DemoPage {
  BuildInfo build;
  HostInfo host;
  DeviceReport devices;
  std::optional<bench::BenchReport> cpu_ceilings;  // measured in this run
  std::optional<bench::BenchReport> gpu_ceilings;  // measured in this run, when a GPU is present
  std::vector<bench::BenchReport> recorded;        // bench/results/*ceilings*.json
  std::string conv_section;                        // HTML, made by demo_conv_section
  std::string mfilter_section;                     // HTML, made by demo_mfilter_section
  std::string ao_section;                          // HTML, made by demo_ao_section
  double seconds = 0;
};

/// Escapes text for HTML.
std::string html_escape(const std::string& s);

std::string render_demo_page(const DemoPage& page);

struct Globals;
/// The convolution section: a CPU sweep measured now (when `measure`) and the recorded GPU runs.
std::string demo_conv_section(const Globals& g, const std::filesystem::path& camera,
                              const std::filesystem::path& results, bool measure);
/// The matched-filtering section: Table I at demo size on the CPU (when `measure`; real data
/// from `example`, the ObsPy fixture), the recorded GPU runs, and a detection on synthetic data.
std::string demo_mfilter_section(const Globals& g, const std::filesystem::path& example,
                                 const std::filesystem::path& results, bool measure);

}  // namespace halfscope::cli
