// Templates read by ranges of templates (halfscope/io/template_source.hpp): a host array in
// memory, or a .npy file read group by group.
#include "halfscope/io/template_source.hpp"

#include <algorithm>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "io/npy_detail.hpp"

namespace halfscope::io {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

class ArrayTemplates final : public TemplateSource {
 public:
  explicit ArrayTemplates(const Array& templates) : templates_(templates) {
    if (templates.on_device())
      throw InvalidInput("array_templates: expected host templates, found " + templates.describe());
    shape_ = template_array_shape("templates", templates.shape(), templates.dtype());
  }
  [[nodiscard]] Shape shape() const override { return shape_; }
  [[nodiscard]] DType dtype() const override {
    return detail::source_read_type(templates_.dtype());
  }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_template_range(*this, begin, end);
    Array rows = templates_.slice(0, begin, end).contiguous();
    rows = rows.reshape({end - begin, shape_[1], shape_[2]});
    return rows.dtype() == dtype() ? rows : rows.astype(dtype());
  }
  [[nodiscard]] std::string name() const override { return {}; }
  [[nodiscard]] std::string describe() const override { return templates_.describe(); }

 private:
  Array templates_;
  Shape shape_;
};

class NpyTemplates final : public TemplateSource {
 public:
  explicit NpyTemplates(const std::filesystem::path& path)
      : file_(path),
        shape_(template_array_shape(file_.name(), file_.header().shape, file_.header().dtype)) {}
  [[nodiscard]] Shape shape() const override { return shape_; }
  [[nodiscard]] DType dtype() const override {
    return detail::source_read_type(file_.header().dtype);
  }
  [[nodiscard]] std::string name() const override { return file_.name(); }
  [[nodiscard]] std::string describe() const override { return file_.describe(); }

  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_template_range(*this, begin, end);
    const Array raw = file_.read_rows(begin, end).reshape({end - begin, shape_[1], shape_[2]});
    Array out = raw.dtype() == dtype() ? raw : raw.astype(dtype());
    check_finite_templates(file_.name(), out, begin);
    return out;
  }

 private:
  detail::NpyPartReader file_;
  Shape shape_;
};

}  // namespace

namespace detail {

void check_template_range(const TemplateSource& s, std::int64_t begin, std::int64_t end) {
  check_range(s.name().empty() ? std::string("templates") : s.name(), "templates", "range", begin,
              end, s.shape()[0]);
}

}  // namespace detail

Shape template_array_shape(const std::string& name, const Shape& shape, DType dtype) {
  if (!dtype_is_float(dtype) && !dtype_is_signed_int(dtype) && dtype != DType::u8 &&
      dtype != DType::u16 && dtype != DType::u32)
    throw InvalidInput(name + ": templates of dtype " + std::string(dtype_name(dtype)) +
                       ": expected a real dtype");
  const Shape s = shape.size() == 2 ? Shape{shape[0], 1, shape[1]} : shape;
  if (s.size() != 3 || s[0] == 0 || s[1] == 0 || s[2] == 0)
    throw InvalidInput(name + ": templates have shape " + shape_to_string(shape) +
                       ": expected (T, C, K) or (T, K) with every extent >= 1");
  return s;
}

void check_finite_templates(const std::string& name, const Array& templates, std::int64_t first) {
  const std::int64_t n = templates.size();
  double value = 0;
  std::int64_t i = n;
  if (templates.dtype() == DType::f32) {
    i = detail::first_nonfinite(templates.data_as<float>(), n);
    if (i < n) value = templates.data_as<float>()[i];
  } else {
    i = detail::first_nonfinite(templates.data_as<double>(), n);
    if (i < n) value = templates.data_as<double>()[i];
  }
  if (i == n) return;
  const std::int64_t k = templates.dim(2), c = templates.dim(1);
  throw InvalidInput(name + ": template " + str(first + i / (c * k)) + ", channel " +
                     str(i / k % c) + ", sample " + str(i % k) + " is " + std::to_string(value) +
                     ": expected a finite value");
}

std::unique_ptr<TemplateSource> array_templates(const Array& templates) {
  return std::make_unique<ArrayTemplates>(templates);
}

std::unique_ptr<TemplateSource> npy_templates(const std::filesystem::path& path) {
  return std::make_unique<NpyTemplates>(path);
}

}  // namespace halfscope::io
