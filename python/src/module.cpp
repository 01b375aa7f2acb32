// halfscope._core: the nanobind extension under the `halfscope` Python package. The Python layer
// (python/halfscope/*.py) gives the public, SciPy- and Fast-Matched-Filter-shaped API; this module
// takes arrays without copying them, releases the GIL while the library computes, and turns the
// library's typed errors into the Python exceptions of the same names carrying the same message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <Python.h>

#include <exception>

#include "bindings.hpp"
#include "halfscope/core/build_info.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"

namespace nb = nanobind;

namespace {

// Exception classes, created once at import: each derives from halfscope.Error and from the
// Python builtin a caller would catch for that kind of failure (ValueError for bad input, ...).
struct PyErrors {
  PyObject* error = nullptr;
  PyObject* invalid_input = nullptr;
  PyObject* io_error = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* cuda_error = nullptr;
  PyObject* numerical_error = nullptr;
  PyObject* not_positive_definite = nullptr;
};
PyErrors errors;

PyObject* make_error(nb::module_& m, const char* name, PyObject* base1, PyObject* base2,
                     const char* doc) {
  nb::object bases = base2 ? nb::steal(PyTuple_Pack(2, base1, base2)) : nb::borrow(base1);
  const std::string qualified = std::string("halfscope.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const halfscope::NotPositiveDefinite& e) {
    PyErr_SetString(errors.not_positive_definite, e.what());
  } catch (const halfscope::NumericalError& e) {
    PyErr_SetString(errors.numerical_error, e.what());
  } catch (const halfscope::InvalidInput& e) {
    PyErr_SetString(errors.invalid_input, e.what());
  } catch (const halfscope::IoError& e) {
    PyErr_SetString(errors.io_error, e.what());
  } catch (const halfscope::Unsupported& e) {
    PyErr_SetString(errors.unsupported, e.what());
  } catch (const halfscope::CudaError& e) {
    PyErr_SetString(errors.cuda_error, e.what());
  } catch (const halfscope::Error& e) {
    PyErr_SetString(errors.error, e.what());
  }
}

nb::dict info() {
  const halfscope::DeviceReport r = halfscope::query_devices();
  const halfscope::BuildInfo b = halfscope::build_info();
  nb::dict d;
  d["version"] = b.version;
  d["build_type"] = b.build_type;
  nb::dict options;
  for (const auto& [name, on] : b.options) options[name.c_str()] = on;
  d["options"] = options;
  d["cuda_built"] = r.cuda_built;
  d["driver_version"] = r.driver_version;
  d["runtime_version"] = r.runtime_version;
  d["status"] = r.status;
  nb::list devices;
  for (const auto& dev : r.devices) {
    nb::dict x;
    x["index"] = dev.index;
    x["name"] = dev.name;
    x["cc"] = dev.compute_capability();
    x["multiprocessors"] = dev.multiprocessors;
    x["memory_bytes"] = dev.memory_bytes;
    x["l2_bytes"] = dev.l2_bytes;
    devices.append(x);
  }
  d["devices"] = devices;
  return d;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "halfscope's compiled core; use the `halfscope` package, not this module.";
  errors.error = make_error(m, "Error", PyExc_Exception, nullptr, "Base of every halfscope error.");
  errors.invalid_input =
      make_error(m, "InvalidInput", errors.error, PyExc_ValueError,
                 "An argument the operation cannot accept (shape, value, option).");
  errors.io_error = make_error(m, "IoError", errors.error, PyExc_OSError,
                               "A file could not be read, parsed or written.");
  errors.unsupported = make_error(m, "Unsupported", errors.error, PyExc_NotImplementedError,
                                  "The build or the machine lacks what was asked for.");
  errors.cuda_error = make_error(m, "CudaError", errors.error, PyExc_RuntimeError,
                                 "A CUDA runtime or library call failed.");
  errors.numerical_error = make_error(m, "NumericalError", errors.error, PyExc_ArithmeticError,
                                      "Arithmetic failed: FP16 overflow, NaN produced, a stall.");
  errors.not_positive_definite =
      make_error(m, "NotPositiveDefinite", errors.numerical_error, nullptr,
                 "A Cholesky factorization met a non-positive pivot (names the tile and policy).");
  nb::register_exception_translator(translate);

  m.def("info", &info, "Devices, backends and versions, as `halfscope info --json` reports them.");
  // Cheap (no device query, no CUDA context): the package reads it at import.
  m.def(
      "version", [] { return halfscope::build_info().version; }, "The library's version.");
  m.def("cuda_available", &halfscope::cuda_available, "Whether a CUDA device can run kernels.");

  halfscope::python::bind_conv(m);
  halfscope::python::bind_deconv(m);
  halfscope::python::bind_mfilter(m);
  halfscope::python::bind_sim(m);
  halfscope::python::bind_ao(m);
  halfscope::python::bind_linalg(m);
}
