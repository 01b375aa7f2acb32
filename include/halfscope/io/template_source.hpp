// Matched-filtering templates read by groups of templates instead of whole: what matched
// filtering over MPI ranks (halfscope/mpi/mfilter.hpp) takes so that a rank holds only its
// template group, never the whole bank of a large catalogue.
//
//   const auto bank = io::npy_templates("bank.npy");  // (T, C, K), not read yet
//   const Array g = bank->read(256, 512);              // (256, C, K): templates [256, 512)
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "halfscope/core/array.hpp"

namespace halfscope::io {

/// (T, C, K) templates read by ranges of templates. Reads are independent and may run from
/// several threads.
class TemplateSource {
 public:
  virtual ~TemplateSource() = default;
  /// The whole bank's shape: (templates, channels, samples).
  [[nodiscard]] virtual Shape shape() const = 0;
  /// The type of what read() returns: float32 or float64 (float64 for the other real types).
  [[nodiscard]] virtual DType dtype() const = 0;
  /// Templates [begin, end): a host C-contiguous (end - begin, C, K) array of dtype().
  /// InvalidInput unless 0 <= begin <= end <= T, and (for a file) naming the file and the
  /// template, channel and sample of the first non-finite value; IoError naming the file when a
  /// read fails.
  [[nodiscard]] virtual Array read(std::int64_t begin, std::int64_t end) const = 0;
  /// The file, for messages; empty for templates in memory.
  [[nodiscard]] virtual std::string name() const = 0;
  /// How the templates would describe themselves as an Array (Array::describe()), for messages.
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// A host array of shape (T, C, K) or (T, K) (as (T, 1, K)) in memory, viewed: `templates` must
/// outlive the source. Its values are not checked here (matched filtering refuses non-finite
/// ones itself). InvalidInput for device data, another rank or an empty extent.
std::unique_ptr<TemplateSource> array_templates(const Array& templates);

/// A .npy file of shape (T, C, K) or (T, K) with a real dtype, in either byte order and either
/// memory order: only its header is read here; each read() then takes its templates' bytes (one
/// read in C order, one per channel and sample in Fortran order). IoError / InvalidInput naming
/// the file as read_template_array words them.
std::unique_ptr<TemplateSource> npy_templates(const std::filesystem::path& path);

/// The (T, C, K) shape of templates read from `name` with array shape `shape` and type `dtype`:
/// (T, K) becomes (T, 1, K). InvalidInput naming the file for a dtype that is not real, another
/// rank or an empty extent.
Shape template_array_shape(const std::string& name, const Shape& shape, DType dtype);

/// InvalidInput naming `name` and the template (numbered from `first`, the whole bank's index of
/// the first row), channel and sample of the first non-finite value of host (n, C, K) float32
/// or float64 templates.
void check_finite_templates(const std::string& name, const Array& templates, std::int64_t first);

}  // namespace halfscope::io
