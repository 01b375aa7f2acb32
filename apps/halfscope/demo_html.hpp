// The demo report page: plain HTML with inline CSS, no script, readable offline.
#pragma once

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
  double seconds = 0;
};

/// Escapes text for HTML.
std::string html_escape(const std::string& s);

std::string render_demo_page(const DemoPage& page);

}  // namespace halfscope::cli
