// The result of matched filtering over MPI ranks written as one .npy file by every rank
// (halfscope/mpi/mfilter.hpp, write_result_npy): the network case's stack of 1000 templates over a
// day is 17 GB, which gathering would hold and write on one rank.
#include <string>

#include "halfscope/mpi/mfilter.hpp"
#include "halfscope/mpi/npy_write.hpp"

namespace halfscope::mpi {

namespace {

// The (template, channel) lines of `values` (rows x cols floats each, the share's) at their place
// in the whole result (lines of n values).
void write_lines(const SharedNpy& out, const MfShare& share, const Array& values,
                 const Shape& full) {
  if (share.empty()) return;
  const std::int64_t n = full.back(), per_row = full.size() == 2 ? 1 : full[1];
  const std::int64_t lines = (share.template_end - share.template_begin) * per_row;
  const std::int64_t cols = share.time_end - share.time_begin;
  const auto* v = values.data_as<float>();
  for (std::int64_t j = 0; j < lines; ++j)
    out.write(v + j * cols, cols, (share.template_begin * per_row + j) * n + share.time_begin);
}

}  // namespace

NpyWrite write_result_npy(const Comm& comm, const MfPart& part, const std::filesystem::path& path,
                          int root) {
  return write_by_ranks(
      comm, path, part.full_shape, root,
      [&](const SharedNpy& out) { write_lines(out, part.share, part.values, part.full_shape); },
      [&] { return gather_result(comm, part, root); },
      [&](const SharedNpy& out, const Array& whole) {
        MfShare all;
        all.template_end = part.full_shape.front(), all.time_end = part.full_shape.back();
        write_lines(out, all, whole, part.full_shape);
      });
}

}  // namespace halfscope::mpi
