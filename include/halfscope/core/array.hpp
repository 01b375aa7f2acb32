// Owning buffers and strided arrays, on the host or on a CUDA device.
//
// `Buffer` owns one allocation (aligned host, pinned host or device memory) and frees it in its
// destructor. `Array` is a typed-at-runtime n-dimensional view on a shared Buffer: dtype, shape,
// strides in elements, a byte offset. Copying an Array shares the buffer (like a NumPy view);
// `clone()` copies the data. Every size and index is 64-bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "halfscope/core/dtype.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope {

using Shape = std::vector<std::int64_t>;

/// Where a buffer lives. `pinned` is page-locked host memory (faster, asynchronous copies); where
/// no CUDA device is present it falls back to ordinary aligned host memory.
enum class Memory : std::uint8_t { host, pinned, device };

std::string_view memory_name(Memory m) noexcept;

/// One owned allocation. Non-copyable; shared between Arrays through shared_ptr.
class Buffer {
 public:
  /// Allocates `bytes` (64-byte aligned on the host). Throws CudaError or std::bad_alloc.
  static std::shared_ptr<Buffer> allocate(std::int64_t bytes, Memory memory);
  /// Wraps memory someone else owns (a NumPy, CuPy or PyTorch array handed over by the Python
  /// bindings) without copying it: never freed here, so the owner must outlive every Array on it.
  static std::shared_ptr<Buffer> borrow(void* data, std::int64_t bytes, Memory memory);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  [[nodiscard]] void* data() noexcept { return data_; }
  [[nodiscard]] const void* data() const noexcept { return data_; }
  [[nodiscard]] std::int64_t size() const noexcept { return bytes_; }
  [[nodiscard]] Memory memory() const noexcept { return memory_; }

 private:
  // Large pinned buffers on huge pages (array.cpp); null where pinning them is refused.
  static std::shared_ptr<Buffer> allocate_huge_pinned(std::int64_t bytes, std::size_t size);
  Buffer(void* data, std::int64_t bytes, Memory memory, bool owned = true, bool registered = false)
      : data_(data), bytes_(bytes), memory_(memory), owned_(owned), registered_(registered) {}
  void* data_;
  std::int64_t bytes_;
  Memory memory_;
  bool owned_;
  bool registered_;  // pinned by cudaHostRegister on an aligned_alloc block (large buffers)
};

/// A non-owning typed 2D view (row-major with a row stride), for kernels and backends.
template <class T>
struct View2D {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;  // elements between the starts of consecutive rows
  T& operator()(std::int64_t r, std::int64_t c) const { return data[r * row_stride + c]; }
};

/// Strided n-dimensional array of any DType on the host or a device.
class Array {
 public:
  Array() = default;
  /// Uninitialised C-contiguous array.
  Array(DType dtype, Shape shape, Memory memory = Memory::host);
  /// Array over an existing buffer; strides in elements, offset in bytes. Checks every element
  /// lies inside the buffer (throws InvalidInput otherwise).
  Array(std::shared_ptr<Buffer> buffer, DType dtype, Shape shape, Shape strides,
        std::int64_t offset_bytes = 0);

  static Array zeros(DType dtype, Shape shape, Memory memory = Memory::host);
  /// Host array holding a copy of `values` with the given shape (size must match).
  template <class T>
  static Array from_values(std::span<const T> values, Shape shape) {
    Array a(dtype_of<T>, std::move(shape));
    if (static_cast<std::int64_t>(values.size()) != a.size())
      throw InvalidInput("Array::from_values: " + std::to_string(values.size()) +
                         " values for a shape of " + std::to_string(a.size()) + " elements");
    std::copy(values.begin(), values.end(), a.data_as<T>());
    return a;
  }

  [[nodiscard]] bool empty() const noexcept { return !buffer_; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] const Shape& shape() const noexcept { return shape_; }
  [[nodiscard]] const Shape& strides() const noexcept { return strides_; }
  [[nodiscard]] std::int64_t ndim() const noexcept {
    return static_cast<std::int64_t>(shape_.size());
  }
  [[nodiscard]] std::int64_t dim(std::int64_t axis) const;
  [[nodiscard]] std::int64_t size() const noexcept;
  [[nodiscard]] std::int64_t itemsize() const noexcept { return dtype_size(dtype_); }
  [[nodiscard]] std::int64_t nbytes() const noexcept { return size() * itemsize(); }
  [[nodiscard]] Memory memory() const noexcept;
  [[nodiscard]] bool on_device() const noexcept { return memory() == Memory::device; }
  [[nodiscard]] bool is_c_contiguous() const noexcept;
  [[nodiscard]] bool is_f_contiguous() const noexcept;
  [[nodiscard]] const std::shared_ptr<Buffer>& buffer() const noexcept { return buffer_; }
  [[nodiscard]] std::int64_t offset_bytes() const noexcept { return offset_; }

  [[nodiscard]] void* data() noexcept;
  [[nodiscard]] const void* data() const noexcept;
  /// Typed pointer to the first element; throws InvalidInput if T is not the dtype.
  template <class T>
  [[nodiscard]] T* data_as() {
    check_dtype(dtype_of<T>);
    return static_cast<T*>(data());
  }
  template <class T>
  [[nodiscard]] const T* data_as() const {
    check_dtype(dtype_of<T>);
    return static_cast<const T*>(data());
  }
  /// Typed 2D view; requires ndim == 2 and unit stride along columns.
  template <class T>
  [[nodiscard]] View2D<T> view2d() {
    check_view2d(dtype_of<T>);
    return {data_as<T>(), shape_[0], shape_[1], strides_[0]};
  }
  template <class T>
  [[nodiscard]] View2D<const T> view2d() const {
    check_view2d(dtype_of<T>);
    return {data_as<T>(), shape_[0], shape_[1], strides_[0]};
  }

  /// Element `index` (row-major linear index) read as double; host arrays only.
  [[nodiscard]] double at_as_double(std::int64_t linear_index) const;

  /// Deep copy with the same layout class: C-contiguous result, in `memory`.
  [[nodiscard]] Array clone(Memory memory) const;
  [[nodiscard]] Array clone() const { return clone(memory()); }
  /// Copy to another memory kind (host <-> device); the result is C-contiguous.
  [[nodiscard]] Array to(Memory memory) const { return clone(memory); }
  /// C-contiguous version (this array itself if it already is).
  [[nodiscard]] Array contiguous() const;
  /// Same data with a new shape; requires C-contiguous and the same size.
  [[nodiscard]] Array reshape(Shape shape) const;
  /// The sub-array at `index` along `axis` (one dimension fewer); shares the buffer.
  [[nodiscard]] Array select(std::int64_t axis, std::int64_t index) const;
  /// Elements [start, stop) along `axis`; shares the buffer.
  [[nodiscard]] Array slice(std::int64_t axis, std::int64_t start, std::int64_t stop) const;

  /// Host conversion to another dtype. Floating conversions round to nearest even; conversions
  /// to FP16/BF16 count overflow and underflow into `report` when given (see convert.hpp).
  [[nodiscard]] Array astype(DType dtype, struct ConversionReport* report = nullptr) const;

  /// "float32[512, 512] host": for messages.
  [[nodiscard]] std::string describe() const;

 private:
  void check_dtype(DType expected) const;
  void check_view2d(DType expected) const;

  std::shared_ptr<Buffer> buffer_;
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
};

/// "[512, 512]": for messages.
std::string shape_to_string(const Shape& shape);
/// Number of elements of a shape (1 for a 0-d shape); throws InvalidInput on a negative extent
/// or an element count that overflows int64.
std::int64_t shape_size(const Shape& shape);
/// C-order strides (in elements) of a shape.
Shape c_strides(const Shape& shape);
/// Fortran-order strides (in elements) of a shape.
Shape f_strides(const Shape& shape);

/// Copies `bytes` between any two memories (cudaMemcpy where a device is involved). Complete on
/// return, also for device-to-device copies, so any stream may read the destination at once.
void copy_bytes(void* dst, Memory dst_memory, const void* src, Memory src_memory,
                std::int64_t bytes);

}  // namespace halfscope
