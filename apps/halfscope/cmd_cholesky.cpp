// `halfscope cholesky A.npy -o L.npy`: the mixed-precision tile Cholesky (linalg/cholesky.hpp) of
// a symmetric positive definite matrix from a file, with a precision policy, optional recovery,
// an FP64 backward-error check and a JSON report. L is written dense (upper triangle zero) in
// float32, together with the report or not at all. Under mpirun (several ranks, builds with MPI)
// the factorization runs over the ranks (halfscope/mpi/cholesky.hpp): every rank reads and checks
// its own tiles of the input, factors them on a P x Q grid and writes the rows of its tiles of L
// into the file (rank 0 reads all of A and gathers L instead for --check), and rank 0 writes the
// report.
// With --devices (and --device-memory) the matrix stays in host memory and the library copies it
// to the listed CUDA devices, out of core on one device when it does not fit the budget.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ao_output_set.hpp"
#include "cholesky_matrix.hpp"
#include "cli.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

#if HALFSCOPE_HAS_MPI
#include <limits>
#include <optional>

#include "halfscope/mpi/cholesky.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/tiles.hpp"
#endif

namespace halfscope::cli {
namespace {

struct CholeskyCliOptions {
  std::string input, output, policy = "uniform:SP", device, report, grid, device_memory;
  std::int64_t tile = 0;
  bool recover = false, check = false, no_scale = false;
  std::vector<int> devices;
  bool device_memory_given = false;  // set from the option's count: "" is a bad size, not none
};

void write_report(const std::filesystem::path& path, const CholeskyCliOptions& c, std::int64_t n,
                  std::int64_t nb, const char* device, const linalg::CholeskyOptions& o,
                  const linalg::CholeskyReport& r, double ms, const bench::BackwardError* e,
                  const nlohmann::json& ranks) {
  nlohmann::json j = ranks;
  j["input"] = c.input;
  j["output"] = c.output;
  j["n"] = n;
  j["tile"] = nb;
  j["policy"] = r.policy;
  j["device"] = device;
  j["devices"] = o.devices;
  j["device_memory"] = o.device_memory;
  j["recover"] = c.recover;
  j["scale"] = o.scale;
  nlohmann::json tiles = nlohmann::json::object();
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    tiles[std::string(linalg::gemm_variant_name(v))] = r.count(v);
  j["tiles"] = tiles;
  r.for_each_count([&](const char* name, std::int64_t value) { j[name] = value; });
  j["recoveries"] = r.recoveries;
  j["factor_ms"] = ms;
  j["backward_error"] = e ? nlohmann::json(e->relative) : nlohmann::json(nullptr);
  j["halfscope"] = HALFSCOPE_VERSION;
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

// float32's range as the factorization stores A (TileMatrix, DType::f32), round to nearest even:
// |x| at or above the halfway point past the largest finite float32 (3.40282347e38) becomes inf,
// |x| at or below half the smallest subnormal (1.4e-45) becomes 0.
constexpr double kFloat32Overflow = 0x1.ffffffp127;
constexpr double kFloat32Underflow = 0x1p-150;

// The message for A(i, j) (`value`: its text, or "" where only its float32 rounding is known)
// beyond float32's range. Checked here because the library sees only the float32 tiles: a finite
// entry that overflowed would be reported as an inf in the input, which the file does not hold.
std::string overflow_message(const std::string& path, std::int64_t i, std::int64_t j,
                             const std::string& value) {
  return path + ": A(" + std::to_string(i) + ", " + std::to_string(j) + ")" +
         (value.empty() ? "" : " = " + value) +
         " overflows float32, in which the factorization stores A: expected |entries| <= " +
         number_text(3.4028234663852886e38) + "; scale the matrix";
}

// The first entry of the lower triangle of a (n x n float64, by row, then column, as
// read_symmetric checks) that float32 cannot hold as the factorization needs: one that
// overflows, or a nonzero diagonal entry that underflows to 0, which would make the float32
// matrix "not positive definite" although A may be. Off-diagonal entries that underflow only
// round to 0, as any rounding: accepted. InvalidInput naming the file and the entry.
void check_float32_range(const std::string& path, const Array& a) {
  const std::int64_t n = a.dim(0);
  const double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const double v = p[i * n + j];
      if (std::fabs(v) >= kFloat32Overflow)
        throw InvalidInput(overflow_message(path, i, j, number_text(v)));
      if (i == j && v != 0 && std::fabs(v) <= kFloat32Underflow)
        throw InvalidInput(path + ": A(" + std::to_string(i) + ", " + std::to_string(i) +
                           ") = " + number_text(v) +
                           " underflows float32, in which the factorization stores A, to 0 (a "
                           "zero pivot: not positive definite there): expected diagonal entries "
                           "above 1.4e-45; scale the matrix");
    }
}

// The process grid of --grid "PxQ" (default: ProcessGrid::for_ranks's), checked against the
// job's rank count.
std::pair<int, int> cholesky_grid(const std::string& text, int ranks) {
  int p = 1, q = ranks;
  for (p = 1; p * p <= ranks; ++p)  // the squarest P x Q with P <= Q, as ProcessGrid::for_ranks
    if (ranks % p == 0) q = ranks / p;
  p = ranks / q;
  if (!text.empty()) {
    const auto x = text.find_first_of("xX");
    std::size_t used_p = 0, used_q = 0;
    try {
      if (x == std::string::npos) throw std::invalid_argument(text);
      p = std::stoi(text.substr(0, x), &used_p);
      q = std::stoi(text.substr(x + 1), &used_q);
    } catch (const std::exception&) {
      used_p = 0;
    }
    if (used_p != x || used_q == 0 || x + 1 + used_q != text.size() || p < 1 || q < 1)
      throw InvalidInput("--grid: expected PxQ with P, Q >= 1 (e.g. 2x2), found '" + text + "'");
  }
  if (static_cast<std::int64_t>(p) * q != ranks)
    throw InvalidInput("--grid " + std::to_string(p) + "x" + std::to_string(q) + ": expected " +
                       "P x Q = the " + std::to_string(ranks) + " MPI rank(s) of the job, found " +
                       std::to_string(static_cast<std::int64_t>(p) * q));
  return {p, q};
}

// Everything that can be checked without the data, on every rank alike: the policy and paths.
linalg::Policy check_arguments(const CholeskyCliOptions& c) {
  linalg::Policy policy = linalg::parse_policy(c.policy);
  if (io::extension_of(c.output) != "npy")
    throw InvalidInput("-o: expected a .npy output file, found '" + c.output + "'");
  check_distinct_paths({{"A", c.input}}, {{"-o", c.output}, {"--report", c.report}});
  check_text_output({"--report", c.report}, "JSON");
  io::check_output_path(c.output);
  if (!c.report.empty()) io::check_output_path(c.report);
  return policy;
}

// "--devices 0,1 --device-memory 16G": the GPU options given, as typed, for messages.
std::string gpu_options_text(const CholeskyCliOptions& c) {
  std::string text = c.devices.empty() ? "" : "--devices " + device_list_text(c.devices);
  if (c.device_memory_given)
    text += std::string(text.empty() ? "" : " ") + "--device-memory " + c.device_memory;
  return text;
}

// --device-memory as bytes (0 when not given), then the refusal of the one-process GPU options
// under --grid or over several MPI ranks (GPU ranks take --device cuda, one device each).
std::int64_t check_gpu_options(const CholeskyCliOptions& c, int ranks) {
  const std::int64_t bytes =
      c.device_memory_given ? parse_size(c.device_memory, "--device-memory") : 0;
  if (!c.devices.empty() || c.device_memory_given)
    refuse_gpu_over_ranks(gpu_options_text(c), ranks, c.grid);
  return bytes;
}

// Prints the outcome and writes L (with the report): on the one process, or on rank 0. `l` is
// the whole factor, or, over ranks without --check, empty: `written_l` then holds L, written by
// the ranks and not yet named.
void finish(const Globals& g, const CholeskyCliOptions& c, const linalg::TileLayout& layout,
            const linalg::TileMatrix& l, std::unique_ptr<io::AtomicOutput> written_l,
            const linalg::TileMatrix& input, const char* where, const linalg::CholeskyOptions& o,
            const linalg::CholeskyReport& r, double ms, const nlohmann::json& ranks) {
  const std::int64_t n = layout.rows(), nb = layout.tile_size();
  std::cout << "policy " << r.policy << ", n = " << n << ", tile " << nb << ", " << where << ", "
            << number_text(ms) << " ms\n";
  std::cout << "off-diagonal tiles:";
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    if (r.count(v) > 0) std::cout << " " << linalg::gemm_variant_name(v) << " " << r.count(v);
  std::cout << "\nattempts " << r.attempts << ", recoveries " << r.recoveries.size() << "\n";
  for (const std::string& line : r.recoveries) std::cout << "  " << line << "\n";
  if (r.scaling_exponent != 0)
    std::cout << "factored 2^" << -2 * r.scaling_exponent << " A (FP16 range), L scaled back by 2^"
              << r.scaling_exponent << "\n";
  if (!o.devices.empty())
    std::cout << "devices " << device_list_text(o.devices) << ": "
              << (r.out_of_core_slabs > 0
                      ? "out of core, " + std::to_string(r.out_of_core_slabs) + " slabs"
                      : std::string("in core"))
              << "; bytes host->device " << r.host_to_device_bytes << ", device->host "
              << r.device_to_host_bytes << ", device->device " << r.device_to_device_bytes << "\n";
  bench::BackwardError e;
  if (c.check) {
    e = bench::cholesky_backward_error(l, input);  // every tile: exact, FP64
    std::cout << "backward error ||L L^T - A||_F / ||A||_F = " << number_text(e.relative)
              << " (FP64, A as factored in FP32)\n";
  }
  // L and the report appear together or not at all (ao_output_set.hpp).
  AoOutputSet outputs;
  if (!written_l) io::write_npy(outputs.partial(c.output), dense_lower(l));
  if (!c.report.empty())
    write_report(outputs.partial(c.report), c, n, nb, where, o, r, ms, c.check ? &e : nullptr,
                 ranks);
  if (written_l) written_l->commit();  // both complete: named one right after the other
  outputs.commit();
  info(g, "wrote " + c.output + (c.report.empty() ? "" : " and " + c.report));
}

#if HALFSCOPE_HAS_MPI
// The factorization over the job's ranks: each step that can fail on some ranks only is agreed
// on (mpi::agree), so an error reaches every rank and is printed once, by rank 0.
void run_over_ranks(const Globals& g, const CholeskyCliOptions& c) {
  const mpi::Comm world = mpi::Comm::world();
  linalg::CholeskyOptions options;
  mpi::ProcessGrid grid;
  linalg::TileMatrix input;
  bool gpu = false;
  mpi::agree(world, [&] {
    options.policy = check_arguments(c);
    options.recover = c.recover;
    options.scale = !c.no_scale;
    (void)check_gpu_options(c, g.ranks);  // --devices, --device-memory: one process only
    const auto [p, q] = cholesky_grid(c.grid, g.ranks);
    grid = mpi::ProcessGrid{p, q};
    // GPU ranks only when asked for: auto keeps CPU ranks, whose factor is the one-process CPU
    // factor bit for bit.
    gpu = (c.device.empty() ? g.device : c.device) == "cuda";
  });
  if (gpu) {
    const int device = mpi::rank_device(world);  // collective: every rank decided alike
    mpi::agree(world, [&] {
      if (device < 0)
        throw Unsupported("cholesky: --device cuda over " + std::to_string(g.ranks) +
                          " MPI ranks: expected a CUDA device on every rank's host, found none "
                          "on rank " +
                          std::to_string(g.rank) + " (" + query_devices().status + ")");
    });
    options.devices = {device};
    // The context is a process's start-up, not the factorization's (the one-process run makes
    // its own before its timer, when it places the matrix).
    mpi::agree(world, [&] { prepare_device(device); });
  }
  const char* where = gpu ? "cuda" : "cpu";
  // Each rank reads only its own tiles of A (and their mirrors, for the symmetry check); rank 0
  // also reads all of it for --check (the FP64 backward error over every tile).
  std::optional<SymmetricTileReader> reader;
  std::optional<mpi::DistTileMatrix> tiles;
  mpi::agree(world, [&] {
    reader.emplace(c.input);
    const linalg::TileLayout layout(reader->n(), reader->n(),
                                    c.tile > 0 ? c.tile
                                    : gpu      ? 1024
                                               : 512,
                                    linalg::TileFill::lower);
    tiles.emplace(world, layout, grid);
    if (g.rank == 0 && c.check)
      input = linalg::TileMatrix::from_dense(read_symmetric(c.input), layout.tile_size(),
                                             linalg::TileFill::lower, DType::f32, Memory::host);
  });
  // The entry read_symmetric would name: the earliest failure over the ranks, thrown by its rank.
  SymmetricTileReader::Failure mine;
  mpi::agree(world, [&] {
    const linalg::TileLayout& layout = tiles->layout();
    for (std::int64_t j = 0; j < layout.tile_cols(); ++j)
      for (std::int64_t i = j; i < layout.tile_rows(); ++i) {
        if (!tiles->owns(i, j)) continue;
        float* tile = tiles->tile(i, j);
        SymmetricTileReader::Failure f = reader->read_tile(layout, i, j, tile);
        // check_float32_range's overflow test on the float32 tile (column-major, ld its height):
        // the entries read were finite, so an inf is one that overflowed. (Its diagonal test
        // needs the float64 value, which only read_tile saw: a diagonal that underflows is left
        // to the factorization's "not positive definite" here.)
        const std::int64_t h = layout.tile_height(i), w = layout.tile_width(j);
        const std::int64_t r0 = i * layout.tile_size(), c0 = j * layout.tile_size();
        for (std::int64_t r = 0; r < h; ++r)
          for (std::int64_t col = 0; col < w && c0 + col <= r0 + r; ++col) {
            const std::int64_t key = (r0 + r) * layout.rows() + c0 + col;
            if (std::isinf(tile[col * h + r]) && (f.key < 0 || key < f.key))
              f = {key, overflow_message(c.input, r0 + r, c0 + col, "")};
          }
        if (f.key >= 0 && (mine.key < 0 || f.key < mine.key)) mine = std::move(f);
      }
  });
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  const std::int64_t first = world.min(mine.key < 0 ? kNone : mine.key);
  mpi::agree(world, [&] {
    if (first != kNone && mine.key == first) throw InvalidInput(mine.message);
  });
  reader.reset();
  info(g, "cholesky: n = " + std::to_string(tiles->layout().rows()) + ", tile " +
              std::to_string(tiles->layout().tile_size()) + ", policy " + options.policy.name() +
              ", " + where + ", " + std::to_string(g.ranks) + " MPI ranks on a " +
              std::to_string(grid.rows) + " x " + std::to_string(grid.cols) + " grid");
  mpi::CholeskyTraffic traffic;
  const auto t0 = std::chrono::steady_clock::now();
  const linalg::CholeskyReport r = mpi::cholesky(*tiles, options, &traffic);
  // The job's time is its slowest rank's.
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  const double ms = static_cast<double>(world.max(static_cast<std::int64_t>(ns))) * 1e-6;
  // --check needs all of L on rank 0 (the FP64 backward error over every tile): gathered then.
  // Otherwise every rank writes the rows of its own tiles into the file.
  linalg::TileMatrix l;
  mpi::NpyWrite written;
  if (c.check)
    l = tiles->gather(0);
  else
    written = tiles->write_lower_npy(c.output, 0);
  warn_gathered(g, "cholesky", written.ranks_without_file, c.output, "L");
  // Per-rank figures, each rank filling its own entry.
  const auto size = static_cast<std::size_t>(g.ranks), me = static_cast<std::size_t>(g.rank);
  std::vector<std::int64_t> sent(size, 0), workspace(size, 0), devices(size, 0);
  sent[me] = traffic.bytes_sent;
  workspace[me] = r.workspace_bytes;
  devices[me] = gpu ? options.devices.front() : -1;
  world.sum(std::span<std::int64_t>(sent));
  world.sum(std::span<std::int64_t>(workspace));
  world.sum(std::span<std::int64_t>(devices));
  const double waited = world.sum(traffic.wait_seconds);
  mpi::agree(world, [&] {
    if (g.rank != 0) return;
    linalg::CholeskyReport job = r;
    job.workspace_bytes = *std::max_element(workspace.begin(), workspace.end());
    nlohmann::json ranks;
    ranks["ranks"] = g.ranks;
    ranks["grid"] = {grid.rows, grid.cols};
    ranks["bytes_sent_per_rank"] = sent;
    ranks["bytes_moved"] = std::accumulate(sent.begin(), sent.end(), std::int64_t{0});
    ranks["mpi_wait_ms_mean"] = waited * 1e3 / static_cast<double>(g.ranks);
    ranks["workspace_bytes_per_rank"] = workspace;
    if (gpu) ranks["device_per_rank"] = devices;
    // The one-process devices line and report fields describe --devices, not GPU ranks.
    linalg::CholeskyOptions shown = options;
    shown.devices.clear();
    finish(g, c, tiles->layout(), l, std::move(written.file), input, where, shown, job, ms, ranks);
    std::cout << g.ranks << " MPI ranks on a " << grid.rows << " x " << grid.cols << " grid, "
              << ranks["bytes_moved"].get<std::int64_t>() << " bytes moved\n";
  });
}
#endif

void run_cholesky(const Globals& g, const CholeskyCliOptions& c) {
#if HALFSCOPE_HAS_MPI
  // A job of one rank takes the MPI path when it names a grid (--grid 1x1): how the rank path is
  // tested and measured against the one-process run on one device.
  if (g.ranks > 1 || (mpi::launched() && !c.grid.empty())) {
    run_over_ranks(g, c);
    return;
  }
#endif
  linalg::CholeskyOptions options;
  options.policy = check_arguments(c);
  options.recover = c.recover;
  options.scale = !c.no_scale;
  options.device_memory = check_gpu_options(c, 1);
  (void)cholesky_grid(c.grid, 1);  // one process: only 1x1
  const std::string device_text = c.device.empty() ? g.device : c.device;
  const DeviceKind device = c.devices.empty() ? resolve_device(parse_device_kind(device_text))
                                              : check_device_list(c.devices, device_text);
  const bool gpu = device == DeviceKind::Cuda;
  if (c.device_memory_given && !gpu)
    throw InvalidInput(
        "--device-memory " + c.device_memory +
        ": expected a GPU run (--devices, or --device cuda or auto with a CUDA "
        "device), found " +
        (parse_device_kind(device_text) == DeviceKind::Cpu ? "--device cpu" : "no CUDA device"));
  // The budget bounds the listed devices' memory, so a budget alone lists device 0: this
  // process's current device, the one --device cuda uses.
  options.devices = c.devices.empty() && c.device_memory_given ? std::vector<int>{0} : c.devices;
  const std::int64_t nb = c.tile > 0 ? c.tile : gpu ? 1024 : 512;

  const Array a = read_symmetric(c.input);
  check_float32_range(c.input, a);
  const std::int64_t n = a.dim(0);
  // The FP32 input tiles; kept on the host for --check, since the factorization is in place.
  const linalg::TileMatrix input =
      linalg::TileMatrix::from_dense(a, nb, linalg::TileFill::lower, DType::f32, Memory::host);
  // With a device list the matrix stays on the host: the library copies it to the devices (and
  // streams it through one device's budget out of core when it does not fit).
  const bool on_device = gpu && options.devices.empty();
  linalg::TileMatrix l = linalg::TileMatrix::from_dense(a, nb, linalg::TileFill::lower, DType::f32,
                                                        on_device ? Memory::device : Memory::host);
  const char* where = gpu ? "cuda" : "cpu";
  info(g, "cholesky: n = " + std::to_string(n) + ", tile " + std::to_string(nb) + ", policy " +
              options.policy.name() + ", " + where +
              (options.devices.empty() ? "" : ", devices " + device_list_text(options.devices)));
  const auto t0 = std::chrono::steady_clock::now();
  const linalg::CholeskyReport r = linalg::cholesky_tiles(l, options);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  finish(g, c, l.layout, l, nullptr, input, where, options, r, ms, nlohmann::json::object());
}

}  // namespace

void register_cholesky(CLI::App& app, Globals& g) {
  auto c = std::make_shared<CholeskyCliOptions>();
  auto* cmd = app.add_subcommand(
      "cholesky", "mixed-precision tile Cholesky A = L L^T of a symmetric positive definite .npy");
  cmd->add_option("input", c->input, "A: n x n symmetric float32 / float64 .npy")->required();
  cmd->add_option("-o,--output", c->output, "L: n x n float32 .npy, upper triangle zero")
      ->required();
  cmd->add_option("--policy", c->policy,
                  "GEMM precision per tile: uniform:<V>, band:SP=2,HP1=rest, adaptive:tol=1e-6 "
                  "(V: DP SP TF32 HP1 HP2 HP3 BF16)")
      ->capture_default_str();
  cmd->add_option("--tile", c->tile, "tile size nb (default 1024 on the GPU, 512 on the CPU)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  cmd->add_option("--device", c->device, "auto, cpu or cuda (default: the global --device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_flag("--recover", c->recover,
                "on a failure refactor with the failing region promoted one precision up");
  cmd->add_flag("--no-scale", c->no_scale,
                "run FP16 variants on A as given (as study 002), without the power-of-4 scaling "
                "that moves a matrix whose largest diagonal entry is outside [2^-6, 2^12] near 1");
  cmd->add_flag("--check", c->check, "print ||L L^T - A||_F / ||A||_F computed in FP64");
  cmd->add_option("--devices", c->devices,
                  "CUDA devices to factor on, comma-separated (e.g. 0,1): tile columns dealt "
                  "round-robin; A stays in host memory and is copied to them")
      ->delimiter(',');
  auto* budget = cmd->add_option(
      "--device-memory", c->device_memory,
      "device memory the factorization may use per device, in bytes or with a suffix K, M, G, "
      "T (powers of 1024, e.g. 16G; default: what is free less 5%); on one device a matrix "
      "beyond it is factored out of core (without --devices: device 0)");
  cmd->add_option("--report", c->report,
                  "also write a JSON report (tiles per variant, time, out-of-core slabs, bytes "
                  "copied)");
  cmd->add_option("--grid", c->grid,
                  "under mpirun: the P x Q process grid of the tiles, e.g. 2x2 (default: the "
                  "squarest with P <= Q)");
  cmd->callback([&g, c, budget] {
    c->device_memory_given = budget->count() > 0;
    run_cholesky(g, *c);
  });
}

}  // namespace halfscope::cli
