// How an adaptive-optics system is named on the command line, shared by `ao covariance` and
// `ao evaluate` (the commands that take a SYSTEM): a file (halfscope's `.json`, or a MOAO
// `sys-params.txt` in either layout with its atmosphere given by `--atmosphere`, unless appended to
// the file) or a built-in preset written `preset:NAME` or `preset:NAME:LAYERS` (`preset:check`,
// `preset:eelt:60`).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "halfscope/ao/system.hpp"

namespace halfscope::cli {

/// The SYSTEM argument and its `--atmosphere` companion, as typed.
struct AoSystemArg {
  std::string spec;        // a path or preset:NAME[:LAYERS]
  std::string atmosphere;  // MOAO atmosphere file (either MOAO layout); empty when not given
};

/// Adds the required positional SYSTEM and the `--atmosphere FILE` option to `cmd`, bound to `arg`
/// (which must outlive the parse, as CLI11 stores pointers).
void add_ao_system_options(CLI::App& cmd, AoSystemArg& arg);

/// Loads and validates the system `arg` names. Throws InvalidInput naming SYSTEM for a malformed
/// preset spec (unknown name, layer count not 10 or 60, trailing text) or for `--atmosphere` given
/// with a preset or a `.json` file (both carry their atmosphere); the readers' IoError /
/// InvalidInput (which name the file and the field) pass through. For a MOAO file in the short
/// (benchmark) layout it prints a one-line warning on stderr: the photometry is MOAO's check-file
/// values and the file's noise_var is not used.
[[nodiscard]] ao::AoSystem load_ao_system(const AoSystemArg& arg);

/// A short label for messages and file headers: the preset spec, or the file name (with the
/// atmosphere file after a '+').
[[nodiscard]] std::string ao_system_label(const AoSystemArg& arg);

}  // namespace halfscope::cli
