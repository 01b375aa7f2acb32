#include "halfscope/io/file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "halfscope/core/error.hpp"

namespace halfscope::io {

namespace fs = std::filesystem;

InputFile open_input_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IoError(path.string() + ": no such file");
  if (fs::is_directory(path, ec)) throw IoError(path.string() + ": is a folder, expected a file");
  InputFile f{std::ifstream(path, std::ios::binary), 0};
  if (!f.stream)
    throw IoError(path.string() + ": cannot open for reading: " + std::strerror(errno));
  f.stream.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(f.stream.tellg());
  if (size < 0) throw IoError(path.string() + ": cannot determine the size (not a regular file?)");
  f.stream.seekg(0, std::ios::beg);
  f.size = static_cast<std::int64_t>(size);
  return f;
}

std::int64_t InputFile::read_at(std::byte* out, std::int64_t count, std::int64_t offset) {
  stream.clear();  // a read that reached the end leaves the stream failed
  stream.seekg(offset);
  stream.read(reinterpret_cast<char*>(out), count);
  return static_cast<std::int64_t>(stream.gcount());
}

void InputFile::read_exact(std::byte* out, std::int64_t count, std::int64_t offset,
                           std::string_view name) {
  const std::int64_t got = read_at(out, count, offset);
  if (got != count)
    throw IoError(std::string(name) + ": truncated while reading: " + std::to_string(count) +
                  " bytes wanted at byte " + std::to_string(offset) + ", " + std::to_string(got) +
                  " found");
}

std::vector<std::byte> read_file_bytes(const fs::path& path) {
  InputFile f = open_input_file(path);
  std::vector<std::byte> bytes(static_cast<std::size_t>(f.size));
  if (!bytes.empty() && !f.stream.read(reinterpret_cast<char*>(bytes.data()), f.size))
    throw IoError(path.string() + ": read failed after " + std::to_string(f.stream.gcount()) +
                  " of " + std::to_string(f.size) + " bytes");
  return bytes;
}

void check_output_path(const fs::path& path) {
  std::error_code ec;
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (path.filename().empty()) throw IoError(path.string() + ": output path names no file");
  if (!fs::exists(folder, ec))
    throw IoError(path.string() + ": output folder " + folder.string() + " does not exist");
  if (!fs::is_directory(folder, ec))
    throw IoError(path.string() + ": " + folder.string() + " is not a folder");
  if (fs::is_directory(path, ec))
    throw IoError(path.string() + ": is a folder, expected a file name");
  if (::access(folder.c_str(), W_OK) != 0)
    throw IoError(path.string() + ": output folder " + folder.string() + " is not writable");
}

AtomicOutput::AtomicOutput(fs::path target) : target_(std::move(target)) {
  check_output_path(target_);
  std::random_device rd;
  const fs::path folder = target_.has_parent_path() ? target_.parent_path() : fs::path(".");
  temp_ = folder / ("." + target_.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                    std::to_string(rd()));
}

AtomicOutput::~AtomicOutput() {
  if (file_) std::fclose(file_);
  if (!committed_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void AtomicOutput::write(std::span<const std::byte> bytes) {
  if (!file_) {
    file_ = std::fopen(temp_.c_str(), "wb");
    if (!file_) throw IoError(target_.string() + ": cannot create: " + std::strerror(errno));
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw IoError(target_.string() + ": write failed: " + std::strerror(errno));
}

void AtomicOutput::write(const std::string& text) {
  write(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void AtomicOutput::extend_to(std::uint64_t bytes) {
  write(std::span<const std::byte>{});  // creates the file when nothing was written yet
  if (std::fflush(file_) != 0 || ::ftruncate(::fileno(file_), static_cast<off_t>(bytes)) != 0)
    throw IoError(target_.string() + ": cannot extend the temporary file to " +
                  std::to_string(bytes) + " bytes: " + std::strerror(errno));
}

void AtomicOutput::finish() {
  if (finished_) return;
  if (file_) {
    // errno is saved at each failing step: a later call may overwrite it.
    int err = 0;
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) err = errno;
    if (std::fclose(file_) != 0 && err == 0) err = errno;
    file_ = nullptr;
    if (err) throw IoError(target_.string() + ": write failed: " + std::strerror(err));
  } else {
    // Written by a library through temp_path(): flush it to disk before it takes the name.
    const int fd = ::open(temp_.c_str(), O_RDONLY);
    if (fd < 0) throw IoError(target_.string() + ": nothing was written (internal error)");
    const int rc = ::fsync(fd), err = errno;
    ::close(fd);
    if (rc != 0) throw IoError(target_.string() + ": write failed: " + std::strerror(err));
  }
  finished_ = true;
}

void AtomicOutput::commit() {
  finish();
  std::error_code ec;
  fs::rename(temp_, target_, ec);
  if (ec)
    throw IoError(target_.string() +
                  ": cannot rename the finished file into place: " + ec.message());
  committed_ = true;
}

void commit_together(const std::vector<AtomicOutput*>& outputs) {
  // Every file on disk before any takes its name: a full disk fails the run with none renamed.
  for (AtomicOutput* o : outputs)
    if (o) o->finish();
  for (AtomicOutput* o : outputs)
    if (o) o->commit();
}

void write_file_atomic(const fs::path& path, std::span<const std::byte> bytes) {
  AtomicOutput out(path);
  out.write(bytes);
  out.commit();
}

std::string extension_of(const fs::path& path) {
  std::string ext = path.extension().string();
  if (!ext.empty() && ext[0] == '.') ext.erase(0, 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext;
}

}  // namespace halfscope::io
