// The array boundary of the Python extension: NumPy / CuPy / PyTorch arrays (anything nanobind
// imports through DLPack or the buffer protocol) become halfscope::Array views without a copy,
// and halfscope::Arrays go back as arrays of the caller's framework, owning their buffer.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "halfscope/core/array.hpp"

namespace halfscope::python {

namespace nb = nanobind;

/// Any array, any dtype, device and strides; read-only arrays accepted (inputs are never written).
using AnyArray = nb::ndarray<nb::ro>;

/// A view on the caller's memory: the returned Array borrows the data (the Python object must
/// outlive it, which holds for the duration of a call). `name` is the Python argument's name,
/// used in messages (a complex dtype, an array on another CUDA device than the current one, a CUDA
/// array in a build without CUDA are InvalidInput / Unsupported naming it).
Array view_of(const AnyArray& array, std::string_view name);

/// Where results go: the framework of the caller's input ("numpy", "cupy", "torch").
enum class Framework { numpy, cupy, torch };
Framework parse_framework(std::string_view text);

/// Hands `array` to Python as an array of `framework` on the array's device, sharing its buffer
/// (no copy) except for bfloat16 towards NumPy and CuPy, which have no such dtype: those are
/// widened to float32, exactly. A host result asked for as CuPy stays NumPy (CuPy arrays live on
/// the device; the Python layer moves what it must).
nb::object to_python(const Array& array, Framework framework);

/// Orders halfscope's GPU work with the caller's CUDA stream (0: the legacy default stream). On
/// construction it waits on the host until the caller's stream has produced the inputs, since
/// halfscope's backends run on streams of their own; `finish()` makes the caller's stream wait
/// for what halfscope left queued on the legacy default stream (asynchronous device results), so
/// later work on the caller's stream sees the results. No-op without CUDA or with host data.
class StreamOrder {
 public:
  StreamOrder(std::uintptr_t caller_stream, bool device_data);
  void finish();

 private:
  std::uintptr_t stream_;
  bool active_;
};

/// Runs `compute` (a library call) with the GIL released and ordered with the caller's stream
/// (StreamOrder), and returns its result: the shape of every binding's call.
template <class F>
auto released(std::uintptr_t caller_stream, bool device_data, F&& compute) {
  nb::gil_scoped_release unlocked;
  StreamOrder order(caller_stream, device_data);
  auto result = compute();
  order.finish();
  return result;
}

}  // namespace halfscope::python
