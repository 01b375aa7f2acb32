// The result of matched filtering over MPI ranks written as one .npy file by every rank
// (halfscope/mpi/mfilter.hpp, write_result_npy): the network case's stack of 1000 templates over a
// day is 17 GB, which gathering would hold and write on one rank.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/mpi/mfilter.hpp"

namespace halfscope::mpi {

namespace {

// An open file descriptor, closed when it leaves scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Writes `bytes` at `offset`, resuming after short writes.
void write_at(int fd, const char* data, std::int64_t bytes, std::int64_t offset,
              const std::string& what) {
  while (bytes > 0) {
    const ssize_t n =
        ::pwrite(fd, data, static_cast<std::size_t>(bytes), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(what + ": write failed: " + std::strerror(errno));
    data += n, bytes -= n, offset += n;
  }
}

// The (template, channel) lines of `values` (rows x cols floats each, the share's) at their place
// in the whole result (lines of n values after a header of `data_offset` bytes).
void write_lines(int fd, const MfShare& share, const Array& values, const Shape& full,
                 std::int64_t data_offset, const std::string& what) {
  if (share.empty()) return;
  const std::int64_t n = full.back(), per_row = full.size() == 2 ? 1 : full[1];
  const std::int64_t lines = (share.template_end - share.template_begin) * per_row;
  const std::int64_t cols = share.time_end - share.time_begin;
  const auto* v = static_cast<const char*>(values.data());
  for (std::int64_t j = 0; j < lines; ++j)
    write_at(fd, v + j * cols * 4, cols * 4,
             data_offset + ((share.template_begin * per_row + j) * n + share.time_begin) * 4, what);
}

// The test hook HALFSCOPE_UNSHARED_RANK=r (docs/scaling.md): rank r (not the root, which made the
// file) acts as if it could not see root's file system, so that one host exercises the gathering
// fallback.
bool unshared_hook(const Comm& comm) {
  const char* value = std::getenv("HALFSCOPE_UNSHARED_RANK");
  return value != nullptr && std::string(value) == std::to_string(comm.rank());
}

}  // namespace

NpyWrite write_result_npy(const Comm& comm, const MfPart& part, const std::filesystem::path& path,
                          int root) {
  const std::string what = path.string();
  const std::vector<std::byte> header = io::npy_header(DType::f32, part.full_shape);
  const std::int64_t elements = shape_size(part.full_shape);
  const auto data_offset = static_cast<std::int64_t>(header.size());
  NpyWrite result;
  std::unique_ptr<io::AtomicOutput>& out = result.file;
  std::string temp;
  agree(comm, [&] {
    if (comm.rank() != root) return;
    out = std::make_unique<io::AtomicOutput>(path);
    out->write(header);
    out->extend_to(static_cast<std::uint64_t>(data_offset + elements * 4));
    temp = out->temp_path().string();
  });
  temp = comm.broadcast_string(temp, root);
  // Every rank opens the file first: one that cannot (its host does not see root's file system)
  // makes the call gather instead, decided together.
  Fd file;
  file.fd = ::open(temp.c_str(), O_WRONLY);
  if (comm.rank() != root && unshared_hook(comm) && file.fd >= 0) {
    ::close(file.fd);
    file.fd = -1;
  }
  result.ranks_without_file = comm.sum(std::int64_t{file.fd < 0 ? 1 : 0});
  if (result.ranks_without_file > 0) {
    const Array whole = gather_result(comm, part, root);
    agree(comm, [&] {
      if (comm.rank() != root) return;
      MfShare all;
      all.template_end = part.full_shape.front(), all.time_end = part.full_shape.back();
      write_lines(file.fd, all, whole, part.full_shape, data_offset, what);
    });
    return result;
  }
  agree(comm, [&] {
    write_lines(file.fd, part.share, part.values, part.full_shape, data_offset, what);
    if (::fsync(file.fd) != 0) throw IoError(what + ": write failed: " + std::strerror(errno));
  });
  return result;
}

}  // namespace halfscope::mpi
