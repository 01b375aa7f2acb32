// Small SVG line charts for the demo page (log-scale y optional): no plotting library needed and
// the page stays one self-contained file.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace halfscope::cli {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>>
      points;  // (x, y); non-finite or (log) non-positive y skipped
};

struct ChartOptions {
  std::string title, x_label, y_label;
  bool log_y = false;
  int width = 560, height = 340;
};

/// An <svg> element drawing the series with axes, ticks and a legend.
std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& options);

}  // namespace halfscope::cli
