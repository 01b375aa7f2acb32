// Shared pieces of the halfscope command-line tool. Each subcommand lives in its own file and
// registers itself with `register_<name>(app, globals)`; main.cpp maps exceptions to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "halfscope/bench/report.hpp"
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
/// After a collective .npy write over MPI ranks: on rank 0, when `ranks_without_file` > 0, warns
/// that those ranks could not open `path` on rank 0's file system, so `what` was gathered there.
void warn_gathered(const Globals& g, const std::string& command, std::int64_t ranks_without_file,
                   const std::string& path, const std::string& what);

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
void register_ao_evaluate(CLI::App& ao, Globals& g);          // cmd_ao_evaluate.cpp
void register_bench_covariance(CLI::App& bench, Globals& g);  // cmd_bench_covariance.cpp
void register_cholesky(CLI::App& app, Globals& g);            // cmd_cholesky.cpp
void register_ao_reconstructor(CLI::App& ao, Globals& g);     // cmd_ao_reconstructor.cpp
void register_bench_cholesky(CLI::App& bench, Globals& g);    // cmd_bench_cholesky.cpp (+ tor)

/// A byte count given as `option` (device_args.cpp): digits with an optional suffix K, M, G or T
/// (powers of 1024, upper or lower case), e.g. 16G = 17179869184; plain bytes without a suffix.
/// InvalidInput naming the option, what was expected and what was found for anything else (a
/// sign, a fraction, another suffix, an empty value) and for more than 2^63 - 1 bytes.
std::int64_t parse_size(std::string_view text, std::string_view option);

/// A CLI11 check: a finite number > 0 (`what`, e.g. "a wavelength in metres"); its message reads
/// "--option: expected WHAT > 0, found 'TEXT'".
CLI::Validator positive_number(const std::string& what);

/// `v` with `digits` decimals ("%.*f"), for tables and reports.
std::string fixed(double v, int digits);

/// The one non-empty 2-D array (C-contiguous) of an image file (.npy, .npz, .fits, .csv, .png);
/// InvalidInput naming the file, `what` it should hold ("image", "kernel", "sky") and what it
/// holds otherwise (waveforms, several arrays by name, another shape).
Array read_single_array(const std::string& path, const char* what);

/// A benchmark case's parameter `key` when present with type T, else nullptr.
template <class T>
const T* bench_param(const bench::BenchCase& c, const char* key) {
  const auto it = c.params.find(key);
  return it == c.params.end() ? nullptr : std::get_if<T>(&it->second);
}

/// "0,1,3": a --devices list as the user typed it, for messages.
std::string device_list_text(const std::vector<int>& devices);

/// Checks a non-empty --devices list of a one-process run whose --device is `device` (auto, cpu
/// or cuda, unresolved) and returns DeviceKind::Cuda: a list asks for the GPU, so auto means cuda
/// with it. InvalidInput for a negative or repeated index and for --device cpu; Unsupported when
/// no CUDA device is usable. Indices beyond the host's devices are the library's to refuse.
DeviceKind check_device_list(const std::vector<int>& devices, const std::string& device);

/// Refuses the GPU options in `given` (e.g. "--devices 0,1") in a job of several MPI ranks or
/// with a --grid (non-empty `grid`): they are one-process options (GPU ranks of the MPI
/// Cholesky take --device cuda, one device each). InvalidInput.
void refuse_gpu_over_ranks(const std::string& given, int ranks, const std::string& grid);

/// A file a command reads or writes, with the option or argument that named it ("-o", "DATA").
struct NamedPath {
  std::string option;
  std::string path;   // empty: not given
  bool list = false;  // `path` is a comma-separated list of files (mfilter's DATA)
};

/// InvalidInput, before any work, when an output is one of the inputs or another output: the same
/// file however spelled (./a.npy, d/../a.npy, a link to it), so a run never replaces what it reads
/// and two outputs never end up under one name. The message names both options and paths.
void check_distinct_paths(const std::vector<NamedPath>& inputs,
                          const std::vector<NamedPath>& outputs);

/// InvalidInput when a text output (`what`: "CSV", "JSON") is named like an array file (.npy,
/// .npz, .fits/.fit/.fts, .png, .mseed/.miniseed/.ms, .sac): readers would take it for one.
void check_text_output(const NamedPath& output, const std::string& what);

/// Writes one array to `path` in its format (by extension), widening FP16/BF16 to float32 where the
/// format has no such type (FITS; BF16 in .npy), with a note on stderr.
void write_array(const Globals& g, const std::string& path, const Array& a,
                 const std::string& history);

}  // namespace halfscope::cli
