// Tables read by ranges of templates (halfscope/io/table_source.hpp): a host array in memory, or
// a .npy file read rows at a time.
#include "halfscope/io/table_source.hpp"

#include "halfscope/core/error.hpp"
#include "io/npy_detail.hpp"

namespace halfscope::io {

namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// Elements per row: the product of the axes after the first (1 for a one-dimensional table).
std::int64_t row_size(const Shape& shape) {
  std::int64_t n = 1;
  for (std::size_t a = 1; a < shape.size(); ++a) n *= shape[a];
  return n;
}

class ArrayTable final : public TableSource {
 public:
  explicit ArrayTable(const Array& table)
      : table_(table.on_device() ? table.to(Memory::host) : table), describe_(table.describe()) {
    if (table.ndim() < 1)
      throw InvalidInput("array_table: expected an array with at least one axis, found " +
                         describe_);
  }
  [[nodiscard]] Shape shape() const override { return table_.shape(); }
  [[nodiscard]] DType dtype() const override { return table_.dtype(); }
  [[nodiscard]] std::string describe() const override { return describe_; }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_range("table " + describe_, "rows", "range", begin, end, table_.dim(0));
    return table_.slice(0, begin, end).contiguous().reshape({end - begin, row_size(shape())});
  }

 private:
  Array table_;
  std::string describe_;
};

class NpyTable final : public TableSource {
 public:
  NpyTable(const std::filesystem::path& path, std::string what)
      : file_(path), what_(std::move(what)) {
    if (file_.header().shape.empty())
      throw InvalidInput(file_.name() + ": " + what_ + " have shape (): expected (T, C) " +
                         "(templates, channels)");
  }
  [[nodiscard]] Shape shape() const override { return file_.header().shape; }
  [[nodiscard]] DType dtype() const override { return file_.header().dtype; }
  [[nodiscard]] std::string describe() const override { return file_.describe(); }
  [[nodiscard]] Array read(std::int64_t begin, std::int64_t end) const override {
    detail::check_range(file_.name(), "rows", "range", begin, end, shape().front());
    const std::int64_t row = row_size(shape());
    const Array rows = file_.read_rows(begin, end).reshape({end - begin, row});
    if (!dtype_is_float(rows.dtype())) return rows;
    const Array v = rows.astype(DType::f64);  // float16 included, exactly
    const std::int64_t i = detail::first_nonfinite(v.data_as<double>(), v.size());
    if (i < v.size())
      throw InvalidInput(file_.name() + ": " + what_ + " [" + str(begin + i / row) + ", " +
                         str(i % row) + "] is not finite: expected a real");
    return rows;
  }

 private:
  detail::NpyPartReader file_;
  std::string what_;
};

}  // namespace

std::unique_ptr<TableSource> array_table(const Array& table) {
  return std::make_unique<ArrayTable>(table);
}

std::unique_ptr<TableSource> npy_table(const std::filesystem::path& path, const std::string& what) {
  return std::make_unique<NpyTable>(path, what);
}

}  // namespace halfscope::io
