// `halfscope bench tor` (include/halfscope/bench/cholesky_bench.hpp): the tomographic
// reconstructor R = Ctm Cmm^-1 per precision policy (study 002 Figs. 5-7), scored against the
// FP64 reconstructor, next to cuSOLVER's FP32 spotrf + spotrs in the same run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ao/reconstructor_tiptilt.hpp"
#include "halfscope/ao/covariance.hpp"
#include "halfscope/ao/evaluation.hpp"
#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/linalg/policy.hpp"

#if HALFSCOPE_WITH_CUDA
#include "bench/cholesky_bench_cuda.hpp"
#endif

namespace halfscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void say(const TorBenchOptions& o, const std::string& m) {
  if (o.progress) o.progress(m);
}

// The FP64 matrices of one system and the FP64 reconstructor's scores: what every candidate R is
// scored with (Cee from these matrices, as evaluate_reconstructor would form it, made once).
struct Scoring {
  Array cmm, ctm, ctt;
  ao::EvaluationOptions eo;
  ao::Evaluation fp64;
  double fp64_ms = 0;
};

ao::Evaluation score(const ao::AoSystem& system, const Scoring& s, const Array& r) {
  const Array cee = ao::error_covariance(s.ctt, s.ctm, s.cmm, r, s.eo.device);
  return ao::evaluate_error_covariance(system, cee, s.eo);
}

void add_scores(BenchCase& c, const ao::AoSystem& system, const std::optional<Scoring>& s,
                const Array& r) {
  if (!s) return;
  const ao::Evaluation e = score(system, *s, r);
  c.error["strehl_otf"] = e.strehl_otf;
  c.error["strehl_marechal"] = e.strehl_marechal;
  c.error["tomographic_error_nm"] = e.tomographic_error_nm;
  c.error["strehl_otf_diff_vs_fp64"] = e.strehl_otf - s->fp64.strehl_otf;
  c.error["strehl_marechal_diff_vs_fp64"] = e.strehl_marechal - s->fp64.strehl_marechal;
  c.error["tomographic_error_diff_nm"] = e.tomographic_error_nm - s->fp64.tomographic_error_nm;
  c.params["within_0.001_of_fp64"] = std::fabs(e.strehl_otf - s->fp64.strehl_otf) <= 1e-3;
}

BenchCase base_case(const std::string& system, std::int64_t n, std::int64_t m, bool gpu,
                    int layers) {
  BenchCase c;
  c.params["system"] = system;
  c.params["n"] = n;
  c.params["m"] = m;
  c.params["layers"] = static_cast<std::int64_t>(layers);
  c.params["device"] = std::string(gpu ? "cuda" : "cpu");
  // POTRF (n^3 / 3) + two TRSM with m right-hand sides (m n^2 each).
  c.params["flops"] = std::pow(static_cast<double>(n), 3) / 3.0 +
                      2.0 * static_cast<double>(m) * std::pow(static_cast<double>(n), 2);
  return c;
}

BenchCase policy_case(const TorBenchOptions& o, const std::string& name, const ao::AoSystem& system,
                      const std::string& text, bool gpu, std::int64_t nb, std::int64_t budget,
                      const std::optional<Scoring>& scoring) {
  const std::int64_t n = ao::measurement_count(system), m = ao::truth_count(system);
  BenchCase c = base_case(name, n, m, gpu, o.layers);
  c.implementation = "halfscope";
  c.method = "tile-cholesky + 2 trsm";
  c.precision = text;
  c.params["solve_policy"] = o.solve_policy;
  c.params["tile"] = nb;
  c.params["warmup"] = static_cast<std::int64_t>(o.warmup);
  c.params["devices"] = static_cast<std::int64_t>(std::max<std::size_t>(o.devices.size(), 1));
  ao::ReconstructorOptions ro;
  ro.policy = linalg::parse_policy(text);
  ro.solve_policy = linalg::parse_policy(o.solve_policy);
  ro.tile = nb;
  ro.device = gpu ? DeviceKind::Cuda : DeviceKind::Cpu;
  ro.tiptilt = o.tiptilt;
  ro.devices = o.devices;
  ro.device_memory = budget;
  c.params["device_memory"] = budget;
  c.params["tiptilt"] = std::string(ao::tiptilt_method_name(o.tiptilt));
  std::vector<double> factor_solve, factor, solve, covariance, with_generation;
  ao::Reconstructor rec;
  try {
    for (int r = -o.warmup; r < o.repeats; ++r) {  // r < 0: untimed warm-up runs
      rec = ao::tomographic_reconstructor(system, ro);
      if (r < 0) continue;
      factor.push_back(rec.factor_ms);
      solve.push_back(rec.solve_ms);
      covariance.push_back(rec.covariance_ms);
      factor_solve.push_back(rec.factor_ms + rec.solve_ms);
      with_generation.push_back(rec.covariance_ms + rec.factor_ms + rec.solve_ms);
    }
  } catch (const NumericalError& e) {  // NotPositiveDefinite, FP16 overflow: which policies fail
    c.params["failed"] = std::string(e.what());
    say(o, name + " " + text + ": failed: " + e.what());
    return c;
  } catch (const CudaError& e) {  // out of device memory: recorded, the run goes on
    c.params["failed"] = std::string(e.what());
    say(o, name + " " + text + ": failed: " + e.what());
    return c;
  }
  c.stats = compute_stats(factor_solve);
  c.TFLOPs = tflops(std::get<double>(c.params["flops"]), c.stats.median_ms);
  c.params["factor_ms"] = compute_stats(factor).median_ms;
  c.params["solve_ms"] = compute_stats(solve).median_ms;
  c.params["total_with_generation_ms"] = compute_stats(with_generation).median_ms;
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    c.params["tiles_" + std::string(linalg::gemm_variant_name(v))] = rec.factor.count(v);
  c.params["attempts"] = rec.factor.attempts;
  c.params["covariance_ms"] = compute_stats(covariance).median_ms;
  c.params["rhs_memory"] = std::string(memory_name(rec.rhs_memory));
  rec.factor.for_each_count(
      [&](const char* key, std::int64_t v) { c.params["factor_" + std::string(key)] = v; });
  rec.solve.for_each_count(
      [&](const char* key, std::int64_t v) { c.params["solve_" + std::string(key)] = v; });
  // Data moved between GPUs: the factorization's peer copies (its report), and the solves' one
  // copy of L per device besides L's own (solve_devices.cpp; full tiles: an upper bound).
  c.params["factor_device_to_device_bytes"] = rec.factor.device_to_device_bytes;
  const std::int64_t nt = (n + nb - 1) / nb;
  c.params["solve_device_to_device_bytes"] =
      (std::max<std::int64_t>(static_cast<std::int64_t>(o.devices.size()), 1) - 1) * nt * (nt + 1) /
      2 * nb * nb * 4;
  add_scores(c, system, scoring, rec.matrix.to(Memory::host));
  say(o,
      name + " " + text + ": POTRF + 2 TRSM median " + std::to_string(c.stats.median_ms) + " ms");
  return c;
}

#if HALFSCOPE_WITH_CUDA
BenchCase cusolver_case(const TorBenchOptions& o, const std::string& name,
                        const ao::AoSystem& system, const std::optional<Scoring>& scoring) {
  const std::int64_t n = ao::measurement_count(system), m = ao::truth_count(system);
  BenchCase c = base_case(name, n, m, true, o.layers);
  c.implementation = "cusolver";
  c.params["warmup"] = static_cast<std::int64_t>(o.warmup);
  c.method = "spotrf + spotrs";
  c.precision = "single";
  c.params["layout"] = std::string("dense");
  const double need = 1.1 * 4.0 * static_cast<double>(n) * static_cast<double>(n + m + 20);
  if (need > static_cast<double>(cholesky_detail::device_free_bytes())) {
    c.params["skipped"] = std::string("dense FP32 Cmm and Ctm do not fit in free device memory");
    return c;
  }
  ao::CovarianceOptions co;
  co.device = DeviceKind::Cuda;
  co.dtype = DType::f32;
  co.memory = Memory::device;
  // The same formulation as the tile reconstructor (reconstructor_tiptilt.hpp): K factored, the
  // LGS tip-tilt constants applied by Woodbury, so that the solvers are compared, not the
  // formulations (spotrf of Cmm itself fails on mid and eelt, kappa u32 > 1).
  const std::vector<ao::detail::TiptiltGroup> groups =
      o.tiptilt == ao::TiptiltMethod::woodbury ? ao::detail::lgs_tiptilt_groups(system)
                                               : std::vector<ao::detail::TiptiltGroup>{};
  const auto q = static_cast<std::int64_t>(groups.size());
  const ao::AoSystem k_system = q > 0 ? ao::detail::without_lgs_tiptilt(system) : system;
  c.params["tiptilt"] = std::string(ao::tiptilt_method_name(o.tiptilt));
  std::vector<double> total, potrf, potrs;
  Array r;
  try {
    for (int k = -o.warmup; k < o.repeats; ++k) {  // k < 0: untimed warm-up runs
      Array cmm = ao::covariance(k_system, ao::CovarianceKind::cmm, co);
      Array ctm = ao::covariance(system, ao::CovarianceKind::ctm, co);
      r = Array(DType::f32, {m + q, n}, Memory::device);
      copy_bytes(r.data(), Memory::device, ctm.data(), Memory::device, ctm.nbytes());
      ctm = Array{};
      ao::detail::write_indicator_rows(r, m, groups);
      const cholesky_detail::CusolverTorTimes t =
          cholesky_detail::cusolver_reconstructor_f32(cmm, r);
      const auto t0 = Clock::now();
      ao::detail::apply_tiptilt_correction(r, m, groups);  // synchronous
      const double correction_ms = ms_since(t0);
      if (k < 0) continue;
      potrf.push_back(t.potrf_ms);
      potrs.push_back(t.potrs_ms + correction_ms);
      total.push_back(t.potrf_ms + t.potrs_ms + correction_ms);
    }
    r = r.slice(0, 0, m);
  } catch (const NumericalError& e) {
    c.params["failed"] = std::string(e.what());
    return c;
  } catch (const CudaError& e) {  // out of device memory: recorded, the run goes on
    c.params["failed"] = std::string(e.what());
    return c;
  }
  c.stats = compute_stats(total);
  c.TFLOPs = tflops(std::get<double>(c.params["flops"]), c.stats.median_ms);
  c.params["factor_ms"] = compute_stats(potrf).median_ms;
  c.params["solve_ms"] = compute_stats(potrs).median_ms;
  add_scores(c, system, scoring, r.to(Memory::host));
  return c;
}
#endif

}  // namespace

BenchReport run_tor_bench(const TorBenchOptions& o) {
  if (o.repeats < 1) throw InvalidInput("bench tor: repeats must be >= 1");
  if (o.warmup < 0) throw InvalidInput("bench tor: warmup must be >= 0");
  if (o.policies.empty() || o.systems.empty())
    throw InvalidInput("bench tor: at least one system and one policy are needed");
  for (const std::string& p : o.policies) (void)linalg::parse_policy(p);
  (void)linalg::parse_policy(o.solve_policy);
  std::vector<ao::AoSystem> systems;
  for (const std::string& s : o.systems) systems.push_back(ao::ao_preset(s, o.layers));
  const DeviceKind device = resolve_device(o.device);
  const bool gpu = device == DeviceKind::Cuda;
  const std::int64_t nb = o.tile > 0 ? o.tile : gpu ? 1024 : 512;
  BenchReport report = BenchReport::start("tor", gpu ? describe_cuda_device(0) : describe_cpu());
  for (std::size_t i = 0; i < systems.size(); ++i) {
    const ao::AoSystem& system = systems[i];
    const std::string& name = o.systems[i];
    const std::int64_t n = ao::measurement_count(system), m = ao::truth_count(system);
    say(o, "tor: " + name + ", n = " + std::to_string(n) + ", m = " + std::to_string(m));
    std::optional<Scoring> scoring;
    BenchCase ref = base_case(name, n, m, gpu, o.layers);
    ref.implementation = "halfscope";
    ref.method = "reconstructor_fp64";
    ref.precision = "double";
    if (n > o.max_fp64_n) {
      ref.params["skipped"] =
          "the FP64 reference needs dense FP64 n x n matrices; n = " + std::to_string(n) +
          " > --max-fp64-n " + std::to_string(o.max_fp64_n) + ": Strehl not scored";
    } else {
      scoring.emplace();
      ao::CovarianceOptions co;
      co.device = device;
      co.dtype = DType::f64;
      scoring->cmm = ao::covariance(system, ao::CovarianceKind::cmm, co);
      scoring->ctm = ao::covariance(system, ao::CovarianceKind::ctm, co);
      scoring->ctt = ao::covariance(system, ao::CovarianceKind::ctt, co);
      scoring->eo.device = device;
      scoring->eo.wavelength_m = o.wavelength_m;
      const auto t0 = Clock::now();
      const Array r64 = ao::reconstructor_fp64(scoring->cmm, scoring->ctm, device);
      scoring->fp64_ms = ms_since(t0);
      scoring->fp64 = score(system, *scoring, r64);
      const double t[] = {scoring->fp64_ms};
      ref.stats = compute_stats(t);
      ref.params["timing"] = std::string("wall clock, once, dense FP64 (LAPACK / cuSOLVER)");
      ref.error["strehl_otf"] = scoring->fp64.strehl_otf;
      ref.error["strehl_marechal"] = scoring->fp64.strehl_marechal;
      ref.error["tomographic_error_nm"] = scoring->fp64.tomographic_error_nm;
    }
    report.cases.push_back(ref);
    for (const std::string& p : o.policies)
      for (const std::int64_t budget : o.device_memories)
        report.cases.push_back(policy_case(o, name, system, p, gpu, nb, budget, scoring));
#if HALFSCOPE_WITH_CUDA
    if (gpu && o.cusolver) report.cases.push_back(cusolver_case(o, name, system, scoring));
#endif
  }
  return report;
}

}  // namespace halfscope::bench
