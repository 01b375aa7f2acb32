#include "svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace halfscope::cli {

namespace {
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string fmt(double v) {
  char b[32];
  if (v != 0 && (std::abs(v) < 1e-2 || std::abs(v) >= 1e4))
    std::snprintf(b, sizeof b, "%.0e", v);
  else
    std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s)
    o += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
  return o;
}
}  // namespace

std::string svg_line_chart(const std::vector<Series>& series, const ChartOptions& o) {
  const double left = 64, right = 150, top = 28, bottom = 44;
  const double pw = o.width - left - right, ph = o.height - top - bottom;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto ok = [&](double y) { return std::isfinite(y) && (!o.log_y || y > 0); };
  for (const auto& s : series)
    for (auto [x, y] : s.points)
      if (ok(y)) {
        x0 = std::min(x0, x), x1 = std::max(x1, x);
        const double t = o.log_y ? std::log10(y) : y;
        y0 = std::min(y0, t), y1 = std::max(y1, t);
      }
  std::ostringstream h;
  h << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\"" << o.height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"" << left
    << "\" y=\"16\" font-size=\"13\">" << esc(o.title) << "</text>\n";
  if (!std::isfinite(x0)) return h.str() + "<text x=\"80\" y=\"80\">no data</text></svg>\n";
  if (o.log_y) y0 = std::floor(y0), y1 = std::ceil(y1);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) {
    return top + ph - ((o.log_y ? std::log10(y) : y) - y0) / (y1 - y0) * ph;
  };
  h << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int i = 0; i <= 5; ++i) {  // x ticks
    const double x = x0 + (x1 - x0) * i / 5;
    h << "<text x=\"" << px(x) << "\" y=\"" << top + ph + 14 << "\" text-anchor=\"middle\">"
      << fmt(std::round(x)) << "</text>\n";
  }
  const int ny = o.log_y ? static_cast<int>(y1 - y0) : 5;
  for (int i = 0; i <= ny; ++i) {  // y ticks (decades on a log axis)
    const double t = y0 + (y1 - y0) * i / std::max(ny, 1);
    const double y = o.log_y ? std::pow(10.0, t) : t;
    h << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << py(y) << "\" y2=\""
      << py(y) << "\" stroke=\"#eee\"/><text x=\"" << left - 4 << "\" y=\"" << py(y) + 4
      << "\" text-anchor=\"end\">" << fmt(y) << "</text>\n";
  }
  h << "<text x=\"" << left + pw / 2 << "\" y=\"" << o.height - 8 << "\" text-anchor=\"middle\">"
    << esc(o.x_label) << "</text>\n<text transform=\"translate(14," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(o.y_label) << "</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % 10];
    std::string path;
    for (auto [x, y] : series[i].points)
      if (ok(y))
        path += (path.empty() ? "M" : " L") + std::to_string(px(x)) + " " + std::to_string(py(y));
    h << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.6\"/>\n";
    const double ly = top + 12 + 15 * static_cast<double>(i);
    h << "<line x1=\"" << left + pw + 8 << "\" x2=\"" << left + pw + 26 << "\" y1=\"" << ly
      << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\"/><text x=\""
      << left + pw + 30 << "\" y=\"" << ly + 4 << "\">" << esc(series[i].label) << "</text>\n";
  }
  return h.str() + "</svg>\n";
}

}  // namespace halfscope::cli
