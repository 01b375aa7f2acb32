#include "halfscope/core/array.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/huge_pages.hpp"
#include "core/staged_copy.hpp"
#include "core/strided.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/convert.hpp"
#include "halfscope/core/device.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope {

std::string_view memory_name(Memory m) noexcept {
  switch (m) {
    case Memory::host:
      return "host";
    case Memory::pinned:
      return "pinned";
    case Memory::device:
      return "device";
  }
  return "unknown";
}

#if HALFSCOPE_WITH_CUDA
// Large pinned buffers (the out-of-core reconstructor's 20 GB of host tiles): cudaMallocHost
// faults its 4 KiB pages in one by one on one thread, about a second per GiB on the GPU machines
// (1.76 s for 4 GiB, 12.4 s for the E-ELT's 20 GB). Huge pages asked for before the first touch,
// the touch spread over the OpenMP threads, then cudaHostRegister: 0.68 s for 4 GiB on one thread
// (huge pages alone), less on several. Null where registering is refused (a locked-memory limit):
// the caller then takes cudaMallocHost's way.
std::shared_ptr<Buffer> Buffer::allocate_huge_pinned(std::int64_t bytes, std::size_t size) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (size < detail::kHugePageAdviceBytes) return nullptr;
  const std::size_t rounded = (size + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (!p) throw std::bad_alloc();
  detail::advise_huge_pages(p, rounded);
  const auto chunks = static_cast<std::int64_t>(rounded / kHuge);
  auto* first = static_cast<unsigned char*>(p);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c)
    std::memset(first + static_cast<std::size_t>(c) * kHuge, 0, kHuge);
  if (cudaHostRegister(p, rounded, cudaHostRegisterPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    std::free(p);
    return nullptr;
  }
  return std::shared_ptr<Buffer>(new Buffer(p, bytes, Memory::pinned, true, true));
}
#endif

std::shared_ptr<Buffer> Buffer::allocate(std::int64_t bytes, Memory memory) {
  if (bytes < 0 || bytes > std::numeric_limits<std::int64_t>::max() - 64)
    throw InvalidInput("Buffer::allocate: invalid size " + std::to_string(bytes));
  // Never a zero-sized allocation: an empty array still has a valid, distinct pointer.
  const auto size = static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1) + 63) / 64 * 64;
  void* p = nullptr;
#if HALFSCOPE_WITH_CUDA
  if (memory == Memory::device) {
    HS_CUDA_CHECK(cudaMalloc(&p, size));
    return std::shared_ptr<Buffer>(new Buffer(p, bytes, memory));
  }
  if (memory == Memory::pinned && cuda_available()) {
    if (auto big = allocate_huge_pinned(bytes, size)) return big;
    HS_CUDA_CHECK(cudaMallocHost(&p, size));
    return std::shared_ptr<Buffer>(new Buffer(p, bytes, memory));
  }
#else
  if (memory == Memory::device)
    throw Unsupported("device memory requested but halfscope was built without CUDA");
#endif
  p = std::aligned_alloc(64, size);
  if (!p) throw std::bad_alloc();
  detail::advise_huge_pages(p, size);
  return std::shared_ptr<Buffer>(new Buffer(p, bytes, Memory::host));  // pinned falls back here
}

std::shared_ptr<Buffer> Buffer::borrow(void* data, std::int64_t bytes, Memory memory) {
  if (!data || bytes < 0)
    throw InvalidInput("Buffer::borrow: null pointer or negative size " + std::to_string(bytes));
#if !HALFSCOPE_WITH_CUDA
  if (memory == Memory::device)
    throw Unsupported("a CUDA device array was passed but halfscope was built without CUDA");
#endif
  return std::shared_ptr<Buffer>(new Buffer(data, bytes, memory, false));
}

Buffer::~Buffer() {
  if (!owned_) return;
#if HALFSCOPE_WITH_CUDA
  // Destructors must not throw: a failed free is ignored (the context may already be gone).
  if (memory_ == Memory::device) {
    cudaFree(data_);
    return;
  }
  if (memory_ == Memory::pinned && registered_) {
    if (cudaHostUnregister(data_) != cudaSuccess) (void)cudaGetLastError();
    std::free(data_);
    return;
  }
  if (memory_ == Memory::pinned) {
    cudaFreeHost(data_);
    return;
  }
#endif
  std::free(data_);
}

void copy_bytes(void* dst, Memory dst_memory, const void* src, Memory src_memory,
                std::int64_t bytes) {
  if (bytes <= 0) return;
  if (dst_memory != Memory::device && src_memory != Memory::device) {
    std::memcpy(dst, src, static_cast<std::size_t>(bytes));
    return;
  }
#if HALFSCOPE_WITH_CUDA
  // Large copies between pageable host memory and a device go through pinned staging on several
  // host threads (staged_copy.hpp): the driver stages a pageable cudaMemcpy on the calling thread
  // alone (6.6 GB/s against 37 on an H200 host; R of the E-ELT is 4.5 GB). Legacy-stream work
  // is waited for first, as a cudaMemcpy would.
  constexpr std::int64_t kStagedBytes = std::int64_t{32} << 20;
  const bool up = src_memory == Memory::host && dst_memory == Memory::device;
  const bool down = src_memory == Memory::device && dst_memory == Memory::host;
  if (bytes >= kStagedBytes && (up || down)) {
    const cuda::DeviceGuard restore;
    HS_CUDA_CHECK(cudaSetDevice(cuda::device_of(up ? dst : src)));
    HS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    if (up)
      cuda::upload_staged(dst, src, bytes, cuda::staging_threads(1));
    else
      cuda::download_staged(dst, src, bytes, cuda::staging_threads(1));
    return;
  }
  HS_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault));
  // cudaMemcpy may return before a device-to-device or pageable host-to-device copy has landed;
  // backends then read the data from their own non-blocking streams, which do not wait for the
  // legacy stream. Waiting here makes every Array copy complete when it returns.
  HS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
#else
  throw Unsupported("device copy requested but halfscope was built without CUDA");
#endif
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::int64_t shape_size(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw InvalidInput("negative extent in shape " + shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw InvalidInput("shape " + shape_to_string(shape) + " has more than 2^63 elements");
    n *= d;
  }
  return n;
}

namespace {
// Strides from the innermost axis `first` outward; an extent of 0 counts as 1 so that strides stay
// meaningful for empty arrays, and a product beyond int64 is an error, not undefined behaviour.
Shape strides_in_order(const Shape& shape, bool c_order) {
  Shape s(shape.size());
  std::int64_t step = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::size_t i = c_order ? shape.size() - 1 - k : k;
    s[i] = step;
    const std::int64_t d = std::max<std::int64_t>(shape[i], 1);
    if (step > std::numeric_limits<std::int64_t>::max() / d)
      throw InvalidInput("shape " + shape_to_string(shape) + " is too large for 64-bit strides");
    step *= d;
  }
  return s;
}
}  // namespace

Shape c_strides(const Shape& shape) {
  return strides_in_order(shape, true);
}

Shape f_strides(const Shape& shape) {
  return strides_in_order(shape, false);
}

Array::Array(DType dtype, Shape shape, Memory memory) : dtype_(dtype), shape_(std::move(shape)) {
  const std::int64_t n = shape_size(shape_);  // checks extents before the strides use them
  strides_ = c_strides(shape_);
  if (n > std::numeric_limits<std::int64_t>::max() / dtype_size(dtype))
    throw InvalidInput("array of shape " + shape_to_string(shape_) + " exceeds 2^63 bytes");
  buffer_ = Buffer::allocate(n * dtype_size(dtype), memory);
}

Array::Array(std::shared_ptr<Buffer> buffer, DType dtype, Shape shape, Shape strides,
             std::int64_t offset_bytes)
    : buffer_(std::move(buffer)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset_bytes) {
  if (!buffer_) throw InvalidInput("Array: null buffer");
  if (strides_.size() != shape_.size())
    throw InvalidInput("Array: " + std::to_string(strides_.size()) + " strides for " +
                       std::to_string(shape_.size()) + " dimensions");
  const std::int64_t n = shape_size(shape_);
  if (offset_ < 0) throw InvalidInput("Array: negative byte offset");
  if (n == 0) return;
  // The lowest and highest element must both lie inside the buffer.
  std::int64_t lo = 0, hi = 0;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    const std::int64_t span = (shape_[i] - 1) * strides_[i];
    (span < 0 ? lo : hi) += span;
  }
  const std::int64_t item = dtype_size(dtype_);
  if (offset_ + lo * item < 0 || offset_ + (hi + 1) * item > buffer_->size())
    throw InvalidInput("Array: shape " + shape_to_string(shape_) + " with strides " +
                       shape_to_string(strides_) + " reaches outside its buffer of " +
                       std::to_string(buffer_->size()) + " bytes");
}

Array Array::zeros(DType dtype, Shape shape, Memory memory) {
  Array a(dtype, std::move(shape), memory);
  if (memory == Memory::device) {
#if HALFSCOPE_WITH_CUDA
    HS_CUDA_CHECK(cudaMemset(a.data(), 0, static_cast<std::size_t>(a.nbytes())));
#endif
  } else {
    std::memset(a.data(), 0, static_cast<std::size_t>(a.nbytes()));
  }
  return a;
}

std::int64_t Array::dim(std::int64_t axis) const {
  if (axis < 0) axis += ndim();
  if (axis < 0 || axis >= ndim())
    throw InvalidInput("axis " + std::to_string(axis) + " out of range for " + describe());
  return shape_[static_cast<std::size_t>(axis)];
}

std::int64_t Array::size() const noexcept {
  std::int64_t n = 1;
  for (std::int64_t d : shape_) n *= d;
  return n;
}

Memory Array::memory() const noexcept {
  return buffer_ ? buffer_->memory() : Memory::host;
}

namespace {
// Contiguity without materialising strides (which could overflow for huge empty shapes): walk the
// axes from the fastest, comparing each stride with the running product of the extents.
bool contiguous_in_order(const Shape& shape, const Shape& strides, bool c_order) noexcept {
  std::int64_t step = 1;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::size_t i = c_order ? shape.size() - 1 - k : k;
    if (shape[i] == 0) return true;  // no element: every layout is contiguous
    if (shape[i] > 1 && strides[i] != step) return false;
    if (step > std::numeric_limits<std::int64_t>::max() / std::max<std::int64_t>(shape[i], 1))
      return false;
    step *= shape[i];
  }
  return true;
}
}  // namespace

bool Array::is_c_contiguous() const noexcept {
  return contiguous_in_order(shape_, strides_, true);
}

bool Array::is_f_contiguous() const noexcept {
  return contiguous_in_order(shape_, strides_, false);
}

void* Array::data() noexcept {
  return buffer_ ? static_cast<std::byte*>(buffer_->data()) + offset_ : nullptr;
}
const void* Array::data() const noexcept {
  return buffer_ ? static_cast<const std::byte*>(buffer_->data()) + offset_ : nullptr;
}

void Array::check_dtype(DType expected) const {
  if (expected != dtype_)
    throw InvalidInput("expected a " + std::string(dtype_name(expected)) + " array, found " +
                       describe());
}

void Array::check_view2d(DType expected) const {
  check_dtype(expected);
  if (ndim() != 2 || (shape_[1] > 1 && strides_[1] != 1))
    throw InvalidInput("expected a 2-D array with contiguous rows, found " + describe());
}

double Array::at_as_double(std::int64_t linear_index) const {
  if (on_device()) throw InvalidInput("at_as_double: " + describe() + " is on the device");
  if (linear_index < 0 || linear_index >= size())
    throw InvalidInput("index " + std::to_string(linear_index) + " out of range for " + describe());
  const std::int64_t off = detail::element_offset(shape_, strides_, linear_index);
  return visit_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    return static_cast<double>(static_cast<const T*>(data())[off]);
  });
}

Array Array::clone(Memory memory) const {
  if (empty()) return {};
  Array out(dtype_, shape_, memory);
  if (is_c_contiguous()) {
    copy_bytes(out.data(), out.memory(), data(), this->memory(), nbytes());
    return out;
  }
  if (on_device())
    throw Unsupported("copying a non-contiguous device array is not supported: " + describe());
  Array host = memory == Memory::device ? Array(dtype_, shape_) : out;
  const std::int64_t item = itemsize();
  auto* dst = static_cast<std::byte*>(host.data());
  const auto* src = static_cast<const std::byte*>(data());
  detail::for_each_offset(shape_, strides_, [&](std::int64_t i, std::int64_t off) {
    std::memcpy(dst + i * item, src + off * item, static_cast<std::size_t>(item));
  });
  if (memory == Memory::device)
    copy_bytes(out.data(), out.memory(), host.data(), Memory::host, nbytes());
  return out;
}

Array Array::contiguous() const {
  return is_c_contiguous() ? *this : clone();
}

Array Array::reshape(Shape shape) const {
  if (!is_c_contiguous())
    throw InvalidInput("reshape needs a C-contiguous array, found " + describe());
  if (shape_size(shape) != size())
    throw InvalidInput("cannot reshape " + describe() + " to " + shape_to_string(shape));
  Shape strides = c_strides(shape);
  return Array(buffer_, dtype_, std::move(shape), std::move(strides), offset_);
}

Array Array::select(std::int64_t axis, std::int64_t index) const {
  const std::int64_t n = dim(axis);
  if (axis < 0) axis += ndim();
  if (index < 0 || index >= n)
    throw InvalidInput("index " + std::to_string(index) + " out of range [0, " + std::to_string(n) +
                       ") along axis " + std::to_string(axis) + " of " + describe());
  Shape shape = shape_, strides = strides_;
  const auto a = static_cast<std::size_t>(axis);
  const std::int64_t off = offset_ + index * strides_[a] * itemsize();
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(a));
  return Array(buffer_, dtype_, std::move(shape), std::move(strides), off);
}

Array Array::slice(std::int64_t axis, std::int64_t start, std::int64_t stop) const {
  const std::int64_t n = dim(axis);
  if (axis < 0) axis += ndim();
  if (start < 0 || stop > n || start > stop)
    throw InvalidInput("slice [" + std::to_string(start) + ", " + std::to_string(stop) +
                       ") out of range along axis " + std::to_string(axis) + " of " + describe());
  Shape shape = shape_;
  const auto a = static_cast<std::size_t>(axis);
  shape[a] = stop - start;
  return Array(buffer_, dtype_, std::move(shape), strides_,
               offset_ + start * strides_[a] * itemsize());
}

std::string Array::describe() const {
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_) + " " +
         std::string(memory_name(memory()));
}

}  // namespace halfscope
