// The tomographic reconstructor over MPI ranks (include/halfscope/mpi/reconstructor.hpp): the
// steps of src/ao/reconstructor_mixed.cpp with the distributed covariance, factorization and
// solves. Right-hand sides per rank: [Ctm rows of this rank; U^T] ((count + q) x n), so the
// Woodbury correction (ao/reconstructor_tiptilt.hpp) of this rank's rows needs nothing from the
// other ranks: every rank solves the q rows of W = U^T K^-1 itself (q is twice the LGS count).
// GPU ranks generate their tiles of Cmm and rows of Ctm, factor and solve on their devices
// (mpi::covariance_tiles, mpi::cholesky and mpi::solve_right with one device): the tiles of Cmm
// and of L go through the rank's host memory between phases (where MPI takes them from), the
// right-hand sides stay on the device until R's rows come down.
#include "halfscope/mpi/reconstructor.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ao/covariance_select.hpp"
#include "ao/reconstructor_tiptilt.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "mpi/reconstructor_threads.hpp"

namespace halfscope::mpi {
namespace {

using Clock = std::chrono::steady_clock;

// The slowest rank's milliseconds since `start` (a phase ends when its last rank is done).
double slowest_ms(const Comm& comm, Clock::time_point start) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return static_cast<double>(comm.max(static_cast<std::int64_t>(us))) / 1000.0;
}

// The rank's CUDA device, or -1 for a CPU rank: device cpu / auto give CPU ranks (as under
// `mpirun halfscope cholesky`), cuda a GPU rank on options.devices' one device, else on
// `host_device` (rank_device). Its context is made here, before any phase is timed.
int check_options(const ao::ReconstructorOptions& options, int host_device) {
  if (options.tile < 1)
    throw InvalidInput("mpi::tomographic_reconstructor: tile: expected a tile size >= 1, found " +
                       std::to_string(options.tile));
  if (options.result_memory != Memory::host)
    throw Unsupported(
        "mpi::tomographic_reconstructor: result_memory: expected host memory (each rank's rows "
        "of R), found device");
  if (options.device != DeviceKind::Cuda) {
    if (!options.devices.empty())
      throw Unsupported("mpi::tomographic_reconstructor: devices: CPU ranks use no GPU, found " +
                        std::to_string(options.devices.size()) +
                        " device(s) listed (device cuda makes GPU ranks)");
    return -1;
  }
  if (options.devices.size() > 1)
    throw InvalidInput(
        "mpi::tomographic_reconstructor: devices: expected at most one CUDA device per rank (a "
        "GPU rank), found " +
        std::to_string(options.devices.size()));
  const int device = options.devices.empty() ? host_device : options.devices.front();
  if (device < 0)
    throw Unsupported(
        "mpi::tomographic_reconstructor: device: cuda was asked for, but this rank's host has "
        "no usable CUDA device (" +
        query_devices().status + ")");
  prepare_device(device);
  return device;
}

// `rows` in host memory: itself, or a GPU rank's rows copied down (4.5 GB of R at the E-ELT size:
// Array copies that large go through pinned staging on the host's threads, copy_bytes).
Array to_host(const Array& rows) {
  return rows.on_device() ? rows.to(Memory::host) : rows;
}

}  // namespace

ReconstructorPart tomographic_reconstructor_rows(const Comm& comm, const ao::AoSystem& system,
                                                 const ao::ReconstructorOptions& options,
                                                 ProcessGrid grid) {
  const detail::HostThreadShare share(comm);
  ReconstructorPart part;
  part.grid = grid;
  std::vector<ao::detail::TiptiltGroup> groups;
  // Collective, and options are the same on every rank: all of them ask, or none.
  const int host_device = options.device == DeviceKind::Cuda ? rank_device(comm) : -1;
  int device = -1;
  agree(comm, [&] {
    device = check_options(options, host_device);
    grid.check(comm.size());
    part.m = ao::covariance_rows(system, ao::CovarianceKind::ctm);
    part.n = ao::covariance_cols(system, ao::CovarianceKind::ctm);
    if (options.tiptilt == ao::TiptiltMethod::woodbury)
      groups = ao::detail::lgs_tiptilt_groups(system);
  });
  const auto q = static_cast<std::int64_t>(groups.size());
  ao::Reconstructor& out = part.local;
  out.device = device < 0 ? DeviceKind::Cpu : DeviceKind::Cuda;
  part.device = device;
  out.tiptilt_groups = q;
  part.rows = row_block(part.m, comm.rank(), comm.size());
  const std::int64_t count = part.rows.count(), n = part.n;

  // Cmm (K with Woodbury) in owned tiles; this rank's Ctm rows and U^T as right-hand sides.
  auto start = Clock::now();
  DistTileMatrix cmm =
      covariance_tiles(comm, q > 0 ? ao::detail::without_lgs_tiptilt(system) : system,
                       ao::CovarianceKind::cmm, options.tile, grid, /*noise=*/true, device);
  // A GPU rank keeps its right-hand sides on its device (the current one since check_options)
  // from their generation through the solves and the Woodbury correction.
  Array rhs;
  agree(comm, [&] {
    const Memory where = device < 0 ? Memory::host : Memory::device;
    if (count + q > 0) rhs = Array(DType::f32, {count + q, n}, where);  // may fail: agreed
    if (count > 0 && device < 0)
      ao::detail::covariance_rows_selected(system, ao::CovarianceKind::ctm, part.rows.begin,
                                           part.rows.end, rhs.data_as<float>(), /*noise=*/true);
    else if (count > 0)
      ao::detail::covariance_rows_selected_cuda(system, ao::CovarianceKind::ctm, part.rows.begin,
                                                part.rows.end, rhs.data_as<float>(),
                                                /*noise=*/true);
    if (q > 0) ao::detail::write_indicator_rows(rhs, count, groups);
  });
  out.covariance_ms = slowest_ms(comm, start);

  linalg::CholeskyOptions factor;
  factor.policy = options.policy;
  factor.recover = options.recover;
  if (device >= 0) factor.devices = {device};
  start = Clock::now();
  out.factor = cholesky(cmm, factor, &part.factor_traffic);
  out.factor_ms = slowest_ms(comm, start);

  linalg::SolveOptions solve;
  solve.policy = options.solve_policy;
  if (device >= 0) solve.devices = {device};
  start = Clock::now();
  out.solve = solve_right(cmm, rhs, solve, &part.solve_traffic);
  agree(comm, [&] {
    if (count > 0) ao::detail::apply_tiptilt_correction(rhs, count, groups);
    // R's rows: the first `count` (a view sharing the buffer), in host memory.
    if (count > 0) out.matrix = to_host(q > 0 ? rhs.slice(0, 0, count) : rhs);
  });
  out.solve_ms = slowest_ms(comm, start);
  part.bytes_moved =
      comm.sum(part.factor_traffic.bytes_received + part.solve_traffic.bytes_received);
  return part;
}

Array gather_rows(const Comm& comm, const ReconstructorPart& part, int root) {
  const Array& mine = part.local.matrix;
  const auto* bytes = mine.empty() ? nullptr : static_cast<const std::byte*>(mine.data());
  const std::size_t size = mine.empty() ? 0 : static_cast<std::size_t>(mine.nbytes());
  const std::vector<std::vector<std::byte>> all = comm.gather_bytes({bytes, size}, root);
  if (comm.rank() != root) return Array{};
  Array r(DType::f32, {part.m, part.n});
  auto* at = static_cast<std::byte*>(r.data());
  std::int64_t total = 0;
  for (const std::vector<std::byte>& block : all) total += static_cast<std::int64_t>(block.size());
  if (total != r.nbytes())
    throw Error("mpi::gather_rows: the ranks sent " + std::to_string(total) + " bytes, expected " +
                std::to_string(r.nbytes()) + " (" + std::to_string(part.m) + " x " +
                std::to_string(part.n) + " float32)");
  for (const std::vector<std::byte>& block : all) {
    if (!block.empty()) std::memcpy(at, block.data(), block.size());
    at += block.size();
  }
  return r;
}

NpyWrite write_rows_npy(const Comm& comm, const ReconstructorPart& part,
                        const std::filesystem::path& path, int root) {
  return write_by_ranks(
      comm, path, {part.m, part.n}, root,
      [&](const SharedNpy& out) {
        const Array& mine = part.local.matrix;
        if (!mine.empty()) out.write(mine.data_as<float>(), mine.size(), part.rows.begin * part.n);
      },
      [&] { return gather_rows(comm, part, root); },
      [&](const SharedNpy& out, const Array& whole) {
        out.write(whole.data_as<float>(), whole.size(), 0);
      });
}

ao::Reconstructor tomographic_reconstructor(const Comm& comm, const ao::AoSystem& system,
                                            const ao::ReconstructorOptions& options,
                                            ProcessGrid grid) {
  ReconstructorPart part = tomographic_reconstructor_rows(comm, system, options, grid);
  Array r = gather_rows(comm, part, 0);
  ao::Reconstructor out = std::move(part.local);
  out.matrix = std::move(r);
  return out;
}

}  // namespace halfscope::mpi
