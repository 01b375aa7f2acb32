// Continuous multi-channel data read by windows of samples instead of whole: what matched
// filtering over MPI ranks (halfscope/mpi/mfilter.hpp) takes so that a rank reads the samples
// its share needs (and a 1/N slice for the whole-channel statistics), never the whole day of a
// large network.
//
//   const auto data = io::npy_samples("day.npy");       // (C, L) float32, not read yet
//   const Array w = data->read(1000, 5000);              // (C, 4000): samples [1000, 5000)
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// (C, L) samples read by windows. Reads are independent and may run from several threads.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  /// The whole data's shape: (channels, samples).
  [[nodiscard]] virtual Shape shape() const = 0;
  /// The type of what read() returns: float32 or float64 (float64 for the other real types,
  /// converted exactly as matched_filter converts them).
  [[nodiscard]] virtual DType dtype() const = 0;
  /// Samples [begin, end) of every channel: a host C-contiguous (C, end - begin) array of
  /// dtype(). InvalidInput unless 0 <= begin <= end <= L; IoError naming the file when a read
  /// fails.
  [[nodiscard]] virtual Array read(std::int64_t begin, std::int64_t end) const = 0;
  /// The file, for messages; empty for data in memory.
  [[nodiscard]] virtual std::string name() const = 0;
  /// How the data would describe themselves as an Array (Array::describe()), for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// A host array of shape (C, L) or (L) (as (1, L)) in memory, viewed: `data` must outlive the
/// source. InvalidInput for device data or another rank.
std::unique_ptr<SampleSource> array_samples(const Array& data);

/// A .npy file of shape (C, L) or (L) with a real dtype, in either byte order and either memory
/// order: only its header is read here; each read() then takes the window's bytes with one
/// read per channel (C order) or one for every channel (Fortran order; reads from several
/// threads take turns on the one file stream). IoError / InvalidInput
/// naming the file as read_seismic_data words them: a missing or truncated file, a header that
/// is not .npy, a shape that is not (channels, samples) or holds no sample, a complex or
/// non-numeric dtype.
std::unique_ptr<SampleSource> npy_samples(const std::filesystem::path& path);

/// The (C, L) shape of continuous data read from `name` with array shape `shape`: (L) becomes
/// (1, L). InvalidInput naming the file for another rank or an empty extent.
Shape continuous_data_shape(const std::string& name, const Shape& shape);

}  // namespace halfscope::io
