// Internal (CUDA builds only): the stream of a CUDA deconvolution backend, for code that times or
// orders work against it (tests, benchmarks: CUDA events recorded on this stream). Plain C++ (no
// device code), so .cpp files may include it.
#pragma once

#include <cuda_runtime.h>

#include "deconv/backend.hpp"

namespace halfscope::deconv::detail {

/// The non-blocking stream every operation of `backend` is queued on; InvalidInput when
/// `backend` is not a CUDA backend (make_cuda_backend).
cudaStream_t cuda_backend_stream(const Backend& backend);

}  // namespace halfscope::deconv::detail
