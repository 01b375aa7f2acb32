// Messages, the progress bar and small helpers shared by the subcommands.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <system_error>

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

Array read_single_array(const std::string& path, const char* what) {
  io::Dataset d = io::read_dataset(path);
  if (d.waveforms)
    throw InvalidInput(path + ": expected one 2-D " + what +
                       " array (.npy, .npz, .fits, .csv, .png), found waveforms");
  if (d.arrays.size() != 1) {
    std::string names;
    for (const auto& [name, a] : d.arrays) names += (names.empty() ? "" : ", ") + name;
    throw InvalidInput(path + ": expected a file holding one 2-D " + what + " array, found " +
                       std::to_string(d.arrays.size()) + " arrays" +
                       (names.empty() ? "" : " (" + names + ")"));
  }
  Array a = d.arrays.front().second.contiguous();
  if (a.ndim() != 2)
    throw InvalidInput(path + ": expected a 2-D " + what + ", found " + a.describe());
  if (a.size() == 0)
    throw InvalidInput(path + ": expected a non-empty " + what + ", found " + a.describe());
  return a;
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

namespace {

namespace fs = std::filesystem;

// The same file: by identity where both exist (links, mounts), else by their canonical paths.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) {
    std::error_code e;
    const bool same = fs::equivalent(a, b, e);
    if (!e) return same;
  }
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  return !ea && !eb && ca == cb;
}

// Each file of a NamedPath: the list's items, or the one path.
std::vector<std::string> files_of(const NamedPath& p) {
  std::vector<std::string> files;
  if (p.path.empty()) return files;
  if (!p.list) return {p.path};
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = p.path.find(',', start);
    std::string item = p.path.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) files.push_back(item);
    if (comma == std::string::npos) return files;
    start = comma + 1;
  }
}

}  // namespace

CLI::Validator positive_number(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        std::size_t used = 0;
        double v = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == text.size() && used > 0 && std::isfinite(v) && v > 0) return {};
        return "expected " + what + " > 0, found '" + text + "'";
      },
      "> 0");
}

void check_distinct_paths(const std::vector<NamedPath>& inputs,
                          const std::vector<NamedPath>& outputs) {
  for (std::size_t o = 0; o < outputs.size(); ++o)
    for (const std::string& out : files_of(outputs[o])) {
      const auto clash = [&](const NamedPath& other, const std::string& file, const char* kind) {
        throw InvalidInput(outputs[o].option + " " + out + ": the same file as " + other.option +
                           " " + file + " (" + kind +
                           "): expected an output path that no input or other output uses");
      };
      for (const NamedPath& in : inputs)
        for (const std::string& file : files_of(in))
          if (same_file(out, file)) clash(in, file, "an input");
      for (std::size_t p = 0; p < o; ++p)
        for (const std::string& file : files_of(outputs[p]))
          if (same_file(out, file)) clash(outputs[p], file, "another output");
    }
}

void check_text_output(const NamedPath& output, const std::string& what) {
  if (output.path.empty()) return;
  std::string ext = fs::path(output.path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const char* array_ext :
       {".npy", ".npz", ".fits", ".fit", ".fts", ".png", ".mseed", ".miniseed", ".ms", ".sac"})
    if (ext == array_ext)
      throw InvalidInput(output.option + " " + output.path + ": writes " + what +
                         " text: expected a file name that does not end in " + ext +
                         " (an array or waveform format)");
}

}  // namespace halfscope::cli
