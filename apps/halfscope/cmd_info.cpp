// `halfscope info [--json]`: version, build options, library versions, the host and the devices.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli.hpp"
#include "halfscope/core/build_info.hpp"

namespace halfscope::cli {

namespace {

nlohmann::json info_json() {
  const BuildInfo b = build_info();
  const HostInfo h = host_info();
  const DeviceReport d = query_devices();
  nlohmann::json j;
  j["version"] = b.version;
  j["build"] = {{"type", b.build_type},
                {"cxx_compiler", b.cxx_compiler},
                {"cuda_compiler", b.cuda_compiler},
                {"cuda_archs", b.cuda_archs}};
  for (const auto& [name, on] : b.options) j["build"]["options"][name] = on;
  for (const auto& [name, version] : b.libraries) j["libraries"][name] = version;
  j["host"] = {{"hostname", h.hostname},
               {"cpu", h.cpu_model},
               {"logical_cpus", h.logical_cpus},
               {"memory_bytes", h.memory_bytes},
               {"os", h.os}};
  j["cuda"] = {{"built", d.cuda_built},
               {"driver", d.driver_version},
               {"runtime", d.runtime_version},
               {"status", d.status}};
  j["devices"] = nlohmann::json::array();
  for (const auto& dev : d.devices)
    j["devices"].push_back({{"index", dev.index},
                            {"name", dev.name},
                            {"compute_capability", dev.compute_capability()},
                            {"multiprocessors", dev.multiprocessors},
                            {"memory_bytes", dev.memory_bytes},
                            {"l2_bytes", dev.l2_bytes},
                            {"clock_khz", dev.clock_khz},
                            {"memory_bus_bits", dev.memory_bus_bits}});
  return j;
}

void print_text(const nlohmann::json& j) {
  std::cout << "halfscope " << j["version"].get<std::string>() << " ("
            << j["build"]["type"].get<std::string>() << ", "
            << j["build"]["cxx_compiler"].get<std::string>();
  if (!j["build"]["cuda_compiler"].get<std::string>().empty())
    std::cout << ", " << j["build"]["cuda_compiler"].get<std::string>() << " for sm_"
              << j["build"]["cuda_archs"].get<std::string>();
  std::cout << ")\noptions:";
  for (const auto& [name, on] : j["build"]["options"].items())
    std::cout << " " << name << "=" << (on.get<bool>() ? "on" : "off");
  std::cout << "\nlibraries:";
  for (const auto& [name, v] : j["libraries"].items())
    std::cout << " " << name << " " << v.get<std::string>() << ";";
  std::cout << "\nhost: " << j["host"]["cpu"].get<std::string>() << ", "
            << j["host"]["logical_cpus"].get<int>() << " logical CPUs, "
            << j["host"]["memory_bytes"].get<long long>() / (1 << 20) << " MiB, "
            << j["host"]["os"].get<std::string>() << "\n";
  std::cout << "cuda: " << j["cuda"]["status"].get<std::string>();
  if (!j["cuda"]["driver"].get<std::string>().empty())
    std::cout << " (driver " << j["cuda"]["driver"].get<std::string>() << ")";
  std::cout << "\n";
  if (j["devices"].empty()) std::cout << "devices: none (the CPU backend is used)\n";
  for (const auto& dev : j["devices"])
    std::cout << "device " << dev["index"].get<int>() << ": " << dev["name"].get<std::string>()
              << ", compute capability " << dev["compute_capability"].get<std::string>() << ", "
              << dev["multiprocessors"].get<int>() << " SMs, "
              << dev["memory_bytes"].get<long long>() / (1 << 20) << " MiB\n";
}

}  // namespace

void register_info(CLI::App& app, Globals& /*g*/) {
  auto* cmd =
      app.add_subcommand("info", "version, build options, libraries, host and CUDA devices");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print machine-readable JSON");
  cmd->callback([json] {
    const nlohmann::json j = info_json();
    if (*json)
      std::cout << j.dump(2) << "\n";
    else
      print_text(j);
  });
}

}  // namespace halfscope::cli
