// `halfscope ao reconstructor SYSTEM -o R.npy`: the mixed-precision tomographic reconstructor
// R = Ctm Cmm^-1 (ao/reconstructor.hpp: Cmm in FP32 tiles, tile Cholesky under a precision policy,
// two triangular solves), written as an m x n float32 .npy; with --evaluate, its tomographic
// error and Strehl ratio next to those of the FP64 reconstructor (evaluation.hpp).
//
// Under mpirun (several ranks, builds with MPI): the same options and outputs, R built by
// mpi::tomographic_reconstructor_rows (Cmm generated and factored 2D block-cyclic, each rank its
// block of R's rows), gathered and written once by rank 0; every step that can fail on some ranks
// only (reading the system, the output folder, the evaluation and the write on rank 0) is agreed,
// so every rank ends with the same status and the error prints once. `--device cuda` makes GPU
// ranks (each factors and solves on the device mpi::rank_device gives it); auto keeps CPU ranks.
// One rank takes this path when it names --grid (how it is measured against one process).
//
// With --devices (one process): the covariances are generated on the current CUDA device, the
// factorization deals its tile columns over the listed devices and the solves split R's rows over
// them (ReconstructorOptions::devices). With --device-memory (one process, one device): Cmm and
// Ctm go to host memory and are streamed through the device within that budget, out of core
// where they do not fit (ReconstructorOptions::device_memory).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ao_system_arg.hpp"
#include "cli.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/linalg/policy.hpp"

#if HALFSCOPE_HAS_MPI
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/reconstructor.hpp"
#endif

namespace halfscope::cli {
namespace {

struct AoReconstructorCliOptions {
  AoSystemArg system;
  std::string output, policy = "uniform:SP", solve_policy = "uniform:SP", device,
                      tiptilt = "woodbury", grid;
  std::int64_t tile = 0;
  bool recover = false, evaluate = false;
  double wavelength_m = 1.65e-6;
  std::vector<int> devices;
  std::string device_memory;
  bool device_memory_given = false;  // from the option's count: "" is a bad size, not none
};

// The tomographic error and Strehl of R and of the FP64 reconstructor on the same FP64
// covariances (generated once), and their differences.
void print_evaluation(const ao::AoSystem& system, const Array& r, DeviceKind device,
                      double wavelength_m) {
  ao::CovarianceOptions co;
  co.device = device;
  co.dtype = DType::f64;
  const Array cmm = ao::covariance(system, ao::CovarianceKind::cmm, co);
  const Array ctm = ao::covariance(system, ao::CovarianceKind::ctm, co);
  const Array ctt = ao::covariance(system, ao::CovarianceKind::ctt, co);
  ao::EvaluationOptions eo;
  eo.device = device;
  eo.wavelength_m = wavelength_m;
  const Array r64 = ao::reconstructor_fp64(cmm, ctm, device);
  const ao::Evaluation mine =
      ao::evaluate_error_covariance(system, ao::error_covariance(ctt, ctm, cmm, r, device), eo);
  const ao::Evaluation ref =
      ao::evaluate_error_covariance(system, ao::error_covariance(ctt, ctm, cmm, r64, device), eo);
  const auto row = [](const char* label, const ao::Evaluation& e) {
    std::cout << label << "  tomographic error " << fixed(e.tomographic_error_nm, 3)
              << " nm rms  Strehl Marechal " << fixed(e.strehl_marechal, 6) << "  OTF "
              << fixed(e.strehl_otf, 6) << "\n";
  };
  std::cout << "evaluation at " << fixed(wavelength_m * 1e6, 3) << " um:\n";
  row("  this R      ", mine);
  row("  FP64 R      ", ref);
  char line[160];
  std::snprintf(line, sizeof line,
                "  difference  tomographic error %+.3e nm  Strehl Marechal %+.3e  OTF %+.3e\n",
                mine.tomographic_error_nm - ref.tomographic_error_nm,
                mine.strehl_marechal - ref.strehl_marechal, mine.strehl_otf - ref.strehl_otf);
  std::cout << line;
}

// The report both paths print: R, the policies, the times, the factor's tiles and recoveries.
// `shape`: R's (over ranks, rank 0 may hold only its own rows of it).
void print_summary(const ao::Reconstructor& rec, const Shape& shape, const char* where,
                   ao::TiptiltMethod tiptilt) {
  std::cout << "R: " << shape[0] << " x " << shape[1] << " float32, policy " << rec.factor.policy
            << ", solve policy " << rec.solve.policy << ", " << where << "\n";
  std::cout << "LGS tip-tilt: " << ao::tiptilt_method_name(tiptilt) << " (" << rec.tiptilt_groups
            << " slope groups corrected)\n";
  std::cout << "times: covariance " << fixed(rec.covariance_ms, 2) << " ms, factor "
            << fixed(rec.factor_ms, 2) << " ms, solves " << fixed(rec.solve_ms, 2) << " ms\n";
  std::cout << "factor tiles:";
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    if (rec.factor.count(v) > 0)
      std::cout << " " << linalg::gemm_variant_name(v) << " " << rec.factor.count(v);
  std::cout << "\nattempts " << rec.factor.attempts << ", recoveries "
            << rec.factor.recoveries.size() << "\n";
  for (const std::string& line : rec.factor.recoveries) std::cout << "  " << line << "\n";
}

ao::ReconstructorOptions parse_options(const AoReconstructorCliOptions& c) {
  ao::ReconstructorOptions o;
  o.policy = linalg::parse_policy(c.policy);
  o.solve_policy = linalg::parse_policy(c.solve_policy);
  if (io::extension_of(c.output) != "npy")
    throw InvalidInput("-o: expected a .npy output file, found '" + c.output + "'");
  check_distinct_paths({{"SYSTEM", c.system.spec}, {"--atmosphere", c.system.atmosphere}},
                       {{"-o", c.output}});
  o.recover = c.recover;
  o.tiptilt = ao::parse_tiptilt_method(c.tiptilt, "--tiptilt");
  o.result_memory = Memory::host;
  return o;
}

#if HALFSCOPE_HAS_MPI
// "PxQ" (e.g. 2x4) as a process grid of `ranks`; the default grid when empty.
mpi::ProcessGrid parse_grid(const std::string& text, int ranks) {
  if (text.empty()) return mpi::ProcessGrid::for_ranks(ranks);
  mpi::ProcessGrid grid;
  const std::size_t x = text.find('x');
  try {
    std::size_t used_rows = 0, used_cols = 0;
    grid.rows = std::stoi(text.substr(0, x), &used_rows);
    grid.cols = x == std::string::npos ? 0 : std::stoi(text.substr(x + 1), &used_cols);
    if (used_rows != x || used_cols != text.size() - x - 1) grid.cols = 0;
  } catch (const std::exception&) {
    grid.cols = 0;
  }
  if (grid.rows < 1 || grid.cols < 1)
    throw InvalidInput("--grid: expected PxQ with P, Q >= 1 (e.g. 2x2), found '" + text + "'");
  grid.check(ranks);
  return grid;
}

void run_over_ranks(const Globals& g, const AoReconstructorCliOptions& c) {
  const mpi::Comm world = mpi::Comm::world();
  ao::ReconstructorOptions o;
  ao::AoSystem system;
  mpi::ProcessGrid grid;
  mpi::agree(world, [&] {
    o = parse_options(c);
    if (g.rank == 0) io::check_output_path(c.output);  // rank 0 writes R
    if (!c.devices.empty())
      refuse_gpu_over_ranks("--devices " + device_list_text(c.devices), g.ranks, c.grid);
    if (c.device_memory_given)
      refuse_gpu_over_ranks("--device-memory " + c.device_memory, g.ranks, c.grid);
    // Not resolved here: auto means CPU ranks; cuda, GPU ranks (refused where a host has none).
    o.device = parse_device_kind(c.device.empty() ? g.device : c.device);
    o.tile = c.tile > 0 ? c.tile : o.device == DeviceKind::Cuda ? 1024 : 512;
    grid = parse_grid(c.grid, g.ranks);
    system = load_ao_system(c.system);
  });
  const char* where = o.device == DeviceKind::Cuda ? "cuda" : "cpu";
  info(g, "ao reconstructor: " + ao_system_label(c.system) +
              ", n = " + std::to_string(ao::measurement_count(system)) + ", m = " +
              std::to_string(ao::truth_count(system)) + ", tile " + std::to_string(o.tile) + ", " +
              where + ", " + std::to_string(g.ranks) + " MPI ranks");
  mpi::ReconstructorPart part = mpi::tomographic_reconstructor_rows(world, system, o, grid);
  const std::int64_t factor_bytes = world.sum(part.factor_traffic.bytes_received);
  const std::int64_t solve_bytes = world.sum(part.solve_traffic.bytes_received);
  const std::int64_t most_rows = world.max(part.rows.count());
  std::vector<std::int64_t> devices(static_cast<std::size_t>(g.ranks), 0);
  devices[static_cast<std::size_t>(g.rank)] = part.device;
  world.sum(std::span<std::int64_t>(devices));
  const Shape shape{part.m, part.n};
  // The evaluation needs all of R on rank 0 (FP64 covariances of the whole system, as without
  // MPI): gathered then. Otherwise every rank writes its own rows into the file.
  mpi::NpyWrite written;
  Array r;
  if (c.evaluate)
    r = mpi::gather_rows(world, part, 0);  // R on rank 0, nothing elsewhere
  else
    written = mpi::write_rows_npy(world, part, c.output, 0);
  warn_gathered(g, "ao reconstructor", written.ranks_without_file, c.output, "R");
  ao::Reconstructor rec = std::move(part.local);
  mpi::agree(world, [&] {
    if (g.rank != 0) return;
    print_summary(rec, shape, where, o.tiptilt);
    std::cout << "MPI: " << g.ranks << " ranks, grid " << grid.rows << " x " << grid.cols
              << ", at most " << most_rows << " rows of R per rank; received " << factor_bytes
              << " bytes in the factorization, " << solve_bytes << " in the solves\n";
    if (o.device == DeviceKind::Cuda) {
      std::cout << "GPU ranks: CUDA device of each rank";
      for (const std::int64_t d : devices) std::cout << " " << d;
      std::cout << "\n";
    }
    if (c.evaluate) {
      print_evaluation(system, r, o.device == DeviceKind::Cuda ? DeviceKind::Cuda : DeviceKind::Cpu,
                       c.wavelength_m);
      io::write_npy(c.output, r);  // atomic: nothing under the name on failure
    } else {
      written.file->commit();
    }
  });
  info(g, "wrote " + c.output);
}
#endif

void run_ao_reconstructor(const Globals& g, const AoReconstructorCliOptions& c) {
#if HALFSCOPE_HAS_MPI
  if (g.ranks > 1 || (mpi::launched() && !c.grid.empty())) return run_over_ranks(g, c);
#endif
  ao::ReconstructorOptions o = parse_options(c);
  if (!c.devices.empty())
    refuse_gpu_over_ranks("--devices " + device_list_text(c.devices), 1, c.grid);
  if (c.device_memory_given) {
    refuse_gpu_over_ranks("--device-memory " + c.device_memory, 1, c.grid);
    o.device_memory = parse_size(c.device_memory, "--device-memory");
    if (o.device_memory == 0)
      throw InvalidInput("--device-memory: expected a size above 0 (e.g. 16G), found '" +
                         c.device_memory + "'");
  }
  if (!c.grid.empty() && c.grid != "1x1")
    throw InvalidInput(
        "--grid: a process grid of several ranks needs mpirun (this run has one "
        "process), found '" +
        c.grid + "'");
  io::check_output_path(c.output);
  const std::string device = c.device.empty() ? g.device : c.device;
  o.device = c.devices.empty() ? resolve_device(parse_device_kind(device))
                               : check_device_list(c.devices, device);
  o.devices = c.devices;
  if (c.device_memory_given && o.device != DeviceKind::Cuda)
    throw InvalidInput("--device-memory " + c.device_memory +
                       ": expected a GPU run, found --device " +
                       (device.empty() ? std::string("auto without a CUDA device") : device));
  o.tile = c.tile > 0 ? c.tile : o.device == DeviceKind::Cuda ? 1024 : 512;
  const ao::AoSystem system = load_ao_system(c.system);
  const std::string label = ao_system_label(c.system);
  const char* where = o.device == DeviceKind::Cuda ? "cuda" : "cpu";
  info(g, "ao reconstructor: " + label + ", n = " + std::to_string(ao::measurement_count(system)) +
              ", m = " + std::to_string(ao::truth_count(system)) + ", tile " +
              std::to_string(o.tile) + ", " + where +
              (o.devices.empty() ? "" : ", devices " + device_list_text(o.devices)));
  const ao::Reconstructor rec = ao::tomographic_reconstructor(system, o);
  print_summary(rec, rec.matrix.shape(), where, o.tiptilt);
  if (!o.devices.empty())
    std::cout << "devices " << device_list_text(o.devices) << ": factorization copied "
              << rec.factor.device_to_device_bytes << " bytes device->device\n";
  if (rec.solve.slabs > 0)
    std::cout << "Cmm in host memory: factorization "
              << (rec.factor.out_of_core_slabs > 0
                      ? "out of core in " + std::to_string(rec.factor.out_of_core_slabs) + " slabs"
                      : std::string("in core")) +
                     ", copied "
              << rec.factor.host_to_device_bytes << " bytes host->device and "
              << rec.factor.device_to_host_bytes << " back; solves in " << rec.solve.slabs
              << " slabs x " << rec.solve.row_blocks << " blocks of rows ("
              << (rec.rhs_memory == Memory::device ? "right-hand sides on the device"
                                                   : "right-hand sides in host memory")
              << "), copied " << rec.solve.host_to_device_bytes << " bytes host->device and "
              << rec.solve.device_to_host_bytes << " back\n";
  // Scored before writing, so a failing evaluation leaves no file behind either.
  if (c.evaluate) print_evaluation(system, rec.matrix, o.device, c.wavelength_m);
  io::write_npy(c.output, rec.matrix);  // atomic: nothing under the name on failure
  info(g, "wrote " + c.output);
}

}  // namespace

void register_ao_reconstructor(CLI::App& ao, Globals& g) {
  auto c = std::make_shared<AoReconstructorCliOptions>();
  auto* cmd = ao.add_subcommand(
      "reconstructor",
      "the mixed-precision reconstructor R = Ctm Cmm^-1 (m x n float32) by the tile Cholesky");
  add_ao_system_options(*cmd, c->system);
  cmd->add_option("-o,--output", c->output, "R as a .npy file (m x n float32)")->required();
  cmd->add_option("--policy", c->policy,
                  "precision policy of the factorization's GEMMs (uniform:<V>, band:..., "
                  "adaptive:tol=...)")
      ->capture_default_str();
  cmd->add_option("--solve-policy", c->solve_policy,
                  "precision policy of the triangular solves' GEMMs (study 002: uniform:HP1)")
      ->capture_default_str();
  cmd->add_option("--tile", c->tile, "tile size nb (default 1024 on the GPU, 512 on the CPU)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  cmd->add_option("--device", c->device, "auto, cpu or cuda (default: the global --device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_flag("--recover", c->recover,
                "on a failure refactor with the failing region promoted one precision up");
  cmd->add_option("--tiptilt", c->tiptilt,
                  "LGS tip-tilt constants: woodbury (factor Cmm without them, exact low-rank "
                  "correction) or direct (factor Cmm as it is)")
      ->capture_default_str();
  cmd->add_option("--devices", c->devices,
                  "CUDA devices of this host, comma-separated (e.g. 0,1): the factorization's "
                  "tile columns and the solves' rows spread over them; covariances generated on "
                  "the current device")
      ->delimiter(',');
  auto* budget = cmd->add_option(
      "--device-memory", c->device_memory,
      "device memory the GPU run may use (bytes, or with K, M, G, T): Cmm and Ctm generated into "
      "host memory and streamed through the device, out of core where they do not fit");
  cmd->add_option("--grid", c->grid,
                  "under mpirun: the PxQ process grid of Cmm's tiles (default: P <= Q, as square "
                  "as the rank count allows); --device cuda makes GPU ranks");
  cmd->add_flag("--evaluate", c->evaluate,
                "print the tomographic error and Strehl of R and of the FP64 reconstructor");
  cmd->add_option("--wavelength", c->wavelength_m, "science wavelength in metres (--evaluate)")
      ->capture_default_str()
      ->check(positive_number("a wavelength in metres"));
  cmd->callback([&g, c, budget] {
    c->device_memory_given = budget->count() > 0;
    run_ao_reconstructor(g, *c);
  });
}

}  // namespace halfscope::cli
