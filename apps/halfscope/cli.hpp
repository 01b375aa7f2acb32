// Shared pieces of the halfscope command-line tool. Each subcommand lives in its own file and
// registers itself with `register_<name>(app, globals)`; main.cpp maps exceptions to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "halfscope/core/array.hpp"
#include "halfscope/core/device.hpp"

namespace halfscope::cli {

/// Options every subcommand sees.
struct Globals {
  std::string device = "auto";  // auto | cpu | cuda
  bool quiet = false;
  bool verbose = false;
  /// This process's MPI rank and the job's rank count (0 and 1 unless started by mpirun in a
  /// build with MPI); only the subcommands main.cpp lists as MPI-aware run with more ranks.
  int rank = 0;
  int ranks = 1;
  [[nodiscard]] DeviceKind device_kind() const { return parse_device_kind(device); }
};

/// Messages for the user on stderr, honouring --quiet / --verbose.
void info(const Globals& g, const std::string& message);    // normal progress; hidden by --quiet
void detail(const Globals& g, const std::string& message);  // only with --verbose
void warn(const std::string& message);                      // always shown

/// A progress bar on stderr when stderr is a terminal and not --quiet; silent otherwise.
class Progress {
 public:
  Progress(const Globals& g, std::string label, long long total);
  ~Progress();
  void update(long long done);

 private:
  bool active_;
  std::string label_;
  long long total_;
  int last_percent_ = -1;
};

void register_info(CLI::App& app, Globals& g);
void register_convert(CLI::App& app, Globals& g);
void register_bench(CLI::App& app, Globals& g);
void register_demo(CLI::App& app, Globals& g);
void register_conv(CLI::App& app, Globals& g);
void register_bench_conv(CLI::App& bench, Globals& g);
void register_simulate(CLI::App& app, Globals& g);
void register_mfilter(CLI::App& app, Globals& g);
void register_bench_mfilter(CLI::App& bench, Globals& g);
void register_ao(CLI::App& app, Globals& g);                  // cmd_ao.cpp: the `ao` group
void register_ao_evaluate(CLI::App& ao, Globals& g);         // cmd_ao_evaluate.cpp
void register_bench_covariance(CLI::App& bench, Globals& g); // cmd_bench_covariance.cpp
void register_cholesky(CLI::App& app, Globals& g);           // cmd_cholesky.cpp
void register_ao_reconstructor(CLI::App& ao, Globals& g);    // cmd_ao_reconstructor.cpp
void register_bench_cholesky(CLI::App& bench, Globals& g);   // cmd_bench_cholesky.cpp (+ tor)

/// Writes one array to `path` in its format (by extension), widening FP16/BF16 to float32 where the
/// format has no such type (FITS; BF16 in .npy), with a note on stderr.
void write_array(const Globals& g, const std::string& path, const Array& a,
                 const std::string& history);

}  // namespace halfscope::cli
