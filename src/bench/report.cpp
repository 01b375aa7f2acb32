// Benchmark reports in the JSON schema of DESIGN.md section 5 (include/halfscope/bench/report.hpp).
#include "halfscope/bench/report.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"

namespace halfscope::bench {

namespace fs = std::filesystem;
using nlohmann::json;
// Written in the schema's order (benchmark, date, commit, ...) so the files read well.
using ordered = nlohmann::ordered_json;

namespace {

// Ceilings <-> JSON. Only measured (finite) values are written.
constexpr std::pair<const char*, double Ceilings::*> kCeilingFields[] = {
    {"copy_GBps", &Ceilings::copy_GBps},     {"fp32_TFLOPs", &Ceilings::fp32_TFLOPs},
    {"tf32_TFLOPs", &Ceilings::tf32_TFLOPs}, {"fp16_TFLOPs", &Ceilings::fp16_TFLOPs},
    {"bf16_TFLOPs", &Ceilings::bf16_TFLOPs}, {"fp64_TFLOPs", &Ceilings::fp64_TFLOPs}};

ordered number_or_null(double x) {
  return std::isfinite(x) ? ordered(x) : ordered(nullptr);
}

ordered ceilings_json(const Ceilings& c, bool with_device) {
  ordered j = ordered::object();
  if (with_device) j["device"] = c.device;
  for (const auto& [key, member] : kCeilingFields)
    if (std::isfinite(c.*member)) j[key] = c.*member;
  return j;
}

// Field readers that name the file and the field in their errors.
struct Reader {
  std::string_view name;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw IoError(std::string(name) + ": field '" + field + "': " + what);
  }
  const json& object(const json& j, const std::string& field) const {
    if (!j.is_object()) fail(field, std::string("expected an object, found ") + j.type_name());
    return j;
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (!it->is_string())
      fail(where + key, std::string("expected a string, found ") + it->type_name());
    return it->get<std::string>();
  }
  double number(const json& obj, const char* key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return NAN;
    if (!it->is_number())
      fail(where + key, std::string("expected a number, found ") + it->type_name());
    return it->get<double>();
  }
};

Ceilings parse_ceilings(const json& j, const Reader& r, const std::string& where) {
  r.object(j, where);
  Ceilings c;
  c.device = r.string(j, "device", where + ".");
  for (const auto& [key, member] : kCeilingFields) c.*member = r.number(j, key, where + ".");
  return c;
}

BenchCase parse_case(const json& j, const Reader& r, const std::string& where) {
  r.object(j, where);
  BenchCase c;
  const std::string w = where + ".";
  c.implementation = r.string(j, "implementation", w);
  c.method = r.string(j, "method", w);
  c.precision = r.string(j, "precision", w);
  c.stats.median_ms = r.number(j, "median_ms", w);
  c.stats.min_ms = r.number(j, "min_ms", w);
  c.stats.max_ms = r.number(j, "max_ms", w);
  const double repeats = r.number(j, "repeats", w);
  c.stats.repeats =
      std::isfinite(repeats) && repeats >= 0 && repeats < 2e9 ? static_cast<int>(repeats) : 0;
  c.GBps = r.number(j, "GBps", w);
  c.TFLOPs = r.number(j, "TFLOPs", w);
  if (const auto p = j.find("params"); p != j.end() && !p->is_null()) {
    r.object(*p, w + "params");
    for (const auto& [key, value] : p->items()) {
      if (value.is_boolean())
        c.params[key] = value.get<bool>();
      else if (value.is_number_integer() && !value.is_number_unsigned())
        c.params[key] = value.get<std::int64_t>();
      else if (value.is_number_unsigned() && value.get<std::uint64_t>() <= INT64_MAX)
        c.params[key] = static_cast<std::int64_t>(value.get<std::uint64_t>());
      else if (value.is_number())
        c.params[key] = value.get<double>();
      else if (value.is_string())
        c.params[key] = value.get<std::string>();
      else
        r.fail(w + "params." + key,
               std::string("expected a number, string or flag, found ") + value.type_name());
    }
  }
  if (const auto e = j.find("error"); e != j.end() && !e->is_null()) {
    r.object(*e, w + "error");
    for (const auto& [key, value] : e->items())
      c.error[key] = r.number(*e, key.c_str(), w + "error.");
  }
  return c;
}

std::string read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// The NVIDIA kernel-module version ("580.159") from /proc/driver/nvidia/version, or "".
std::string nvidia_kernel_driver() {
  const std::string line = read_first_line("/proc/driver/nvidia/version");
  const auto pos = line.find("Module");
  if (pos == std::string::npos) return {};
  std::size_t i = pos;
  while (i < line.size()) {  // first whitespace-separated token starting with a digit
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])))
      return line.substr(i, j - i);
    i = j;
  }
  return {};
}

bool looks_like_hash(const std::string& s) {
  return s.size() >= 4 && s.size() <= 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c));
         });
}

std::string git_short_hash(const fs::path& dir) {
  std::string quoted = "'";
  for (const char c : dir.string()) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string cmd = "git -C " + quoted + " rev-parse --short HEAD 2>/dev/null";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return {};
  char buf[64] = {};
  std::string out;
  if (std::fgets(buf, sizeof buf, pipe)) out = buf;
  ::pclose(pipe);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return looks_like_hash(out) ? out : std::string{};
}

}  // namespace

bool Ceilings::empty() const noexcept {
  for (const auto& [key, member] : kCeilingFields)
    if (std::isfinite(this->*member)) return false;
  return true;
}

DeviceSummary describe_cpu() {
  DeviceSummary d;
  d.kind = "cpu";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (in && std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) d.name = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  if (d.name.empty()) d.name = "CPU";
  d.name += " (" + std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " threads)";
  return d;
}

DeviceSummary describe_cuda_device(int index) {
  const DeviceReport r = query_devices();
  if (index < 0 || index >= static_cast<int>(r.devices.size()))
    throw Unsupported("CUDA device " + std::to_string(index) + " does not exist (" +
                      std::to_string(r.devices.size()) + " present; " + r.status + ")");
  const DeviceInfo& info = r.devices[static_cast<std::size_t>(index)];
  DeviceSummary d;
  d.kind = "cuda";
  d.name = info.name;
  d.cc = info.compute_capability();
  d.driver = nvidia_kernel_driver();
  if (d.driver.empty() && !r.driver_version.empty()) d.driver = "CUDA " + r.driver_version;
  return d;
}

BenchReport BenchReport::start(std::string benchmark, DeviceSummary device) {
  BenchReport r;
  r.benchmark = std::move(benchmark);
  r.date = utc_date();
  r.commit = source_commit();
  r.device = std::move(device);
  r.ceilings.device = r.device.name;
  return r;
}

std::string BenchReport::to_json() const {
  ordered j;
  j["benchmark"] = benchmark;
  j["date"] = date;
  j["commit"] = commit;
  j["device"] = {
      {"kind", device.kind}, {"name", device.name}, {"driver", device.driver}, {"cc", device.cc}};
  j["ceilings"] = ceilings_json(ceilings, false);
  if (host_ceilings) j["host_ceilings"] = ceilings_json(*host_ceilings, true);
  ordered cs = ordered::array();
  for (const BenchCase& c : cases) {
    ordered params = ordered::object();
    for (const auto& [key, value] : c.params)
      std::visit([&, k = key](const auto& v) { params[k] = v; }, value);
    ordered error = ordered::object();
    for (const auto& [key, value] : c.error) error[key] = number_or_null(value);
    cs.push_back({{"implementation", c.implementation},
                  {"method", c.method},
                  {"precision", c.precision},
                  {"params", params},
                  {"median_ms", c.stats.median_ms},
                  {"min_ms", c.stats.min_ms},
                  {"max_ms", c.stats.max_ms},
                  {"repeats", c.stats.repeats},
                  {"GBps", number_or_null(c.GBps)},
                  {"TFLOPs", number_or_null(c.TFLOPs)},
                  {"error", error}});
  }
  j["cases"] = cs;
  return j.dump(2) + "\n";
}

void BenchReport::write(const fs::path& path) const {
  const std::string text = to_json();
  io::write_file_atomic(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

BenchReport parse_bench_report(std::span<const std::byte> bytes, std::string_view name) {
  const json j =
      json::parse(reinterpret_cast<const char*>(bytes.data()),
                  reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
  if (j.is_discarded())
    throw IoError(std::string(name) + ": not valid JSON (expected a benchmark report)");
  const Reader r{name};
  r.object(j, "<top level>");
  BenchReport rep;
  rep.benchmark = r.string(j, "benchmark", "");
  if (rep.benchmark.empty()) r.fail("benchmark", "missing; expected the benchmark name");
  rep.date = r.string(j, "date", "");
  rep.commit = r.string(j, "commit", "");
  if (const auto d = j.find("device"); d != j.end() && !d->is_null()) {
    r.object(*d, "device");
    rep.device = {r.string(*d, "kind", "device."), r.string(*d, "name", "device."),
                  r.string(*d, "driver", "device."), r.string(*d, "cc", "device.")};
  }
  if (const auto c = j.find("ceilings"); c != j.end() && !c->is_null())
    rep.ceilings = parse_ceilings(*c, r, "ceilings");
  rep.ceilings.device = rep.device.name;
  if (const auto h = j.find("host_ceilings"); h != j.end() && !h->is_null())
    rep.host_ceilings = parse_ceilings(*h, r, "host_ceilings");
  if (const auto cs = j.find("cases"); cs != j.end() && !cs->is_null()) {
    if (!cs->is_array())
      r.fail("cases", std::string("expected an array, found ") + cs->type_name());
    for (std::size_t i = 0; i < cs->size(); ++i)
      rep.cases.push_back(parse_case((*cs)[i], r, "cases[" + std::to_string(i) + "]"));
  }
  return rep;
}

BenchReport read_bench_report(const fs::path& path) {
  const std::vector<std::byte> bytes = io::read_file_bytes(path);
  return parse_bench_report(bytes, path.string());
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string source_commit() {
  if (const char* env = std::getenv("HALFSCOPE_COMMIT"); env && *env) return env;
  std::vector<fs::path> candidates;
  if (const char* src = std::getenv("HALFSCOPE_SOURCE_DIR"); src && *src)
    candidates.emplace_back(src);
  // This file is src/bench/report.cpp of the source tree it was built from.
  candidates.push_back(fs::path(__FILE__).parent_path().parent_path().parent_path());
  std::error_code ec;
  for (const fs::path& dir : candidates) {
    if (dir.empty() || !fs::exists(dir / ".git", ec)) continue;
    if (std::string h = git_short_hash(dir); !h.empty()) return h;
  }
  return "unknown";
}

std::string device_slug(std::string_view name) {
  std::string s;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c))
      s += static_cast<char>(std::tolower(c));
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "device" : s;
}

fs::path result_path(const fs::path& dir, const BenchReport& report) {
  return dir /
         (report.date + "-" + device_slug(report.device.name) + "-" + report.benchmark + ".json");
}

std::vector<fs::path> recorded_report_files(const fs::path& dir, std::string_view tag) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string f = entry.path().filename().string();
    if (entry.is_regular_file(ec) && f.find(tag) != std::string::npos && f.size() > 5 &&
        f.compare(f.size() - 5, 5, ".json") == 0 && f[0] != '.')
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::optional<Ceilings> load_latest_ceilings(const fs::path& dir, std::string_view device_name) {
  std::optional<Ceilings> best;
  std::string best_key;
  for (const fs::path& path : recorded_report_files(dir, "ceilings")) {
    const BenchReport rep = read_bench_report(path);
    const Ceilings* match = nullptr;
    if (rep.device.name == device_name && !rep.ceilings.empty())
      match = &rep.ceilings;
    else if (rep.host_ceilings && rep.host_ceilings->device == device_name &&
             !rep.host_ceilings->empty())
      match = &*rep.host_ceilings;
    if (!match) continue;
    const std::string key = rep.date + "\n" + path.filename().string();
    if (!best || key > best_key) {
      best = *match;
      best->device = std::string(device_name);
      best_key = key;
    }
  }
  return best;
}

}  // namespace halfscope::bench
