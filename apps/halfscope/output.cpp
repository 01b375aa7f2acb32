// Messages, the progress bar and small helpers shared by the subcommands.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/dataset.hpp"

namespace halfscope::cli {

void info(const Globals& g, const std::string& message) {
  if (!g.quiet && g.rank == 0) std::cerr << message << "\n";  // one voice for an MPI job
}

void detail(const Globals& g, const std::string& message) {
  if (g.verbose && !g.quiet && g.rank == 0) std::cerr << message << "\n";
}

void warn_gathered(const Globals& g, const std::string& command, std::int64_t ranks_without_file,
                   const std::string& path, const std::string& what) {
  if (ranks_without_file > 0 && g.rank == 0)
    warn(command + ": " + std::to_string(ranks_without_file) + " rank(s) cannot open " + path +
         " on rank 0's file system: " + what + " was gathered on rank 0 and written there");
}

void warn(const std::string& message) {
  std::cerr << "halfscope: warning: " << message << "\n";
}

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

Array read_single_array(const std::string& path) {
  io::Dataset d = io::read_dataset(path);
  if (d.waveforms || d.arrays.size() != 1)
    throw InvalidInput(path + ": expected a file holding one 2-D array (.npy, .fits, .csv, .png)");
  return d.arrays.front().second;
}

Progress::Progress(const Globals& g, std::string label, long long total)
    : active_(!g.quiet && ::isatty(STDERR_FILENO) && total > 0),
      label_(std::move(label)),
      total_(total) {}

Progress::~Progress() {
  if (active_ && last_percent_ >= 0) std::cerr << "\n";
}

void Progress::update(long long done) {
  if (!active_) return;
  const int percent = static_cast<int>(100 * done / total_);
  if (percent == last_percent_) return;
  last_percent_ = percent;
  const int width = 30, filled = percent * width / 100;
  std::cerr << "\r" << label_ << " [" << std::string(static_cast<std::size_t>(filled), '#')
            << std::string(static_cast<std::size_t>(width - filled), ' ') << "] " << percent << "%"
            << std::flush;
}

void write_array(const Globals& g, const std::string& path, const Array& a,
                 const std::string& history) {
  io::Dataset d;
  d.source = path;
  const io::Format f = io::format_of(path);
  const bool narrow = a.dtype() == DType::f16 || a.dtype() == DType::bf16;
  const bool widen = narrow && (f == io::Format::fits || f == io::Format::csv ||
                                (a.dtype() == DType::bf16 && f != io::Format::png));
  d.arrays.emplace_back("", widen ? a.astype(DType::f32) : a);
  if (widen)
    info(g,
         path + ": " + std::string(dtype_name(a.dtype())) + " values written as float32 (exact)");
  io::WriteOptions w;
  w.history = history;
  io::write_dataset(path, d, w);
  info(g, "wrote " + path);
}

}  // namespace halfscope::cli
