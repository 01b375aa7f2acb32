// The CUDA backend of the deconvolution solvers (backend.hpp): vectors in the precision's storage
// on the device, every operation queued on one non-blocking stream owned by the backend, the
// operator's spectra, plans and buffers made once (backend_cuda_operator.cuh), and each scalar
// (dot, criterion, max_abs) reduced in one kernel pass and read back with the FP16 overflow status
// through the pinned mailbox: one stream synchronisation per scalar, none per vector operation.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "deconv/backend_cuda.hpp"
#include "deconv/backend_cuda_cg.cuh"
#include "deconv/backend_cuda_operator.cuh"
#include "deconv/backend_cuda_reduce.cuh"
#include "deconv/backend_cuda_stream.hpp"
#include "halfscope/core/cuda_memory.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/core/half.hpp"

namespace halfscope::deconv::detail {

namespace {

using namespace cudab;

/// Reduction terms (device functors for cudak::reduce_kernel) of single, mixed and double; half
/// uses cudak::MaxTerm and cudak::HalfProducts (its products scaled to avoid FP16 overflow).
/// DotTerm reduces over chunks (backend_cuda_reduce.cuh), each chunk folded in index order, as
/// the device-side CG step's terms do (backend_cuda_cg.cuh).
template <class P>
struct DotTerm {
  const typename P::T* a;
  const typename P::T* b;
  std::int64_t n;
  __device__ void operator()(std::int64_t c, cudak::Acc<typename P::S>& acc) const {
    using A = typename P::A;
    const auto x = cudak::load_chunk(a, c, n), y = cudak::load_chunk(b, c, n);
#pragma unroll
    for (int i = 0; i < cudak::kChunk; ++i) {
      const A p = cudak::mul(cudak::load<A>(x.v[i]), cudak::load<A>(y.v[i]));
      acc.v[0] = cudak::add(acc.v[0], static_cast<typename P::S>(cudak::to_double(p)));
    }
  }
  __device__ void finish(const cudak::Acc<typename P::S>& acc, double* out) const {
    out[0] = static_cast<double>(acc.v[0]);
  }
};

template <class P>
struct MaxAbsTerm {
  const typename P::T* x;
  __device__ void operator()(std::int64_t k, cudak::Acc<typename P::S>& acc) const {
    const auto v = static_cast<typename P::S>(cudak::to_double(x[k]));
    const auto a = v < 0 ? -v : v;
    if (a != a || a > acc.v[0]) acc.v[0] = a;  // keeps a NaN: never a max of 0 for a NaN vector
  }
  __device__ void finish(const cudak::Acc<typename P::S>& acc, double* out) const {
    out[0] = static_cast<double>(acc.v[0]);
  }
};

/// ||g - H x||^2 and ||x||^2: H x read from the transform grid's window, times p2.
template <class P>
struct CriterionTerm {
  const typename P::R* hx;
  std::int64_t gc, cols;
  float p2;
  const typename P::T* g;
  const typename P::T* x;
  __device__ void operator()(std::int64_t k, cudak::Acc<typename P::S>& acc) const {
    using A = typename P::A;
    using S = typename P::S;
    const A h = cudak::scale_pow2(cudak::load<A>(hx[cudak::window_index(k, cols, gc)]), p2);
    const A r = cudak::sub(cudak::load<A>(g[k]), h);
    const A rr = cudak::mul(r, r);
    const A xv = cudak::load<A>(x[k]);
    const A xx = cudak::mul(xv, xv);
    acc.v[0] = cudak::add(acc.v[0], static_cast<S>(cudak::to_double(rr)));
    acc.v[1] = cudak::add(acc.v[1], static_cast<S>(cudak::to_double(xx)));
  }
  __device__ void finish(const cudak::Acc<typename P::S>& acc, double* out) const {
    out[0] = static_cast<double>(acc.v[0]);
    out[1] = static_cast<double>(acc.v[1]);
  }
};

template <class P>
class CudaBackend final : public Backend {
 public:
  using T = typename P::T;
  using A = typename P::A;
  using S = typename P::S;

  explicit CudaBackend(const Problem& problem)
      : box_(device_buffer(2 * static_cast<std::int64_t>(sizeof(cudak::DeviceBox)))),
        op_(problem, stream_.get(), &dbox()->status),
        cg_(stream_.get()),
        lambda_(problem.lambda) {
    HS_CUDA_CHECK(cudaMemsetAsync(dbox(), 0, 2 * sizeof(cudak::DeviceBox), stream_.get()));
    if constexpr (P::half) scratch_ = device_buffer(op_.grid().pixels() * 2);
    const Grid& g = op_.grid();
    pixels_ = g.pixels();
    blocks_ = blocks_for(pixels_);
    // g in storage: rounded once from FP64 on the host (FP16 for half and mixed), refused as the
    // CPU backend refuses it when FP16 cannot hold it.
    if constexpr (sizeof(T) == 2) {
      const Array d = problem.dirty.astype(DType::f64).contiguous();
      double largest = 0;
      for (std::int64_t k = 0; k < d.size(); ++k)
        largest = std::max(largest, std::fabs(d.data_as<double>()[k]));
      if (largest >= 65520.0) {
        char value[32];
        std::snprintf(value, sizeof(value), "%.3g", largest);
        throw NumericalError(std::string(precision_name(P::precision)) +
                             ": dirty image overflowed FP16 (largest " + value + ")");
      }
    }
    g_ = problem.dirty.astype(storage_dtype(P::precision)).to(Memory::device);
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  [[nodiscard]] Precision precision() const override { return P::precision; }
  [[nodiscard]] DeviceKind device() const override { return DeviceKind::Cuda; }

  Vec create() override {
    const Grid& g = op_.grid();
    vecs_.emplace_back(storage_dtype(P::precision), Shape{g.rows, g.cols}, Memory::device);
    HS_CUDA_CHECK(cudaMemsetAsync(vecs_.back().data(), 0,
                                  static_cast<std::size_t>(vecs_.back().nbytes()), stream_.get()));
    return static_cast<Vec>(vecs_.size() - 1);
  }

  void rhs(Vec out) override { op_.adjoint(static_cast<const T*>(g_.data()), ptr(out)); }

  void normal(Vec x, Vec out) override {
    if (x == out) throw InvalidInput("deconv backend: normal(x, out) needs distinct vectors");
    op_.normal(ptr(x), ptr(out));
  }

  double criterion(Vec x) override {
    op_.apply_h(ptr(x));
    const Grid& g = op_.grid();
    const T* gd = static_cast<const T*>(g_.data());
    cudak::DeviceBox box;
    if constexpr (P::half) {
      // As the CPU: r = fl16(g - fl16(H x)) stored, then both squares with scaled products.
      auto* r = static_cast<__half*>(scratch_->data());
      cudak::residual_kernel<T, A, typename P::R><<<blocks_, cudak::kThreads, 0, stream_.get()>>>(
          op_.grid_values(), g.gc, g.rows, g.cols, op_.h_scale(), op_.input_max(), gd, r,
          &dbox()->status, kOpCriterion);
      HS_CHECK_LAUNCH();
      box = half_products(r, r, ptr(x), ptr(x));
    } else {
      box = reduce<false>(
          CriterionTerm<P>{op_.grid_values(), g.gc, g.cols, op_.h_scale(), gd, ptr(x)});
    }
    if constexpr (P::half || std::is_same_v<A, float>) {
      // The two FP32 sums combined in FP32, lambda rounded as the arithmetic holds it.
      const float l = static_cast<float>(round_scalar(lambda_));
      return static_cast<double>(static_cast<float>(box.result[0]) +
                                 l * static_cast<float>(box.result[1]));
    } else {
      return box.result[0] + lambda_ * box.result[1];
    }
  }

  double dot(Vec a, Vec b) override {
    if constexpr (P::half)
      return half_products(ptr(a), ptr(b), nullptr, nullptr).result[0];
    else
      return reduce<false>(DotTerm<P>{ptr(a), ptr(b), pixels_}, cudak::chunk_count(pixels_))
          .result[0];
  }

  void axpby(double a, Vec x, double b, Vec y) override {
    cudak::axpby_kernel<T, A><<<blocks_, cudak::kThreads, 0, stream_.get()>>>(
        pixels_, arith(a), ptr(x), arith(b), ptr(y), &dbox()->status, kOpAxpby);
    HS_CHECK_LAUNCH();
  }

  void copy(Vec from, Vec to) override {
    HS_CUDA_CHECK(cudaMemcpyAsync(ptr(to), ptr(from), static_cast<std::size_t>(pixels_ * sizeof(T)),
                                  cudaMemcpyDeviceToDevice, stream_.get()));
  }

  double max_abs(Vec x) override { return reduce<true>(MaxAbsTerm<P>{ptr(x)}).result[0]; }

  void assign(const Array& src, double scale, double beta, Vec to) override {
    const Grid& g = op_.grid();
    check_device_image(src, g.rows, g.cols, "deconv backend (cuda): assign source");
    // `src` may belong to another backend, written on its stream: callers hand it over after
    // view() (which synchronises that backend); this stream is synchronised before returning, so
    // the source may be rewritten as soon as assign returns.
    switch (src.dtype()) {
      case DType::f64:
        launch_assign(static_cast<const double*>(src.data()), scale, beta, to);
        break;
      case DType::f32:
        launch_assign(static_cast<const float*>(src.data()), scale, beta, to);
        break;
      default:
        launch_assign(static_cast<const __half*>(src.data()), scale, beta, to);
        break;
    }
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }

  Array view(Vec x) override {
    // The caller may read the array from another stream or the host: finish writing it first.
    HS_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    return at(x);
  }

  void synchronize() override {
    const auto box = read_box(dbox(), stream_.get());
    throw_if_overflow(P::precision, box, dbox(), stream_.get());
  }

  // CG on the device (backend_cuda_cg.cuh); half keeps the host-scalar defaults (its FP16
  // scalings and products follow other rules).
  void cg_reset(double rr, double beta) override {
    if constexpr (P::half)
      Backend::cg_reset(rr, beta);
    else
      cg_.reset(rr, beta);
  }

  void cg_step(Vec x, Vec r, Vec p, Vec q, Vec tmp, double norm_q) override {
    if constexpr (P::half) {
      Backend::cg_step(x, r, p, q, tmp, norm_q);
    } else {
      const Vec all[] = {x, r, p, q, tmp};
      for (int a = 0; a < 5; ++a)
        for (int b = a + 1; b < 5; ++b)
          if (all[a] == all[b])
            throw InvalidInput("deconv backend (cuda): cg_step needs five distinct vectors");
      constexpr bool kFp16 = sizeof(T) == 2;
      cudak::CgState* st = cg_.state();
      cudak::DeviceStatus* status = &dbox()->status;
      cudak::CgSlot* slot = cg_.next_slot();
      const std::int64_t chunks = cudak::chunk_count(pixels_);
      op_.template reduce<double, true>(
          chunks,
          cudak::CgDirection<T, A>{ptr(r), ptr(p), pixels_, st, status, normal_scale_bias(norm_q),
                                   kFp16},
          &st->counter);
      if (!kFp16) {
        op_.normal(ptr(p), ptr(q));
      } else if (op_.grid().circular) {
        op_.normal(ptr(p), ptr(q), &st->e);  // the pad pass scales
      } else {
        cudak::cg_scale_kernel<T, A>
            <<<blocks_, cudak::kThreads, 0, stream_.get()>>>(pixels_, ptr(p), st, ptr(tmp), status);
        HS_CHECK_LAUNCH();
        op_.normal(ptr(tmp), ptr(q));
      }
      op_.template reduce<S, false>(
          chunks, cudak::CgCurvature<T, A, S>{ptr(p), ptr(q), pixels_, st}, &st->counter);
      op_.template reduce<S, false>(
          chunks,
          cudak::CgUpdate<T, A, S>{ptr(x), ptr(r), ptr(p), ptr(q), pixels_, st, status, slot},
          &st->counter);
      cg_.queued();
    }
  }

  CgReport cg_report() override {
    if constexpr (P::half) {
      return Backend::cg_report();
    } else {
      const cudak::CgSlot s = cg_.read();
      cudak::DeviceBox box;
      box.status = s.status;
      throw_if_overflow(P::precision, box, dbox(), stream_.get());
      return CgReport{s.rr, s.e, s.pq, s.alpha, s.rn, s.halted != 0};
    }
  }

  /// The stream every operation is queued on (backend_cuda_stream.hpp).
  [[nodiscard]] cudaStream_t stream() const { return stream_.get(); }

  [[nodiscard]] double round_scalar(double v) const override {
    if constexpr (P::half)
      return static_cast<double>(Half(v).to_float());
    else if constexpr (std::is_same_v<A, float>)
      return static_cast<double>(static_cast<float>(v));
    else
      return v;
  }

 private:
  using W = std::conditional_t<std::is_same_v<A, double>, double, float>;  // assign's arithmetic

  cudak::DeviceBox* dbox() { return static_cast<cudak::DeviceBox*>(box_->data()); }
  cudak::DeviceBox* maxima() { return dbox() + 1; }
  Array& at(Vec v) {
    if (v < 0 || static_cast<std::size_t>(v) >= vecs_.size())
      throw InvalidInput("deconv backend (cuda): vector " + std::to_string(v) +
                         " does not exist (" + std::to_string(vecs_.size()) + " created)");
    return vecs_[static_cast<std::size_t>(v)];
  }
  T* ptr(Vec v) { return static_cast<T*>(at(v).data()); }
  A arith(double v) const {
    if constexpr (P::half)
      return __double2half(v);
    else
      return static_cast<A>(v);
  }

  template <class Src>
  void launch_assign(const Src* src, double scale, double beta, Vec to) {
    cudak::assign_kernel<W, Src, T><<<blocks_, cudak::kThreads, 0, stream_.get()>>>(
        pixels_, src, static_cast<W>(scale), static_cast<W>(beta), ptr(to), &dbox()->status,
        kOpAssign);
    HS_CHECK_LAUNCH();
  }

  /// One reduction pass, then the result and the overflow status in one read-back.
  template <bool kMax, class F>
  cudak::DeviceBox reduce(const F& term, std::int64_t items = -1) {
    op_.template reduce<S, kMax>(items < 0 ? pixels_ : items, term, dbox());
    return read_back();
  }

  /// half: a . b (and c . d) with the operands scaled to a largest magnitude of at most 1 (one
  /// pass for the maxima of a and c, one for the products; b == a or b's maximum in slot 1).
  cudak::DeviceBox half_products(const __half* a, const __half* b, const __half* c,
                                 const __half* d) {
    const Grid& g = op_.grid();
    const bool squares = a == b;
    op_.template reduce<double, true>(
        pixels_, cudak::MaxTerm<__half>{a, g.cols, g.cols, squares ? c : b, nullptr}, maxima());
    const cudak::HalfProducts term{a, b, 0, squares ? 0 : 1, c, d, 1, 1, maxima()};
    op_.template reduce<float, false>(pixels_, term, dbox());
    return read_back();
  }

  cudak::DeviceBox read_back() {
    const auto box = read_box(dbox(), stream_.get());
    throw_if_overflow(P::precision, box, dbox(), stream_.get());
    return box;
  }

  cuda::Stream stream_;              // first: destroyed last, after everything queued on it
  std::shared_ptr<Buffer> box_;      // [0]: the mailbox's device side; [1]: half's maxima
  std::shared_ptr<Buffer> scratch_;  // half: the criterion's residual (FP16, pixels)
  Operator<P> op_;
  CgQueue cg_;
  double lambda_;
  Array g_;
  std::vector<Array> vecs_;
  std::int64_t pixels_ = 0;
  int blocks_ = 1;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Problem& problem, Precision precision) {
  if (!cuda_available())
    throw Unsupported("deconvolve: the CUDA backend needs a CUDA device; none is usable");
  switch (precision) {
    case Precision::Double:
      return std::make_unique<CudaBackend<DoubleTypes>>(problem);
    case Precision::Single:
      return std::make_unique<CudaBackend<SingleTypes>>(problem);
    case Precision::Mixed:
      return std::make_unique<CudaBackend<MixedTypes>>(problem);
    case Precision::Half:
      return std::make_unique<CudaBackend<HalfTypes>>(problem);
    default:
      throw InvalidInput("deconv backend (cuda): precision " +
                         std::string(precision_name(precision)) +
                         " is not a backend precision; supported: double, single, half, mixed");
  }
}

cudaStream_t cuda_backend_stream(const Backend& backend) {
  if (const auto* b = dynamic_cast<const CudaBackend<DoubleTypes>*>(&backend)) return b->stream();
  if (const auto* b = dynamic_cast<const CudaBackend<SingleTypes>*>(&backend)) return b->stream();
  if (const auto* b = dynamic_cast<const CudaBackend<MixedTypes>*>(&backend)) return b->stream();
  if (const auto* b = dynamic_cast<const CudaBackend<HalfTypes>*>(&backend)) return b->stream();
  throw InvalidInput("cuda_backend_stream: the backend is not a CUDA backend (device " +
                     std::string(backend.device() == DeviceKind::Cpu ? "cpu" : "other") + ")");
}

}  // namespace halfscope::deconv::detail
