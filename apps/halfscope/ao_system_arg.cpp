// SYSTEM on the command line: a file or preset:NAME[:LAYERS] (ao_system_arg.hpp).
#include "ao_system_arg.hpp"

#include <charconv>
#include <filesystem>
#include <string_view>

#include "cli.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::cli {

namespace {

constexpr std::string_view kPresetPrefix = "preset:";

std::string preset_names_text() {
  std::string names;
  for (const std::string& n : ao::ao_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// preset:NAME or preset:NAME:LAYERS -> ao_preset(NAME, LAYERS).
ao::AoSystem load_preset(std::string_view spec) {
  std::string_view rest = spec.substr(kPresetPrefix.size());
  std::string_view name = rest;
  int layers = 10;
  if (const auto colon = rest.find(':'); colon != std::string_view::npos) {
    name = rest.substr(0, colon);
    const std::string_view count = rest.substr(colon + 1);
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), layers);
    if (ec != std::errc{} || end != count.data() + count.size())
      throw InvalidInput(
          "SYSTEM '" + std::string(spec) +
          "': expected preset:NAME[:LAYERS] with LAYERS 10 or 60, found layer count '" +
          std::string(count) + "'");
  }
  if (name.empty())
    throw InvalidInput("SYSTEM '" + std::string(spec) + "': expected a preset name (" +
                       preset_names_text() + ") after 'preset:'");
  // ao_preset names the preset and lists the valid names and layer counts itself.
  return ao::ao_preset(name, layers);
}

}  // namespace

void add_ao_system_options(CLI::App& cmd, AoSystemArg& arg) {
  cmd.add_option("system", arg.spec,
                 "the AO system: FILE.json, a MOAO sys-params.txt, or preset:NAME[:LAYERS] "
                 "(preset:check, preset:mid, preset:eelt, preset:eelt:60)")
      ->required();
  cmd.add_option("--atmosphere", arg.atmosphere,
                 "MOAO atmosphere file (prof*-atmos-night*.txt) for a MOAO sys-params.txt, full "
                 "or short (benchmark) layout; needed unless the file has the atmosphere "
                 "appended (MOAO's own files do not)");
}

ao::AoSystem load_ao_system(const AoSystemArg& arg) {
  const std::string_view spec = arg.spec;
  if (spec.starts_with(kPresetPrefix)) {
    if (!arg.atmosphere.empty())
      throw InvalidInput("--atmosphere '" + arg.atmosphere +
                         "': expected no atmosphere file with "
                         "a preset (SYSTEM '" +
                         arg.spec + "' has its own profile)");
    return load_preset(spec);
  }
  if (spec.empty()) throw InvalidInput("SYSTEM: expected a file or preset:NAME, found ''");
  if (!arg.atmosphere.empty() && io::extension_of(arg.spec) == "json")
    throw InvalidInput("--atmosphere '" + arg.atmosphere +
                       "': expected no atmosphere file with "
                       "a JSON system (" +
                       arg.spec + " holds its atmosphere)");
  ao::AoSystem system = ao::read_ao_system(arg.spec, arg.atmosphere);
  if (ao::is_moao_short_layout(arg.spec))
    warn(arg.spec +
         ": MOAO short (benchmark) layout: no photometry in the file, MOAO's check-file values "
         "are used (NGS magnitude 13, LGS flux 6e7 ph/m^2/s, 4 ms frames), and its noise_var is "
         "not used (the noise comes from the photometry)");
  return system;
}

std::string ao_system_label(const AoSystemArg& arg) {
  if (arg.spec.starts_with(kPresetPrefix)) return arg.spec;
  std::string label = std::filesystem::path(arg.spec).filename().string();
  if (!arg.atmosphere.empty())
    label += "+" + std::filesystem::path(arg.atmosphere).filename().string();
  return label;
}

}  // namespace halfscope::cli
