// Continuous data read by windows of samples (halfscope/io/sample_source.hpp): a host array in
// memory, or a .npy file read window by window.
#include "halfscope/io/sample_source.hpp"

#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "io/npy_detail.hpp"

namespace halfscope::io {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

class ArraySamples final : public SampleSource {
 public:
  explicit ArraySamples(const Array& data)
      : data_(data.ndim() == 1 ? data.contiguous().reshape({1, data.dim(0)}) : data) {
    if (data.on_device())
      throw InvalidInput("array_samples: expected host data, found " + data.describe());
    (void)continuous_data_shape("data", data.shape());
  }
  [[nodiscard]] Shape shape() const override { return data_.shape(); }
  [[nodiscard]] DType dtype() const override { return detail::source_read_type(data_.dtype()); }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_window(*this, begin, end);
    const Array w = data_.slice(1, begin, end).contiguous();
    return w.dtype() == dtype() ? w : w.astype(dtype());
  }
  [[nodiscard]] std::string name() const override { return {}; }
  [[nodiscard]] std::string describe() const override { return data_.describe(); }

 private:
  Array data_;
};

class NpySamples final : public SampleSource {
 public:
  explicit NpySamples(const std::filesystem::path& path)
      : file_(path), shape_(continuous_data_shape(file_.name(), file_.header().shape)) {}
  [[nodiscard]] Shape shape() const override { return shape_; }
  [[nodiscard]] DType dtype() const override {
    return detail::source_read_type(file_.header().dtype);
  }
  [[nodiscard]] std::string name() const override { return file_.name(); }
  [[nodiscard]] std::string describe() const override { return file_.describe(); }

  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_window(*this, begin, end);
    const NpyHeader& h = file_.header();
    const std::int64_t C = shape_[0], L = shape_[1], n = end - begin;
    const std::int64_t es = dtype_size(h.dtype);
    Array raw;
    if (n > 0 && h.fortran_order && C > 1) {
      // Sample k of every channel lies together: the window is one run of n x C elements, which
      // is the (C, n) window in Fortran order.
      auto run = Buffer::allocate(n * C * es, Memory::host);
      file_.read(static_cast<std::byte*>(run->data()), n * C * es, begin * C * es);
      detail::to_native_order(h, static_cast<std::byte*>(run->data()), n * C);
      raw = Array(std::move(run), h.dtype, {C, n}, f_strides({C, n})).contiguous();
    } else {
      raw = Array(h.dtype, {C, n});
      auto* bytes = static_cast<std::byte*>(raw.data());
      for (std::int64_t c = 0; c < C; ++c)
        file_.read(bytes + c * n * es, n * es, (c * L + begin) * es);
      detail::to_native_order(h, bytes, n * C);
    }
    return raw.dtype() == dtype() ? raw : raw.astype(dtype());
  }

 private:
  detail::NpyPartReader file_;
  Shape shape_;
};

}  // namespace

namespace detail {

void check_range(const std::string& name, std::string_view items, std::string_view kind,
                 std::int64_t begin, std::int64_t end, std::int64_t extent) {
  if (begin < 0 || begin > end || end > extent)
    throw InvalidInput(name + ": " + std::string(items) + " [" + str(begin) + ", " + str(end) +
                       "): expected a " + std::string(kind) + " inside [0, " + str(extent) + ")");
}

void check_window(const SampleSource& s, std::int64_t begin, std::int64_t end) {
  check_range(s.name().empty() ? std::string("data") : s.name(), "samples", "window", begin, end,
              s.shape()[1]);
}

}  // namespace detail

Shape continuous_data_shape(const std::string& name, const Shape& shape) {
  Shape s = shape.size() == 1 ? Shape{1, shape[0]} : shape;
  if (s.size() != 2)
    throw InvalidInput(name + ": data array has shape " + shape_to_string(shape) +
                       ": expected (channels, samples) or (samples)");
  if (s[0] == 0 || s[1] == 0)
    throw InvalidInput(name + ": data array has shape " + shape_to_string(shape) +
                       ": expected at least one channel and one sample");
  return s;
}

std::unique_ptr<SampleSource> array_samples(const Array& data) {
  return std::make_unique<ArraySamples>(data);
}

std::unique_ptr<SampleSource> npy_samples(const std::filesystem::path& path) {
  return std::make_unique<NpySamples>(path);
}

}  // namespace halfscope::io
