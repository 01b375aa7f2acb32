#include "demo_html.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace halfscope::cli {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

std::string num(double v, int digits = 1) {
  if (std::isnan(v)) return "&ndash;";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void ceilings_row(std::ostringstream& h, const bench::BenchReport& r, const std::string& when) {
  const auto& c = r.ceilings;
  h << "<tr><td>" << html_escape(r.device.name) << "</td><td>" << html_escape(when) << "</td><td>"
    << num(c.copy_GBps) << "</td><td>" << num(c.fp64_TFLOPs, 2) << "</td><td>"
    << num(c.fp32_TFLOPs, 2) << "</td><td>" << num(c.tf32_TFLOPs, 1) << "</td><td>"
    << num(c.fp16_TFLOPs, 1) << "</td><td>" << num(c.bf16_TFLOPs, 1) << "</td></tr>\n";
}

}  // namespace

std::string render_demo_page(const DemoPage& p) {
  std::ostringstream h;
  h << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>halfscope "
       "demo</title>\n"
       "<style>body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;"
       "color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
       "padding:.3em .6em;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child"
       "{text-align:left}.paper{color:#555;font-style:italic}.status{background:#fff8e0;"
       "padding:.5em}nav a{margin-right:1em}</style></head><body>\n";
  h << "<h1>halfscope " << html_escape(p.build.version) << " demo</h1>\n";
  h << "<nav><a href=\"#machine\">Machine</a><a href=\"#ceilings\">Ceilings</a>"
       "<a href=\"#conv\">Convolution (000)</a><a href=\"#mfilter\">Matched filtering (001)</a>"
       "<a href=\"#ao\">Adaptive optics (002)</a></nav>\n";

  h << "<section id=\"machine\"><h2>Machine</h2><table>\n";
  h << "<tr><th>host</th><td>" << html_escape(p.host.hostname) << "</td></tr>\n";
  h << "<tr><th>CPU</th><td>" << html_escape(p.host.cpu_model) << ", " << p.host.logical_cpus
    << " logical CPUs, " << p.host.memory_bytes / (1LL << 20) << " MiB</td></tr>\n";
  h << "<tr><th>OS</th><td>" << html_escape(p.host.os) << "</td></tr>\n";
  h << "<tr><th>build</th><td>" << html_escape(p.build.build_type) << ", "
    << html_escape(p.build.cxx_compiler);
  if (!p.build.cuda_compiler.empty())
    h << ", " << html_escape(p.build.cuda_compiler) << " for sm_"
      << html_escape(p.build.cuda_archs);
  h << "</td></tr>\n<tr><th>CUDA</th><td>" << html_escape(p.devices.status) << "</td></tr>\n";
  for (const auto& d : p.devices.devices)
    h << "<tr><th>device " << d.index << "</th><td>" << html_escape(d.name) << ", cc "
      << d.compute_capability() << ", " << d.multiprocessors << " SMs, "
      << d.memory_bytes / (1LL << 20) << " MiB</td></tr>\n";
  if (p.devices.devices.empty())
    h << "<tr><th>devices</th><td>no GPU on this machine: the CPU backend runs "
         "everything</td></tr>\n";
  h << "</table></section>\n";

  h << "<section id=\"ceilings\"><h2>Ceilings</h2><p>Copy bandwidth counts bytes read plus bytes "
       "written; GEMM rates count 2n<sup>3</sup> flop. Every benchmark prints its distance to "
       "these.</p>\n<table><tr><th>device</th><th>measured</th><th>copy GB/s</th><th>FP64 TFLOP/s"
       "</th><th>FP32</th><th>TF32</th><th>FP16</th><th>BF16</th></tr>\n";
  if (p.cpu_ceilings) ceilings_row(h, *p.cpu_ceilings, "now (quick sizes)");
  if (p.gpu_ceilings) ceilings_row(h, *p.gpu_ceilings, "now (quick sizes)");
  for (const auto& r : p.recorded)
    ceilings_row(h, r, r.date + " (recorded, commit " + r.commit + ")");
  h << "</table>\n";
  if (!p.gpu_ceilings)
    h << "<p>No GPU is present here, so no GPU ceilings were measured in this run; the rows "
         "marked <em>recorded</em> come from <code>bench/results/</code>, measured on GPU "
         "machines with <code>tools/gpu-check.sh</code>.</p>\n";
  h << "</section>\n";

  h << p.conv_section;
  h << p.mfilter_section;
  h << p.ao_section;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", p.seconds);
  h << "<footer><p>Made by <code>halfscope demo</code> in " << secs << " s.</p></footer>\n"
    << "</body></html>\n";
  return h.str();
}

}  // namespace halfscope::cli
