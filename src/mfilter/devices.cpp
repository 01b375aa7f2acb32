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

#include "core/host_threads.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_WITH_CUDA
#include "core/staged_copy.hpp"
#include "halfscope/core/cuda.hpp"
#endif

namespace halfscope::mfilter {

std::vector<std::pair<std::int64_t, std::int64_t>> template_ranges(std::int64_t templates,
                                                                   std::int64_t parts,
                                                                   std::int64_t granule) {
  if (templates < 1 || parts < 1 || granule < 1)
    throw InvalidInput("matched_filter: cannot split " + std::to_string(templates) +
                       " templates into " + std::to_string(parts) + " groups of multiples of " +
                       std::to_string(granule));
  const std::int64_t units = (templates + granule - 1) / granule;
  const std::int64_t n = std::min(parts, units);
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::int64_t begin = 0;
  for (std::int64_t g = 0; g < n; ++g) {
    // The first units % n groups take one unit more; the last group ends at `templates`.
    const std::int64_t size = (units / n + (g < units % n ? 1 : 0)) * granule;
    const std::int64_t end = std::min(templates, begin + size);
    ranges.emplace_back(begin, end);
    begin = end;
  }
  return ranges;
}

std::int64_t group_granule(const Prepared& p) {
  const bool wgmma = p.method == MfMethod::Tensor && wgmma_network_call(p.dims, p.precision);
  return wgmma ? kWgmmaGroupTemplates : kGroupGranule;
}

std::int64_t wgmma_row_length(const std::int64_t* moveouts, const float* weights, std::int64_t rows,
                              std::int64_t C, std::int64_t K) {
  std::int64_t longest = 0, base = 0;
  for (std::int64_t g = 0; g * kWgmmaGroupTemplates < rows; ++g)
    for (std::int64_t c = 0; c < C; ++c)
      longest =
          std::max(longest, 16 * wgmma_group_ksteps(moveouts, weights, rows, C, K, g, c, base));
  return longest;
}

std::int64_t wgmma_row_length(const Prepared& p) {
  return wgmma_row_length(p.moveouts.data(), p.weights.data(), p.dims.templates, p.dims.channels,
                          p.dims.length);
}

std::int64_t tile_moveout_spread(const std::int64_t* moveouts, std::int64_t rows, std::int64_t C) {
  std::int64_t spread = 0;
  for (std::int64_t t0 = 0; t0 < rows; t0 += kGroupGranule)
    for (std::int64_t c = 0; c < C; ++c) {
      std::int64_t lo = moveouts[t0 * C + c], hi = lo;
      for (std::int64_t t = t0 + 1; t < std::min(rows, t0 + kGroupGranule); ++t) {
        lo = std::min(lo, moveouts[t * C + c]);
        hi = std::max(hi, moveouts[t * C + c]);
      }
      spread = std::max(spread, hi - lo);
    }
  return spread;
}

// The tensor kernel's moveout_spread_kernel over the whole call: it shortens its tiles of
// correlation times by this, which moves where each block stages and scales its data.
std::int64_t tile_moveout_spread(const Prepared& p) {
  if (p.moveouts.empty()) return 0;
  return tile_moveout_spread(p.moveouts.data(), p.dims.templates, p.dims.channels);
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
  if (p.data_on_device) {
    // Device data stay where they are: only their own device may run the call.
    const int where = cuda::device_of(p.data.data());
    const bool own = std::all_of(devices.begin(), devices.end(), [&](int d) { return d == where; });
    if (!own)
      throw InvalidInput("matched_filter: devices: the data are on CUDA device " +
                         std::to_string(where) + "; spreading over other devices needs host data");
  }
#else
  throw Unsupported("matched_filter: devices were given but halfscope was built without CUDA");
#endif
}

#if HALFSCOPE_WITH_CUDA

namespace {

// What every template group of a call takes from the whole call: computed once per call, not
// once per group.
struct WholeCall {
  std::int64_t granule = kGroupGranule;  // group_granule
  std::int64_t spread = 0;               // the tensor kernel's tiles of correlation times
  std::pair<std::int64_t, std::int64_t> moveout_range;
  // Whether groups starting on a multiple of 64 templates may run the wgmma kernel, and the
  // longest template row K' they size it by. A call that is already one group of a larger one
  // (an MPI rank's block) keeps that call's alignment and K' floor.
  bool wgmma = false;
  std::int64_t kp_floor = 0;
};

WholeCall whole_call(const Prepared& p) {
  WholeCall w;
  w.granule = group_granule(p);
  w.spread = std::max(p.tile_spread_floor, tile_moveout_spread(p));
  w.moveout_range = contributing_moveout_range(p);
  w.wgmma = w.granule == kWgmmaGroupTemplates && (!p.template_group || p.wgmma_aligned);
  w.kp_floor = w.wgmma ? std::max(p.wgmma_kp_floor, wgmma_row_length(p)) : 0;
  return w;
}

// The prepared call restricted to templates [begin, end): shares the converted data and the
// templates' buffer (a 1-D slice of the contiguous T * C * K array).
Prepared template_group(const Prepared& p, std::int64_t begin, std::int64_t end,
                        const WholeCall& whole) {
  Prepared g = p;
  g.tile_spread_floor = whole.spread;
  g.template_group = true;
  g.wgmma_aligned = whole.wgmma && begin % kWgmmaGroupTemplates == 0;
  g.wgmma_kp_floor = g.wgmma_aligned ? whole.kp_floor : 0;
  g.chunk_moveout_range = whole.moveout_range;
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

// Runs fn(i) for i in [0, n) on n host threads and waits for all; then rethrows the first
// failure in index order (with `devices[i]` named), so no thread outlives the call.
template <class Fn>
void on_threads(std::size_t n, const std::vector<int>& devices, Fn fn) {
  const std::vector<std::exception_ptr> errors = halfscope::detail::on_threads(n, fn);
  for (std::size_t i = 0; i < n; ++i)
    if (errors[i]) rethrow_on_device(errors[i], devices[i]);
}

// Runs work(g, range, group) for every template group on one host thread per listed device,
// that device current, and waits for all of them; then rethrows the first failure in device
// order, so an error on one device never leaves the others running or the call hanging.
template <class Work>
void on_devices(const Prepared& p, const std::vector<int>& devices, Work work) {
  const WholeCall whole = whole_call(p);
  const auto ranges = template_ranges(p.dims.templates, std::ssize(devices), whole.granule);
  on_threads(ranges.size(), devices, [&](std::size_t g) {
    HS_CUDA_CHECK(cudaSetDevice(devices[g]));  // this thread's current device
    work(g, ranges[g], template_group(p, ranges[g].first, ranges[g].second, whole));
  });
}

// Host data that fit next to each group's whole stack (when the call keeps it: not a detection
// with an absolute threshold, which searches fixed time chunks) on every device (and no test
// forces time chunks, which exercises the streaming path below) are placed on the devices once.
// Each device uploads a slice of the channels from its own thread, through pinned staging on
// several host threads (upload_staged: a pageable upload is bound by one host thread's copy into
// the driver's staging, 6.6-10 GB/s, a fifth of the 4-device run), then copies the other slices
// from their devices peer to peer (NVLink where present). Every device streaming the whole host
// array instead made the data movement grow with the device count (4 x H200: 0.57 efficiency at 4
// devices).
class ResidentData {
 public:
  ResidentData(const Prepared& p, const std::vector<int>& devices, bool whole_stack) {
    if (p.data_on_device || p.data.dtype() != DType::f32) return;
    const auto ranges = template_ranges(p.dims.templates, std::ssize(devices), group_granule(p));
    const std::int64_t rows_per_template = p.dims.network_sum ? 1 : p.dims.channels;
    // A chunked search holds two chunks' stacks (one, when the row fits one chunk).
    const std::int64_t n_corr =
        whole_stack ? p.dims.n_corr : std::min(p.dims.n_corr, 2 * detect_chunk_correlations());
    // Per device: one copy of the data; per group on it: its stack (whole, or its chunks') and
    // its window statistics (about twice the data).
    std::vector<std::pair<int, std::int64_t>> need;
    for (std::size_t g = 0; g < ranges.size(); ++g) {
      const std::int64_t bytes =
          (ranges[g].second - ranges[g].first) * rows_per_template * n_corr * 4 +
          2 * p.data.nbytes();
      auto it =
          std::find_if(need.begin(), need.end(), [&](auto& n) { return n.first == devices[g]; });
      if (it == need.end())
        need.emplace_back(devices[g], bytes + p.data.nbytes());
      else
        it->second += bytes;
    }
    const cuda::DeviceGuard restore;
    bool fits = true;
    for (const auto& [device, bytes] : need) {
      std::size_t free = 0, total = 0;
      HS_CUDA_CHECK(cudaSetDevice(device));
      HS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
      // A quarter of the free memory stays for the backends' scratch and other users; processes
      // sharing the device (Prepared::device_share) each count on their share of the rest.
      fits = fits && bytes <= static_cast<std::int64_t>(free) / 4 * 3 / std::max(1, p.device_share);
    }
    if (!fits || chunks_forced_for_testing()) return;
    for (const auto& [device, bytes] : need) devices_.push_back(device);
    copies_.resize(devices_.size());
    const std::int64_t channels = p.dims.channels, row = p.dims.samples;
    const auto slice = [&](std::size_t i) {  // channels [first, last) uploaded by device i
      const auto n = static_cast<std::int64_t>(devices_.size());
      const auto k = static_cast<std::int64_t>(i);
      return std::pair<std::int64_t, std::int64_t>{channels * k / n, channels * (k + 1) / n};
    };
    const float* host = p.data.data_as<float>();
    const int threads = cuda::staging_threads(static_cast<int>(devices_.size()));
    on_threads(devices_.size(), devices_, [&](std::size_t i) {
      HS_CUDA_CHECK(cudaSetDevice(devices_[i]));
      copies_[i] = Array(DType::f32, p.data.shape(), Memory::device);
      const auto [first, last] = slice(i);
      // Synchronous: the slice is on the device before a peer reads it.
      cuda::upload_staged(copies_[i].data_as<float>() + first * row, host + first * row,
                          (last - first) * row * 4, threads);
    });
    on_threads(devices_.size(), devices_, [&](std::size_t i) {
      const int device = devices_[i];
      HS_CUDA_CHECK(cudaSetDevice(device));
      for (std::size_t j = 0; j < devices_.size(); ++j) {
        if (j == i) continue;
        enable_peer_access(device, devices_[j]);
        const auto [first, last] = slice(j);
        HS_CUDA_CHECK(cudaMemcpyPeer(copies_[i].data_as<float>() + first * row, device,
                                     copies_[j].data_as<float>() + first * row, devices_[j],
                                     static_cast<std::size_t>((last - first) * row) * 4));
      }
      HS_CUDA_CHECK(cudaDeviceSynchronize());  // the backends read it from their own streams
    });
  }

  [[nodiscard]] bool active() const { return !copies_.empty(); }

  /// The data on device `device` (one of the listed ones).
  [[nodiscard]] Array on(int device) const {
    const auto it = std::find(devices_.begin(), devices_.end(), device);
    return copies_[static_cast<std::size_t>(it - devices_.begin())];
  }

 private:
  // Direct peer access (NVLink or PCIe peer-to-peer) from the current device `device` to `peer`
  // where the devices allow it; without it cudaMemcpyPeer stages through host memory.
  static void enable_peer_access(int device, int peer) {
    int can = 0;
    HS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
    if (!can) return;
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();  // enabled by an earlier call: fine
    else
      HS_CUDA_CHECK(e);
  }

  std::vector<int> devices_;   // the distinct listed devices, in order of first appearance
  std::vector<Array> copies_;  // the whole data on each of them
};

// The group with its data on this thread's device when the data are resident (its result then
// stays on that device), as it is otherwise.
Prepared with_data(Prepared group, const ResidentData& resident, int device) {
  if (resident.active()) {
    group.data = resident.on(device);
    group.data_on_device = true;
  }
  return group;
}

}  // namespace

Array run_cuda_devices(const Prepared& p, const std::vector<int>& devices) {
  // Uninitialised: every element is written by exactly one group (a result of tens of GB is
  // not worth zeroing first).
  Array out(DType::f32, p.out_shape);
  const std::int64_t row = out.size() / p.dims.templates;  // floats per template
  const ResidentData resident(p, devices, true);
  on_devices(p, devices, [&](std::size_t g, const auto& range, const Prepared& group) {
    float* rows = out.data_as<float>() + range.first * row;
    const Prepared mine = with_data(group, resident, devices[g]);
    if (mine.data_on_device) {
      const Array part = run_cuda(mine);  // on this device: straight into the result's rows
      HS_CUDA_CHECK(cudaMemcpy(rows, part.data(), static_cast<std::size_t>(part.nbytes()),
                               cudaMemcpyDeviceToHost));
    } else {
      run_cuda_into(mine, rows);
    }
  });
  return out;
}

namespace {

// detect_cuda (or, `declustered` false, detect_candidates_cuda) over the devices.
std::vector<Detection> search_devices(const Prepared& p, const DetectOptions& detect,
                                      const std::vector<int>& devices, bool declustered) {
  std::vector<std::vector<Detection>> found(devices.size());
  // An absolute threshold searches fixed time chunks of the placed data (detect_cuda copies each
  // chunk on the device), so no device holds a whole stack. Every device streaming its chunks
  // from the host instead (its own pinned staging, overlapping the upload with its kernels) was
  // slower: 361 against 302 ms on 4 x H200, the host-side staging copies starving the kernels.
  const ResidentData resident(p, devices, detect.type != ThresholdType::Absolute);
  on_devices(p, devices, [&](std::size_t g, const auto& range, const Prepared& group) {
    const Prepared mine = with_data(group, resident, devices[g]);
    found[g] = declustered ? detect_cuda(mine, detect) : detect_candidates_cuda(mine, detect);
    for (Detection& d : found[g]) d.template_index += range.first;
  });
  std::vector<Detection> all;
  for (auto& f : found) all.insert(all.end(), f.begin(), f.end());
  return all;
}

}  // namespace

std::vector<Detection> detect_cuda_devices(const Prepared& p, const DetectOptions& detect,
                                           const std::vector<int>& devices) {
  return search_devices(p, detect, devices, true);
}

std::vector<Detection> candidates_cuda_devices(const Prepared& p, const DetectOptions& detect,
                                               const std::vector<int>& devices) {
  return search_devices(p, detect, devices, false);
}

#endif

}  // namespace halfscope::mfilter
