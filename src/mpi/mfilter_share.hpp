// Internal: the pieces of matched filtering over MPI ranks that mfilter.cpp (the stack) and
// mfilter_detect.cpp (detection) share: the agreed preparation, one rank's template group, the
// whole call's data factors and one rank's window of the data (mfilter_data.cpp), one rank's
// block computed by the one-process path, and the fault-injection test hook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/mfilter.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "mfilter/data_factors.hpp"
#include "mfilter/dispatch.hpp"

namespace halfscope::mpi::mf {

/// How prepare_call sees data read from `data`, and templates read from `templates`.
mfilter::ArrayInfo data_info(const io::SampleSource& data);
mfilter::ArrayInfo template_info(const io::TemplateSource& templates);

/// Sources over host data and templates in memory (io::array_samples, io::array_templates;
/// collective, agreed), or none for inputs that prepare_everywhere refuses (device arrays, bad
/// shapes), whose message is then the one-process call's.
std::unique_ptr<io::SampleSource> host_samples(const Comm& comm, const Array& data);
std::unique_ptr<io::TemplateSource> host_templates(const Comm& comm, const Array& templates);

/// mfilter::prepare_call from the inputs' shapes on every rank inside `agree` (host templates
/// and data, options.devices empty: InvalidInput naming `what`), then a check that every rank
/// prepared the same call (shapes, step, normalization, stack or per channel, method,
/// precision): InvalidInput on every rank otherwise, naming the smallest and largest values the
/// ranks hold. Neither the templates nor the data are read: p.templates and p.data stay empty.
mfilter::Prepared prepare_everywhere(const Comm& comm, const mfilter::ArrayInfo& templates,
                                     const mfilter::ArrayInfo& data, const MfOptions& options,
                                     const MfNetworkTables& network, const char* what);

/// Templates [t0, t1) read from `templates` and prepared for the call (mfilter::
/// prepare_template_rows): what the one-process call's p.templates holds for them, bit for bit.
/// A non-finite value is InvalidInput naming the file (when the source has one) and its
/// template's index in the whole bank.
Array group_templates(const io::TemplateSource& templates, const mfilter::Prepared& p,
                      std::int64_t t0, std::int64_t t1);

/// One rank's rows of the network and the whole call's facts that its kernels tile by.
struct GroupNetwork {
  mfilter::NetworkRows rows;     // templates [t0, t1), as mfilter::prepare prepares them
  std::int64_t tile_spread = 0;  // mfilter::tile_moveout_spread of the whole call
  std::int64_t wgmma_row = 0;    // mfilter::wgmma_row_length of the whole call (wgmma calls)
};

/// The rows [t0, t1) of `network` (none when t0 == t1: an idle rank) prepared for the call, then
/// the whole call's facts as the largest of every rank's (collective; template groups start on
/// multiples of mfilter::group_granule(p), so every 16- and 64-template tile of the call lies in
/// one group). A non-finite weight is InvalidInput on every rank naming its template's index in
/// the whole call (and the file, for a file's table).
GroupNetwork group_network(const Comm& comm, const MfNetworkTables& network,
                           const mfilter::Prepared& p, std::int64_t t0, std::int64_t t1);

/// What a rank knows of the call's data: where to read them and the whole channels' factors.
struct RankData {
  const io::SampleSource* source = nullptr;
  std::vector<mfilter::ChannelFactors> factors;  // (C)
};

/// The factors of every channel of the whole call, as mfilter::prepare computes them over whole
/// channels (collective): each rank scans the samples of a 1/N share of the sum blocks
/// (mfilter::kSumBlock) for the range and first non-finite sample, reduced exactly over the
/// ranks, and in full normalization the FP64 sums of its blocks, added in block order from rank
/// to rank, so every factor equals the one-process one bit for bit. A non-finite sample is every
/// rank's InvalidInput naming the lowest such channel and its first such sample (with the
/// source's file name when it has one), raised by the rank whose slice holds it.
RankData data_factors(const Comm& comm, const io::SampleSource& data, const mfilter::Prepared& p);

/// Samples [a, b) of the data converted with the whole call's factors into `want` (float32 or
/// float64): those elements of the one-process prepared data, bit for bit.
Array prepared_window(const RankData& data, std::int64_t a, std::int64_t b, DType want);

/// The prepared call restricted to templates [t0, t1) x correlation times [c0, c1): its
/// templates `templates` (group_templates' for [t0, t1)), its network `network` (group_network's
/// for [t0, t1)), its data a window of the data holding
/// every one of its windows that lies inside the data, read from `data` and converted with the
/// whole call's factors. The window starts on a multiple of mfilter::kRecomputeEvery samples
/// (where the FP64 running window energies restart), so every CPU element of the block equals
/// the whole call's.
mfilter::Prepared block_problem(const mfilter::Prepared& p, const Array& templates,
                                const GroupNetwork& network, const RankData& data, std::int64_t t0,
                                std::int64_t t1, std::int64_t c0, std::int64_t c1);

/// A block's part of the result, float32 on the host, shaped like the call's result ((rows,
/// cols) or (rows, C, cols)), computed by the one-process path (run_cpu; on the GPU
/// run_cuda_devices on `device`).
Array compute_block(const mfilter::Prepared& block, int device);

/// The detection candidates (mfilter::detect_candidates_cuda: local maxima above the threshold,
/// not declustered) of a block whose first template is t0 and first correlation time c0 in the
/// whole call, searched on `device` in time chunks: no part of the stack comes to the host.
/// Template and correlation indices and samples are the whole call's (`step` its step). The
/// first and last correlation times of the block see only one neighbour: the caller keeps the
/// candidates of the times whose neighbours both lie in the block (or outside the call).
/// Unsupported but for a GPU call with an absolute threshold.
std::vector<Detection> block_candidates(const mfilter::Prepared& block, std::int64_t t0,
                                        std::int64_t c0, std::int64_t step, int device,
                                        const DetectOptions& detect);

/// The test hook: when HALFSCOPE_FAULT_RANK is "r" and this is rank r of `comm`, throws Error
/// (an injected failure, agreed like any other); "r:abort" aborts the process instead (a crash,
/// which the launcher turns into the end of the job). InvalidInput for any other value.
void fault_hook(const Comm& comm);

/// The detection candidates of one block as bytes (Detection is trivially copyable), and back.
std::vector<std::byte> to_bytes(const std::vector<Detection>& detections);
std::vector<Detection> from_bytes(std::span<const std::byte> bytes);

}  // namespace halfscope::mpi::mf
