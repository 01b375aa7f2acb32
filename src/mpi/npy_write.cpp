// One .npy file written by every MPI rank (halfscope/mpi/npy_write.hpp).
#include "halfscope/mpi/npy_write.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::mpi {

namespace {

// The test hook HALFSCOPE_UNSHARED_RANK=r (docs/scaling.md): rank r (not the root, which made the
// file) acts as if it could not see root's file system, so that one host exercises the gathering
// fallback.
bool unshared_hook(const Comm& comm) {
  const char* value = std::getenv("HALFSCOPE_UNSHARED_RANK");
  return value != nullptr && std::string(value) == std::to_string(comm.rank());
}

}  // namespace

SharedNpy::SharedNpy(const Comm& comm, const std::filesystem::path& path, const Shape& shape,
                     int root)
    : what_(path.string()) {
  const std::vector<std::byte> header = io::npy_header(DType::f32, shape);
  data_offset_ = static_cast<std::int64_t>(header.size());
  std::string temp;
  agree(comm, [&] {
    if (comm.rank() != root) return;
    file_ = std::make_unique<io::AtomicOutput>(path);
    file_->write(header);
    file_->extend_to(static_cast<std::uint64_t>(data_offset_ + shape_size(shape) * 4));
    temp = file_->temp_path().string();
  });
  temp = comm.broadcast_string(temp, root);
  fd_ = ::open(temp.c_str(), O_WRONLY);
  if (comm.rank() != root && unshared_hook(comm) && fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  without_ = comm.sum(std::int64_t{fd_ < 0 ? 1 : 0});
}

SharedNpy::~SharedNpy() {
  if (fd_ >= 0) ::close(fd_);
}

void SharedNpy::write(const float* values, std::int64_t count, std::int64_t offset) const {
  const auto* data = reinterpret_cast<const char*>(values);
  std::int64_t bytes = count * 4, at = data_offset_ + offset * 4;
  while (bytes > 0) {  // resuming after short writes
    const ssize_t n = ::pwrite(fd_, data, static_cast<std::size_t>(bytes), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(what_ + ": write failed: " + std::strerror(errno));
    data += n, bytes -= n, at += n;
  }
}

void SharedNpy::sync() const {
  if (::fsync(fd_) != 0) throw IoError(what_ + ": write failed: " + std::strerror(errno));
}

}  // namespace halfscope::mpi
