// Matched filtering spread over several CUDA devices of one host (issue 9). The call is validated
// and converted once (prepare), then each device runs the GPU path on its contiguous group of
// templates from its own host thread: templates are independent, so the groups' rows are exactly
// the rows a one-device run computes. Each device streams the host data in its own time chunks
// (dispatch_cuda.cpp), so the data never have to fit in one device.
#include "mfilter/devices.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::mfilter {

std::vector<std::pair<std::int64_t, std::int64_t>> template_ranges(std::int64_t templates,
                                                                   std::int64_t parts) {
  if (templates < 1 || parts < 1)
    throw InvalidInput("matched_filter: cannot split " + std::to_string(templates) +
                       " templates into " + std::to_string(parts) + " groups");
  const std::int64_t n = std::min(parts, templates);
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t begin = 0;
  for (std::int64_t g = 0; g < n; ++g) {
    // The first templates % n groups take one template more.
    const std::int64_t size = templates / n + (g < templates % n ? 1 : 0);
    ranges.emplace_back(begin, begin + size);
    begin += size;
  }
  return ranges;
}

void validate_devices(const std::vector<int>& devices, const Prepared& p) {
  if (devices.empty()) return;
  if (!p.on_gpu)
    throw InvalidInput("matched_filter: devices were given but the call runs on the CPU (method " +
                       std::string(mf_method_name(p.method)) + "): choose a GPU method or device");
#if HALFSCOPE_WITH_CUDA
  int count = 0;
  HS_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (const int d : devices)
    if (d < 0 || d >= count)
      throw InvalidInput("matched_filter: devices: CUDA device " + std::to_string(d) +
                         " does not exist (this host has " + std::to_string(count) + ": 0.." +
                         std::to_string(count - 1) + ")");
  int current = 0;
  HS_CUDA_CHECK(cudaGetDevice(&current));
  const bool only_current =
      std::all_of(devices.begin(), devices.end(), [&](int d) { return d == current; });
  if (p.data_on_device && !only_current)
    throw InvalidInput("matched_filter: devices: the data are on CUDA device " +
                       std::to_string(current) + "; spreading over other devices needs host data");
#else
  throw Unsupported("matched_filter: devices were given but halfscope was built without CUDA");
#endif
}

#if HALFSCOPE_WITH_CUDA

namespace {

// The prepared call restricted to templates [begin, end): shares the converted data and the
// templates' buffer (a 1-D slice of the contiguous T * C * K array).
Prepared template_group(const Prepared& p, std::int64_t begin, std::int64_t end) {
  Prepared g = p;
  const std::int64_t c = p.dims.channels, per = c * p.dims.length;
  g.dims.templates = end - begin;
  g.templates = p.templates.slice(0, begin * per, end * per);
  g.moveouts.assign(p.moveouts.begin() + begin * c, p.moveouts.begin() + end * c);
  g.weights.assign(p.weights.begin() + begin * c, p.weights.begin() + end * c);
  g.out_shape[0] = end - begin;
  return g;
}

// The same error with the device named first (the type, hence the CLI's exit status, kept).
[[noreturn]] void rethrow_on_device(const std::exception_ptr& e, int device) {
  const std::string where = "CUDA device " + std::to_string(device) + ": ";
  try {
    std::rethrow_exception(e);
  } catch (const NotPositiveDefinite& x) {
    throw NotPositiveDefinite(where + x.what());
  } catch (const NumericalError& x) {
    throw NumericalError(where + x.what());
  } catch (const InvalidInput& x) {
    throw InvalidInput(where + x.what());
  } catch (const IoError& x) {
    throw IoError(where + x.what());
  } catch (const Unsupported& x) {
    throw Unsupported(where + x.what());
  } catch (const CudaError& x) {
    throw CudaError(where + x.what());
  } catch (const Error& x) {
    throw Error(where + x.what());
  }
  // Anything else (std::bad_alloc, ...) keeps its type and message.
}

// Runs work(g, group) for every template group on one host thread per device and waits for all
// of them; then rethrows the first failure in device order, so an error on one device never
// leaves the others running or the call hanging.
template <class Work>
void on_devices(const Prepared& p, const std::vector<int>& devices, Work work) {
  const auto ranges = template_ranges(p.dims.templates, static_cast<std::int64_t>(devices.size()));
  std::vector<std::exception_ptr> errors(ranges.size());
  std::vector<std::thread> threads;
  threads.reserve(ranges.size());
  for (std::size_t g = 0; g < ranges.size(); ++g) {
    threads.emplace_back([&, g] {
      try {
        HS_CUDA_CHECK(cudaSetDevice(devices[g]));  // this thread's current device
        work(g, ranges[g], template_group(p, ranges[g].first, ranges[g].second));
      } catch (...) {
        errors[g] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t g = 0; g < errors.size(); ++g)
    if (errors[g]) rethrow_on_device(errors[g], devices[g]);
}

}  // namespace

Array run_cuda_devices(const Prepared& p, const std::vector<int>& devices) {
  // Uninitialised: every element is written by exactly one group (a result of tens of GB is
  // not worth zeroing first).
  Array out(DType::f32, p.out_shape);
  const std::int64_t row = out.size() / p.dims.templates;  // floats per template
  on_devices(p, devices, [&](std::size_t, const auto& range, const Prepared& group) {
    if (group.data_on_device) {  // only the current device may hold the data (validated)
      const Array part = run_cuda(group).to(Memory::host);
      std::memcpy(out.data_as<float>() + range.first * row, part.data_as<float>(),
                  static_cast<std::size_t>(part.nbytes()));
    } else {
      run_cuda_into(group, out.data_as<float>() + range.first * row);
    }
  });
  return out;
}

std::vector<Detection> detect_cuda_devices(const Prepared& p, const DetectOptions& detect,
                                           const std::vector<int>& devices) {
  std::vector<std::vector<Detection>> found(devices.size());
  on_devices(p, devices, [&](std::size_t g, const auto& range, const Prepared& group) {
    found[g] = detect_cuda(group, detect);
    for (Detection& d : found[g]) d.template_index += range.first;
  });
  std::vector<Detection> all;
  for (auto& f : found) all.insert(all.end(), f.begin(), f.end());
  return all;
}

#endif

}  // namespace halfscope::mfilter
