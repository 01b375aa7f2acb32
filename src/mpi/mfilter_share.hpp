// Internal: the pieces of matched filtering over MPI ranks that mfilter.cpp (the stack) and
// mfilter_detect.cpp (detection) share: the agreed preparation, one rank's block computed by the
// one-process path, the GPU of a rank, and the fault-injection test hook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/mfilter.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mpi::mf {

/// mfilter::prepare on every rank inside `agree` (host inputs only, options.devices empty:
/// InvalidInput naming `what`), then a check that every rank prepared the same call (shapes,
/// step, normalization, stack or per channel, method, precision): InvalidInput on every rank
/// otherwise, naming the smallest and largest values the ranks hold.
mfilter::Prepared prepare_everywhere(const Comm& comm, const Array& templates, const Array& data,
                                     const MfOptions& options, const MfNetwork& network,
                                     const char* what);

/// Templates [t0, t1) x correlation times [c0, c1) of the prepared call, float32 on the host,
/// shaped like the call's result ((rows, cols) or (rows, C, cols)), computed by the one-process
/// path (run_cpu; on the GPU run_cuda_devices on `device`). A time block runs on a slice of the
/// prepared data that starts on a multiple of mfilter::kRecomputeEvery samples (where the FP64
/// running window energies restart), so every CPU element equals the whole call's.
Array compute_block(const mfilter::Prepared& p, std::int64_t t0, std::int64_t t1, std::int64_t c0,
                    std::int64_t c1, int device);

/// The detection candidates (mfilter::detect_candidates_cuda: local maxima above the threshold,
/// not declustered) of the same block, searched on `device` in time chunks: no part of the stack
/// comes to the host. Template and correlation indices and samples are the whole call's. The
/// first and last correlation times of the block see only one neighbour: the caller keeps the
/// candidates of the times whose neighbours both lie in the block (or outside the call).
/// Unsupported but for a GPU call with an absolute threshold.
std::vector<Detection> block_candidates(const mfilter::Prepared& p, std::int64_t t0,
                                        std::int64_t t1, std::int64_t c0, std::int64_t c1,
                                        int device, const DetectOptions& detect);

/// The test hook: when HALFSCOPE_FAULT_RANK is "r" and this is rank r of `comm`, throws Error
/// (an injected failure, agreed like any other); "r:abort" aborts the process instead (a crash,
/// which the launcher turns into the end of the job). InvalidInput for any other value.
void fault_hook(const Comm& comm);

/// The detection candidates of one block as bytes (Detection is trivially copyable), and back.
std::vector<std::byte> to_bytes(const std::vector<Detection>& detections);
std::vector<Detection> from_bytes(std::span<const std::byte> bytes);

}  // namespace halfscope::mpi::mf
