// One registration function per operation of the library (python/src/bind_<op>.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace halfscope::python {

void bind_conv(nanobind::module_& m);
void bind_deconv(nanobind::module_& m);
void bind_mfilter(nanobind::module_& m);
void bind_sim(nanobind::module_& m);
void bind_ao(nanobind::module_& m);
void bind_linalg(nanobind::module_& m);

}  // namespace halfscope::python
