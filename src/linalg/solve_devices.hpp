// solve_right over several CUDA devices of one host (internal header; solve_devices.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/solve.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::linalg::detail {

/// X A = B in place for the checked r x n rows `b`, split into contiguous row blocks over
/// `devices` (validated indices): the factor's device solves its block in place, every other
/// device a copy of its block with a copy of `l` (peer to peer), written back. `l` and `b` on
/// the same device (InvalidInput otherwise). The first failing block's error is rethrown after
/// every device has finished. Unsupported in a build without CUDA.
void solve_rows_devices(const TileMatrix& l, Array& b, const std::vector<GemmVariant>& variants,
                        const std::vector<int>& devices);

/// Work a streamed solve hands each block of rows while it is still on the device, solved and
/// checked finite, before it goes back to host memory: `rows` the block's count x n floats (rows
/// [first, first + count) of b), `stream` the solve's cudaStream_t, on which the work is queued
/// (or which it synchronises). With a hook the blocks are cut from the end of b and solved last
/// first, so the first block holds b's last rows (the reconstructor's Woodbury rows, which every
/// block's correction reads). b on the device is one block.
using RowBlockHook =
    std::function<void(float* rows, std::int64_t first, std::int64_t count, void* stream)>;

/// X A = B in place for a host factor `l` on CUDA device `device` (a validated index), L
/// streamed through it within `device_memory` bytes (0: the free memory less 5 %;
/// solve_right_streamed), `b` in host memory or on that device; its slabs, blocks of rows and
/// bytes moved into `report`; `hook` (may be empty) run on each solved block. Returns the
/// non-finite entries found (StreamedSolve's fields: {input, output}, -1 for none). Unsupported in
/// a build without CUDA.
std::pair<std::int64_t, std::int64_t> solve_rows_streamed(const TileMatrix& l, Array& b,
                                                          const std::vector<GemmVariant>& variants,
                                                          int device, std::int64_t device_memory,
                                                          SolveReport& report,
                                                          const RowBlockHook& hook = {});

/// solve_right (halfscope/linalg/solve.hpp) for a host factor streamed through the one device of
/// `options.devices`, with `hook` run on each solved block of rows (RowBlockHook). InvalidInput as
/// solve_right's, and when the factor is on a device or the options do not name one device.
SolveReport solve_right_streamed_with(const TileMatrix& l, Array& b, const SolveOptions& options,
                                      const RowBlockHook& hook);

/// The device memory a streamed solve (solve_rows_streamed) of `rows` right-hand sides already on
/// the device needs besides them, with the factor `l` in host memory and `policy` (a rule that
/// reads tile norms takes a pass over L for them): for a caller choosing where to keep b.
/// Unsupported in a build without CUDA.
std::int64_t streamed_solve_need(const TileMatrix& l, const Policy& policy, std::int64_t rows);

}  // namespace halfscope::linalg::detail
