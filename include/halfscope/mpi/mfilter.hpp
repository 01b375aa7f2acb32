// Matched filtering over MPI ranks (issue 9): one call of halfscope/mfilter.hpp split over the
// ranks of a communicator, each rank running the one-process path (CPU, or its GPU) on its share.
//
//   const auto part = mpi::matched_filter(comm, templates, data, {.precision = Precision::Single});
//   const Array whole = mpi::gather_result(comm, part, 0);  // on rank 0
//
// Every rank passes the same inputs (a rank whose shapes differ makes every rank throw
// InvalidInput): host arrays, or sources (io::TemplateSource, io::SampleSource) such as .npy files
// that each rank reads only in part. The work is a grid of template groups x correlation-time
// parts: templates in contiguous groups of multiples of 16 (the one-GPU tensor kernel's tile, as
// the devices of one host get them; 64 where a GPU call runs the wgmma network kernel), correlation
// times in contiguous parts when the templates are too few for the ranks (or on request). A time
// part computes its windows from a slice of the prepared data that starts on a restart of the FP64
// running window energies, so on the CPU every element equals the one-process call bit for bit in
// double, single, mixed, split and bf16 (half normalizes by the maxima of its block's templates and
// data, not the whole call's, so its parts differ within half's rounding). Errors are agreed: a
// failure on any rank makes every rank throw the lowest failing rank's error (mpi::agree).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "halfscope/core/array.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/mfilter.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/npy_write.hpp"

namespace halfscope::mpi {

/// How a call is split. time_parts: correlation-time parts per template group; 0 picks them:
/// one when there are at least as many template groups of 16 (64 for the wgmma kernel, see
/// mf_share) as ranks, else the grid of at most `ranks` cells with the most cells in use, ties to
/// more template groups (4 ranks, 40 templates: 2 groups x 2 parts). A positive value asks for
/// that many parts (at most the ranks and the correlation times); the groups are then
/// min(ceil(T / 16), ranks / time_parts) (64 in place of 16 for the wgmma kernel).
struct MfSplit {
  std::int64_t time_parts = 0;
};

/// Where one rank's part sits in the whole result: templates [template_begin, template_end),
/// correlation times [time_begin, time_end); empty ranges on a rank the grid leaves idle.
struct MfShare {
  std::int64_t template_begin = 0, template_end = 0;
  std::int64_t time_begin = 0, time_end = 0;
  std::int64_t template_groups = 1, time_parts = 1;  // the grid of the whole call
  [[nodiscard]] bool empty() const noexcept {
    return template_end <= template_begin || time_end <= time_begin;
  }
};

/// The share of rank `rank` of `ranks` in a call of `templates` templates and `n_corr`
/// correlation times (no communication; the same on every rank). Rank r < groups x parts owns
/// group r / parts, time part r % parts. Template groups are multiples of `granule` templates
/// (but the last): matched_filter passes 16, or 64 where the call runs the one-GPU wgmma network
/// kernel (tensor method, network stack, step 1, mixed or bf16, whose template tiles are 64), so
/// every rank runs the kernel the one-process call runs. InvalidInput for sizes or granule < 1 or
/// time_parts < 0 or above the ranks.
MfShare mf_share(int rank, int ranks, std::int64_t templates, std::int64_t n_corr,
                 const MfSplit& split = {}, std::int64_t granule = 16);

/// The network (moveouts and weights, MfNetwork of halfscope/mfilter.hpp) as tables of which
/// each rank reads only its template group's rows: io::npy_table files, so that no rank holds the
/// network of a whole catalogue, or arrays in memory (an MfNetwork converts to views of its
/// arrays). A null table: no moveouts (all 0) or no weights (all 1).
struct MfNetworkTables {
  std::shared_ptr<const io::TableSource> moveouts, weights;
  MfNetworkTables() = default;
  // Implicit, so that every call taking tables takes the one-process call's MfNetwork too.
  MfNetworkTables(const MfNetwork& network);  // NOLINT(google-explicit-constructor)
};

/// One rank's part of a matched-filtering result.
struct MfPart {
  /// float32 on the host: (rows, cols) of the network stack or (rows, C, cols) per channel;
  /// empty on an idle rank.
  Array values;
  MfShare share;
  Shape full_shape;  // (T, n_corr) or (T, C, n_corr)
};

/// matched_filter (halfscope/mfilter.hpp) over the ranks of `comm` (collective): this rank's
/// part. Each rank reads from `templates` only its template group, and from `data` only a 1/N
/// share of every channel (for the whole-channel facts: finiteness, range and, in full
/// normalization, the FP64 mean, combined exactly over the ranks) and the window of samples its
/// part needs, and from the network tables only its template group's rows: with
/// io::npy_templates, io::npy_samples and io::npy_table no rank holds the whole bank, the whole
/// day or the whole network (the network's whole-call facts that the GPU kernels tile by, the
/// largest moveout spread of a 16-template tile and the wgmma kernel's longest template row, are
/// reduced over the ranks). options.devices must be empty: a GPU rank uses the device
/// (node-local rank) modulo (devices of its host). The test hook HALFSCOPE_FAULT_RANK
/// (docs/scaling.md) makes a rank fail in its computation.
MfPart matched_filter(const Comm& comm, const io::TemplateSource& templates,
                      const io::SampleSource& data, const MfOptions& options = {},
                      const MfNetworkTables& network = {}, const MfSplit& split = {});

/// The same with the templates and data in host memory on every rank (each rank still prepares
/// only its templates and converts only its window and its share of the facts).
MfPart matched_filter(const Comm& comm, const Array& templates, const Array& data,
                      const MfOptions& options = {}, const MfNetwork& network = {},
                      const MfSplit& split = {});

/// The whole result on `root` (collective; empty on the other ranks): every part placed at its
/// share, each received and placed in turn (root holds the result and one part at a time).
Array gather_result(const Comm& comm, const MfPart& part, int root);

/// The whole result as a .npy file at `path`, written without gathering it where the ranks share
/// the file system (collective, through SharedNpy, halfscope/mpi/npy_write.hpp): every rank that
/// can open the file writes its part's lines at their offsets (pwrite) and syncs; when some rank
/// cannot (no shared file system), the result is gathered on `root` and written there. Every rank
/// agrees on the outcome: a failed write throws on every rank and leaves nothing under `path`.
/// Returns root's uncommitted output and the count of ranks without the file (NpyWrite).
NpyWrite write_result_npy(const Comm& comm, const MfPart& part, const std::filesystem::path& path,
                          int root);

/// matched_filter_detect (halfscope/mfilter.hpp) over the ranks (collective): the detections of
/// the whole call on every rank, equal to the one-process CPU call's (its stack's elements being
/// equal, see above): MAD thresholds are exact medians of whole rows (a radix selection summed
/// over the ranks of a template group), local maxima see their neighbours across part borders,
/// and the candidates of every part are declustered together on rank 0, strongest first.
/// `stack`, when not null, receives this rank's part of the network stack. A GPU rank searches
/// an absolute threshold on its device, time chunk by time chunk, when `stack` is null (no stack
/// part comes to the host); otherwise it computes its part on the device and searches it on the
/// host. Templates, data and network are read as matched_filter reads them; each rank counts the
/// channels used by the detections of its part from its own window.
std::vector<Detection> matched_filter_detect(const Comm& comm, const io::TemplateSource& templates,
                                             const io::SampleSource& data, const MfOptions& options,
                                             const MfNetworkTables& network,
                                             const DetectOptions& detect, const MfSplit& split = {},
                                             MfPart* stack = nullptr);

/// The same with the templates and data in host memory on every rank.
std::vector<Detection> matched_filter_detect(const Comm& comm, const Array& templates,
                                             const Array& data, const MfOptions& options,
                                             const MfNetwork& network, const DetectOptions& detect,
                                             const MfSplit& split = {}, MfPart* stack = nullptr);

}  // namespace halfscope::mpi
