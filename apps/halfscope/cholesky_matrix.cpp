// The matrices of `halfscope cholesky` in and out (cholesky_matrix.hpp): A read and checked, L
// written dense.
#include "cholesky_matrix.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"

namespace halfscope::cli {

namespace {
// Relative asymmetry accepted: |a_ij - a_ji| <= kSymmetryTolerance max(|a_ij|, |a_ji|). Only the
// lower triangle is factored, so a matrix that is not symmetric would silently be replaced by
// its lower half; 1e-6 lets FP32 files written from FP64 data through (they round identically or
// within one FP32 ulp, 6e-8 relative) and rejects anything that is really asymmetric.
constexpr double kSymmetryTolerance = 1e-6;

// The message of read_symmetric for entries lo = A(i, j), up = A(j, i), or "" when they pass.
std::string refusal(const std::string& path, std::int64_t i, std::int64_t j, double lo, double up) {
  if (!std::isfinite(lo) || !std::isfinite(up))
    return path + ": expected finite entries, found " + number_text(std::isfinite(lo) ? up : lo) +
           " at (" + std::to_string(std::isfinite(lo) ? j : i) + ", " +
           std::to_string(std::isfinite(lo) ? i : j) + ")";
  if (std::fabs(lo - up) > kSymmetryTolerance * std::max(std::fabs(lo), std::fabs(up)))
    return path + ": expected a symmetric matrix (relative 1e-6), found A(" + std::to_string(i) +
           ", " + std::to_string(j) + ") = " + number_text(lo) + " but A(" + std::to_string(j) +
           ", " + std::to_string(i) + ") = " + number_text(up);
  return {};
}

}  // namespace

std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

Array read_symmetric(const std::string& path) {
  const Array raw = io::read_npy(path);
  if (raw.dtype() != DType::f32 && raw.dtype() != DType::f64)
    throw InvalidInput(path + ": expected a float32 or float64 matrix, found " + raw.describe());
  if (raw.ndim() != 2 || raw.dim(0) != raw.dim(1) || raw.dim(0) < 1)
    throw InvalidInput(path + ": expected a square n x n matrix (n >= 1), found " + raw.describe());
  const Array a = raw.astype(DType::f64).contiguous();
  const std::int64_t n = a.dim(0);
  const double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const std::string why = refusal(path, i, j, p[i * n + j], p[j * n + i]);
      if (!why.empty()) throw InvalidInput(why);
    }
  return a;
}

SymmetricTileReader::SymmetricTileReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY);
  if (fd_ < 0) throw IoError(path_ + ": cannot open: " + std::strerror(errno));
  std::vector<std::byte> head(1 << 16);
  const ssize_t got = ::pread(fd_, head.data(), head.size(), 0);
  if (got < 0) throw IoError(path_ + ": read failed: " + std::strerror(errno));
  head.resize(static_cast<std::size_t>(got));
  const io::NpyHeader h = io::parse_npy_header(head, path_);
  // As Array::describe() words it for the array read whole (read_symmetric).
  const std::string found = std::string(dtype_name(h.dtype)) + shape_to_string(h.shape) + " host";
  if (h.dtype != DType::f32 && h.dtype != DType::f64)
    throw InvalidInput(path_ + ": expected a float32 or float64 matrix, found " + found);
  if (h.shape.size() != 2 || h.shape[0] != h.shape[1] || h.shape[0] < 1)
    throw InvalidInput(path_ + ": expected a square n x n matrix (n >= 1), found " + found);
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_size < h.data_offset + h.data_bytes)
    throw IoError(path_ + ": truncated: expected " + std::to_string(h.data_offset + h.data_bytes) +
                  " bytes");
  n_ = h.shape[0], data_offset_ = h.data_offset, item_ = dtype_size(h.dtype);
  f64_ = h.dtype == DType::f64, big_endian_ = h.big_endian, fortran_ = h.fortran_order;
}

SymmetricTileReader::~SymmetricTileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void SymmetricTileReader::read_block(std::int64_t r0, std::int64_t rows, std::int64_t c0,
                                     std::int64_t cols, double* out) const {
  // One pread per stored line (a row in C order, a column in Fortran order).
  const std::int64_t lines = fortran_ ? cols : rows, len = fortran_ ? rows : cols;
  std::vector<std::byte> buf(static_cast<std::size_t>(len * item_));
  for (std::int64_t k = 0; k < lines; ++k) {
    const std::int64_t first = fortran_ ? (c0 + k) * n_ + r0 : (r0 + k) * n_ + c0;
    std::size_t done = 0;
    while (done < buf.size()) {
      const ssize_t got =
          ::pread(fd_, buf.data() + done, buf.size() - done,
                  static_cast<off_t>(data_offset_ + first * item_) + static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw IoError(path_ + ": read failed: " + std::strerror(errno));
      done += static_cast<std::size_t>(got);
    }
    if (big_endian_)
      for (std::int64_t e = 0; e < len; ++e)
        std::reverse(buf.begin() + e * item_, buf.begin() + (e + 1) * item_);
    for (std::int64_t e = 0; e < len; ++e) {
      double v = 0.0;
      if (f64_) {
        std::memcpy(&v, buf.data() + e * 8, 8);
      } else {
        float f = 0.0f;
        std::memcpy(&f, buf.data() + e * 4, 4);
        v = f;
      }
      out[fortran_ ? e * cols + k : k * cols + e] = v;
    }
  }
}

SymmetricTileReader::Failure SymmetricTileReader::read_tile(const linalg::TileLayout& layout,
                                                            std::int64_t ti, std::int64_t tj,
                                                            float* out) const {
  const std::int64_t nb = layout.tile_size(), h = layout.tile_height(ti);
  const std::int64_t w = layout.tile_width(tj), r0 = ti * nb, c0 = tj * nb;
  std::vector<double> block(static_cast<std::size_t>(h * w)), mirror;
  read_block(r0, h, c0, w, block.data());
  // A(c0 .., r0 ..): its (c, r) is A(c0 + c, r0 + r); a diagonal tile is its own mirror.
  if (ti != tj) {
    mirror.resize(block.size());
    read_block(c0, w, r0, h, mirror.data());
  }
  const std::vector<double>& up = ti != tj ? mirror : block;
  Failure first;
  for (std::int64_t r = 0; r < h; ++r)
    for (std::int64_t c = 0; c < w; ++c) {
      const double lo = block[static_cast<std::size_t>(r * w + c)];
      out[c * h + r] = static_cast<float>(lo);
      const std::int64_t i = r0 + r, j = c0 + c;
      if (first.key >= 0 || j > i) continue;
      std::string why = refusal(path_, i, j, lo, up[static_cast<std::size_t>(c * h + r)]);
      if (!why.empty()) first = {i * n_ + j, std::move(why)};
    }
  return first;
}

Array dense_lower(const linalg::TileMatrix& l_any) {
  const Array storage = l_any.storage.on_device() ? l_any.storage.to(Memory::host) : l_any.storage;
  const linalg::TileLayout& layout = l_any.layout;
  const std::int64_t n = layout.rows();
  Array out = Array::zeros(DType::f32, {n, n});
  float* o = out.data_as<float>();
  const float* s = storage.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) o[i * n + j] = s[layout.element_offset(i, j)];
  return out;
}

}  // namespace halfscope::cli
