#include "arrays.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::python {

namespace {

DType dtype_of_dlpack(nb::dlpack::dtype t, std::string_view name) {
  using code = nb::dlpack::dtype_code;
  const auto c = static_cast<code>(t.code);
  const std::string what = "Python argument '" + std::string(name) + "': ";
  if (t.lanes != 1)
    throw InvalidInput(what + "vector dtypes (" + std::to_string(t.lanes) +
                       " lanes) are not supported");
  if (c == code::Float) {
    if (t.bits == 16) return DType::f16;
    if (t.bits == 32) return DType::f32;
    if (t.bits == 64) return DType::f64;
  } else if (c == code::Bfloat && t.bits == 16) {
    return DType::bf16;
  } else if (c == code::Int) {
    if (t.bits == 8) return DType::i8;
    if (t.bits == 16) return DType::i16;
    if (t.bits == 32) return DType::i32;
    if (t.bits == 64) return DType::i64;
  } else if (c == code::UInt) {
    if (t.bits == 8) return DType::u8;
    if (t.bits == 16) return DType::u16;
    if (t.bits == 32) return DType::u32;
    if (t.bits == 64) return DType::u64;
  } else if (c == code::Bool) {
    return DType::u8;
  } else if (c == code::Complex) {
    throw InvalidInput(what +
                       "complex arrays are not supported (expected a real dtype: float16, "
                       "bfloat16, float32, float64 or an integer type)");
  }
  throw InvalidInput(what + "unsupported dtype (DLPack code " + std::to_string(t.code) + ", " +
                     std::to_string(t.bits) +
                     " bits); expected float16, bfloat16, float32, "
                     "float64 or an integer type");
}

Memory memory_of(const AnyArray& a, std::string_view name) {
  const int type = a.device_type();
  if (type == nb::device::cpu::value) return Memory::host;
  if (type == nb::device::cuda_host::value) return Memory::pinned;
  if (type == nb::device::cuda::value || type == nb::device::cuda_managed::value) {
#if HALFSCOPE_WITH_CUDA
    int current = 0;
    HS_CUDA_CHECK(cudaGetDevice(&current));
    if (a.device_id() != current)
      throw InvalidInput("Python argument '" + std::string(name) + "' is on CUDA device " +
                         std::to_string(a.device_id()) +
                         " but halfscope runs on the current "
                         "device " +
                         std::to_string(current) +
                         ": make that device current first (cupy.cuda.Device(i).use(), "
                         "torch.cuda.set_device(i))");
    return Memory::device;
#else
    throw Unsupported("Python argument '" + std::string(name) +
                      "' is a CUDA array but this halfscope was built without CUDA");
#endif
  }
  throw Unsupported("Python argument '" + std::string(name) + "' lives on DLPack device type " +
                    std::to_string(type) + "; halfscope reads host and CUDA arrays");
}

}  // namespace

Array view_of(const AnyArray& a, std::string_view name) {
  const DType dtype = dtype_of_dlpack(a.dtype(), name);
  const Memory memory = memory_of(a, name);
  const auto ndim = static_cast<std::int64_t>(a.ndim());
  Shape shape(static_cast<std::size_t>(ndim)), strides(static_cast<std::size_t>(ndim));
  std::int64_t lo = 0, hi = 0, count = 1;
  for (std::int64_t i = 0; i < ndim; ++i) {
    const auto k = static_cast<std::size_t>(i);
    shape[k] = static_cast<std::int64_t>(a.shape(k));
    strides[k] = a.stride(k);
    count *= shape[k];
    if (shape[k] > 0) (strides[k] < 0 ? lo : hi) += (shape[k] - 1) * strides[k];
  }
  // An empty array may come with any pointer: give it a buffer of its own, and let the operation
  // reject the empty input with its usual message.
  if (count == 0) return Array(dtype, std::move(shape), Memory::host);
  const std::int64_t item = dtype_size(dtype);
  // The borrowed buffer spans the lowest to the highest element, so negative strides (a[::-1])
  // stay views: the first element sits at byte offset -lo * item from the buffer's start.
  auto* first = static_cast<std::byte*>(const_cast<void*>(a.data()));
  auto buffer = Buffer::borrow(first + lo * item, (hi - lo + 1) * item, memory);
  return Array(std::move(buffer), dtype, std::move(shape), std::move(strides), -lo * item);
}

Framework parse_framework(std::string_view text) {
  if (text == "numpy") return Framework::numpy;
  if (text == "cupy") return Framework::cupy;
  if (text == "torch") return Framework::torch;
  throw InvalidInput("framework '" + std::string(text) + "': expected numpy, cupy or torch");
}

namespace {

template <class Kind>
nb::object wrap(const Array& a, nb::dlpack::dtype dtype, int device_type) {
  auto* keep = new Array(a);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Array*>(p); });
  std::vector<std::size_t> shape(a.shape().begin(), a.shape().end());
  std::vector<std::int64_t> strides(a.strides().begin(), a.strides().end());
  int device_id = 0;
#if HALFSCOPE_WITH_CUDA
  if (a.on_device()) HS_CUDA_CHECK(cudaGetDevice(&device_id));
#endif
  nb::ndarray<Kind> out(const_cast<void*>(a.data()), shape.size(), shape.data(), owner,
                        strides.data(), dtype, device_type, device_id);
  return nb::cast(out, nb::rv_policy::reference);
}

nb::dlpack::dtype dlpack_of(DType t) {
  using code = nb::dlpack::dtype_code;
  const auto bits = static_cast<std::uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::f16:
    case DType::f32:
    case DType::f64:
      return {static_cast<std::uint8_t>(code::Float), bits, 1};
    case DType::bf16:
      return {static_cast<std::uint8_t>(code::Bfloat), bits, 1};
    case DType::i8:
    case DType::i16:
    case DType::i32:
    case DType::i64:
      return {static_cast<std::uint8_t>(code::Int), bits, 1};
    default:
      return {static_cast<std::uint8_t>(code::UInt), bits, 1};
  }
}

}  // namespace

nb::object to_python(const Array& array, Framework framework) {
  Array a = array;
  // NumPy and CuPy have no bfloat16: widen (exactly) on the host, then return to the device.
  if (a.dtype() == DType::bf16 && framework != Framework::torch) {
    const Memory where = a.memory();
    a = a.to(Memory::host).astype(DType::f32);
    if (where == Memory::device) a = a.to(Memory::device);
  }
  const nb::dlpack::dtype dtype = dlpack_of(a.dtype());
  if (!a.on_device()) {
    if (framework == Framework::torch) return wrap<nb::pytorch>(a, dtype, nb::device::cpu::value);
    return wrap<nb::numpy>(a, dtype, nb::device::cpu::value);
  }
  if (framework == Framework::torch) return wrap<nb::pytorch>(a, dtype, nb::device::cuda::value);
  if (framework == Framework::cupy) return wrap<nb::cupy>(a, dtype, nb::device::cuda::value);
  throw InvalidInput("a device result was asked for as a NumPy array: move it with .to('cpu')");
}

StreamOrder::StreamOrder(std::uintptr_t caller_stream, bool device_data)
    : stream_(caller_stream), active_(device_data) {
#if HALFSCOPE_WITH_CUDA
  if (active_) HS_CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream_)));
#endif
}

void StreamOrder::finish() {
#if HALFSCOPE_WITH_CUDA
  // Nothing to order when the caller works on the legacy stream itself (0, or the handle 1).
  if (!active_ || stream_ == 0 || stream_ == 1) return;
  cuda::Event done;
  done.record(nullptr);
  HS_CUDA_CHECK(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(stream_), done.get(), 0));
#endif
}

}  // namespace halfscope::python
