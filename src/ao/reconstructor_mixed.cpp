// The mixed-precision tomographic reconstructor R = Ctm Cmm^-1 (include/halfscope/ao/
// reconstructor.hpp): Cmm generated in FP32 straight into lower tiles, factored in place by the
// tile Cholesky under the options' policy, then X Cmm = Ctm by the two triangular solves
// (study 002 Algorithms 1 and 2). Everything stays where the device is: on the GPU, Cmm and Ctm
// are generated in device memory and never cross PCIe until R is returned (if asked for on the
// host). With a device-memory budget (or where they cannot fit the device) Cmm lives in host
// memory instead and streams through the GPU, and Ctm too unless it fits beside the streamed
// solve (on_host_memory; docs/scaling.md).
//
// Layouts: Ctm (m x n, row-major) is exactly the r x n right-hand-side form of solve_right, so
// it is solved in place and becomes R. With the Woodbury treatment of the LGS tip-tilt constants
// (reconstructor_tiptilt.hpp) the right-hand sides are [Ctm; U^T], (m + q) x n, and R is the view
// of their first m rows after the correction.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ao/reconstructor_host.hpp"
#include "ao/reconstructor_tiptilt.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "linalg/solve_devices.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::ao {
namespace {

// Milliseconds of one phase: CUDA events on the GPU, the steady clock on the CPU. The GPU phases
// (covariance_tiles, cholesky_tiles, solve_right) run on their own streams and synchronise before
// they return, so events on the legacy stream around them bracket all their work.
class PhaseTimer {
 public:
  // The CUDA events exist only for a GPU run: creating them needs a driver, which a CPU run on a
  // CUDA build must not.
  explicit PhaseTimer(DeviceKind device) : gpu_(device == DeviceKind::Cuda) {
#if HALFSCOPE_WITH_CUDA
    if (gpu_) events_.emplace();
#endif
  }

  void start() {
#if HALFSCOPE_WITH_CUDA
    if (gpu_) {
      events_->start();
      return;
    }
#endif
    begin_ = std::chrono::steady_clock::now();
  }

  double stop_ms() {
#if HALFSCOPE_WITH_CUDA
    if (gpu_) return static_cast<double>(events_->stop_ms());
#endif
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin_)
        .count();
  }

 private:
  bool gpu_;
  std::chrono::steady_clock::time_point begin_{};
#if HALFSCOPE_WITH_CUDA
  std::optional<cuda::EventTimer> events_;
#endif
};

// The run with Cmm in host memory (ReconstructorOptions::device_memory): generated on `device`
// piece by piece into pinned host memory, factored out of core where it does not fit the budget,
// solved with the factor streamed through the device. The right-hand sides [Ctm; U^T] (4.5 GB at
// the E-ELT) stay on the device when they fit beside the streamed solve: generated, solved and
// corrected there, never crossing the link (the host's FP64 tip-tilt pass over them took ~1 s);
// otherwise they are generated into pinned host memory and solved by blocks of rows.
Reconstructor on_host_memory(const AoSystem& system, const ReconstructorOptions& options,
                             const std::vector<detail::TiptiltGroup>& groups, int device,
                             std::int64_t budget, Reconstructor out) {
  const auto q = static_cast<std::int64_t>(groups.size());
  PhaseTimer timer(out.device);
  timer.start();
  linalg::TileMatrix cmm = detail::covariance_tiles_on_host(
      q > 0 ? detail::without_lgs_tiptilt(system) : system, options.tile, device, budget);
  out.covariance_ms = timer.stop_ms();
  linalg::CholeskyOptions factor;
  factor.policy = options.policy;
  factor.recover = options.recover;
  factor.devices = {device};
  factor.device_memory = budget;
  timer.start();
  out.factor = linalg::cholesky_tiles(cmm, factor);
  out.factor_ms = timer.stop_ms();

  const std::int64_t m = truth_count(system), n = measurement_count(system);
  const std::int64_t rhs_bytes = (m + q) * n * 4;
  const bool rhs_on_device =
      rhs_bytes + linalg::detail::streamed_solve_need(cmm, options.solve_policy, m + q) <= budget;
  timer.start();
  Array rhs = rhs_on_device ? detail::ctm_rows_on_device(system, m + q, device)
                            : detail::ctm_rows_on_host(system, m + q, device, budget);
  if (q > 0) detail::write_indicator_rows(rhs, m, groups);
  out.covariance_ms += timer.stop_ms();
  out.rhs_memory = rhs.memory();
  linalg::SolveOptions solve;
  solve.policy = options.solve_policy;
  solve.devices = {device};
  timer.start();
  if (rhs_on_device || q == 0) {
    solve.device_memory = rhs_on_device ? budget - rhs_bytes : budget;
    out.solve = linalg::solve_right(cmm, rhs, solve);
    detail::apply_tiptilt_correction(rhs, m, groups);
  } else {
    // Rows in host memory, solved by blocks: each block corrected on the device before it goes
    // back (the host's FP64 passes over 4.5 GB took longer than the GPU's), W's block first.
    solve.device_memory = budget - detail::DeviceTiptiltBlocks::device_bytes(m, q, n);
    detail::DeviceTiptiltBlocks blocks(groups, m, n);
    out.solve = linalg::detail::solve_right_streamed_with(
        cmm, rhs, solve, [&](float* rows, std::int64_t first, std::int64_t count, void* stream) {
          blocks(rows, first, count, stream);
        });
    if (!blocks.applied()) detail::apply_tiptilt_correction(rhs, m, groups);
  }
  out.solve_ms = timer.stop_ms();
  Array r = q > 0 ? rhs.slice(0, 0, m) : rhs;
  // Host rows are pinned: returned as they are for host results.
  const bool keep = rhs_on_device == (options.result_memory == Memory::device);
  out.matrix = keep ? r : r.to(options.result_memory);
  return out;
}

}  // namespace

std::string_view tiptilt_method_name(TiptiltMethod m) noexcept {
  return m == TiptiltMethod::woodbury ? "woodbury" : "direct";
}

TiptiltMethod parse_tiptilt_method(std::string_view text, std::string_view field) {
  if (text == "woodbury") return TiptiltMethod::woodbury;
  if (text == "direct") return TiptiltMethod::direct;
  throw InvalidInput(std::string(field) + ": expected woodbury or direct, found \"" +
                     std::string(text) + "\"");
}

Reconstructor tomographic_reconstructor(const AoSystem& system,
                                        const ReconstructorOptions& options) {
  if (options.tile < 1)
    throw InvalidInput("tomographic_reconstructor: tile: expected a tile size >= 1, found " +
                       std::to_string(options.tile));
  Reconstructor out;
  out.device = resolve_device(options.device);
  if (options.result_memory == Memory::device && out.device != DeviceKind::Cuda)
    throw InvalidInput(
        "tomographic_reconstructor: result_memory: device memory needs the CUDA device, found "
        "the CPU device");
  if (!options.devices.empty() && out.device != DeviceKind::Cuda)
    throw InvalidInput(
        "tomographic_reconstructor: devices: expected the CUDA device, found the CPU device");
  if (options.device_memory < 0)
    throw InvalidInput(
        "tomographic_reconstructor: device_memory: expected a size in bytes >= 0, found " +
        std::to_string(options.device_memory));
  if (options.device_memory > 0 && out.device != DeviceKind::Cuda)
    throw InvalidInput(
        "tomographic_reconstructor: device_memory: expected the CUDA device, found the CPU "
        "device");
  if (options.device_memory > 0 && options.devices.size() > 1)
    throw InvalidInput(
        "tomographic_reconstructor: device_memory: expected one device (the run streams Cmm "
        "through it), found " +
        std::to_string(options.devices.size()) + " devices");
  const Memory memory = out.device == DeviceKind::Cuda ? Memory::device : Memory::host;
  // FP32 covariances (every element computed in FP64, rounded once), noise on: without it Cmm is
  // only semi-definite.
  CovarianceOptions covariance_options;
  covariance_options.device = out.device;
  covariance_options.dtype = DType::f32;
  covariance_options.memory = memory;
  covariance_options.noise = true;

  const bool woodbury = options.tiptilt == TiptiltMethod::woodbury;
  const std::vector<detail::TiptiltGroup> groups =
      woodbury ? detail::lgs_tiptilt_groups(system) : std::vector<detail::TiptiltGroup>{};
  const auto q = static_cast<std::int64_t>(groups.size());
  out.tiptilt_groups = q;

  // Cmm in host memory when asked, or when its tiles and the right-hand sides cannot both be on
  // the device (the in-core run would fail allocating them).
  int device = 0;
  std::int64_t budget = 0;
  bool on_host = false;
  if (out.device == DeviceKind::Cuda && options.devices.size() <= 1) {
#if HALFSCOPE_WITH_CUDA
    device = options.devices.empty() ? cuda::current_device() : options.devices.front();
#endif
    budget = detail::reconstructor_budget(device, options.device_memory);
    const std::int64_t n = measurement_count(system);
    const std::int64_t tiles =
        linalg::TileLayout(n, n, options.tile, linalg::TileFill::lower).element_count() * 4;
    const std::int64_t rhs = (truth_count(system) + q) * n * 4;
    on_host = options.device_memory > 0 || tiles + rhs > budget;
  }

  if (on_host) return on_host_memory(system, options, groups, device, budget, std::move(out));
  PhaseTimer timer(out.device);
  timer.start();
  linalg::TileMatrix cmm = covariance_tiles(q > 0 ? detail::without_lgs_tiptilt(system) : system,
                                            CovarianceKind::cmm, options.tile, covariance_options);
  Array ctm = covariance(system, CovarianceKind::ctm, covariance_options);
  const std::int64_t m = ctm.dim(0), n = ctm.dim(1);
  Array rhs = ctm;
  if (q > 0) {
    // [Ctm; U^T]: one copy of Ctm (4.5 GB for the E-ELT, milliseconds on the GPU) buys the q
    // extra right-hand sides in the same solve.
    rhs = Array(DType::f32, {m + q, n}, memory);
    copy_bytes(rhs.data(), memory, ctm.data(), memory, ctm.nbytes());
    ctm = Array{};
    detail::write_indicator_rows(rhs, m, groups);
  }
  out.covariance_ms = timer.stop_ms();
  out.rhs_memory = memory;

  linalg::CholeskyOptions factor;
  factor.policy = options.policy;
  factor.recover = options.recover;
  factor.devices = options.devices;
  timer.start();
  out.factor = linalg::cholesky_tiles(cmm, factor);
  out.factor_ms = timer.stop_ms();

  linalg::SolveOptions solve;
  solve.policy = options.solve_policy;
  solve.devices = options.devices;
  timer.start();
  out.solve = linalg::solve_right(cmm, rhs, solve);
  detail::apply_tiptilt_correction(rhs, m, groups);
  out.solve_ms = timer.stop_ms();

  // R is the first m rows: a view sharing the buffer (C-contiguous, offset 0).
  Array r = q > 0 ? rhs.slice(0, 0, m) : rhs;
  out.matrix = r.memory() == options.result_memory ? r : r.to(options.result_memory);
  return out;
}

}  // namespace halfscope::ao
