// The FP64 reference of `halfscope bench mfilter`: the CPU direct method in Double on the data
// prefix that the leading correlation times read (host only, so it is tested without a GPU).
#include <algorithm>
#include <vector>

#include "bench/mfilter_bench_util.hpp"
#include "halfscope/core/error.hpp"
#include "mfilter/backends.hpp"

namespace halfscope::bench::detail {

Array fp64_reference(const Array& templates, const Array& data, const Array& moveouts,
                     const Array& weights, std::int64_t n_ref, bool network_sum,
                     MfNormalize normalize) {
  const std::int64_t T = templates.dim(0), C = templates.dim(1), K = templates.dim(2);
  std::int64_t max_moveout = 0;
  std::vector<std::int64_t> mv(static_cast<std::size_t>(T * C), 0);
  std::vector<float> w(static_cast<std::size_t>(T * C), 1.0f);
  if (!moveouts.empty()) std::copy_n(moveouts.data_as<std::int64_t>(), T * C, mv.begin());
  if (!weights.empty()) std::copy_n(weights.data_as<float>(), T * C, w.begin());
  for (std::int64_t m : mv) max_moveout = std::max(max_moveout, m);
  // Every window the first n_ref times read lies in this prefix, so the reference on the
  // prefix equals the reference on the whole data there (the window rule is local).
  const std::int64_t L = std::min(data.dim(1), n_ref - 1 + max_moveout + K);
  const Array t64 = templates.astype(DType::f64);
  const Array d64 = data.slice(1, 0, L).contiguous().astype(DType::f64);
  Array out(DType::f32, network_sum ? Shape{T, n_ref} : Shape{T, C, n_ref});
  mfilter::HostProblem p;
  p.dims = {T, C, K, L, 1, n_ref, normalize, network_sum};
  p.templates = &t64;
  p.data = &d64;
  p.moveouts = mv.data();
  p.weights = w.data();
  p.out = out.data_as<float>();
  mfilter::direct_cpu(p, Precision::Double);
  return out;
}

}  // namespace halfscope::bench::detail
