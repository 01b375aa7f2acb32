// `halfscope cholesky A.npy -o L.npy`: the mixed-precision tile Cholesky (linalg/cholesky.hpp) of
// a symmetric positive definite matrix from a file, with a precision policy, optional recovery,
// an FP64 backward-error check and a JSON report. L is written dense (upper triangle zero) in
// float32, together with the report or not at all.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "ao_output_set.hpp"
#include "cli.hpp"
#include "halfscope/bench/cholesky_bench.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/linalg/cholesky.hpp"
#include "halfscope/linalg/policy.hpp"
#include "halfscope/linalg/tiles.hpp"

namespace halfscope::cli {
namespace {

struct CholeskyCliOptions {
  std::string input, output, policy = "uniform:SP", device, report;
  std::int64_t tile = 0;
  bool recover = false, check = false;
};

// Relative asymmetry accepted: |a_ij - a_ji| <= kSymmetryTolerance max(|a_ij|, |a_ji|). Only the
// lower triangle is factored, so a matrix that is not symmetric would silently be replaced by
// its lower half; 1e-6 lets FP32 files written from FP64 data through (they round identically or
// within one FP32 ulp, 6e-8 relative) and rejects anything that is really asymmetric.
constexpr double kSymmetryTolerance = 1e-6;

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// The input as a float64 n x n C-contiguous host array, checked: floating dtype, square, finite,
// symmetric. Every message names the file.
Array read_symmetric(const std::string& path) {
  const Array raw = io::read_npy(path);
  if (raw.dtype() != DType::f32 && raw.dtype() != DType::f64)
    throw InvalidInput(path + ": expected a float32 or float64 matrix, found " + raw.describe());
  if (raw.ndim() != 2 || raw.dim(0) != raw.dim(1) || raw.dim(0) < 1)
    throw InvalidInput(path + ": expected a square n x n matrix (n >= 1), found " + raw.describe());
  const Array a = raw.astype(DType::f64).contiguous();
  const std::int64_t n = a.dim(0);
  const double* p = a.data_as<double>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const double lo = p[i * n + j], up = p[j * n + i];
      if (!std::isfinite(lo) || !std::isfinite(up))
        throw InvalidInput(path + ": expected finite entries, found " +
                           number(std::isfinite(lo) ? up : lo) + " at (" +
                           std::to_string(std::isfinite(lo) ? j : i) + ", " +
                           std::to_string(std::isfinite(lo) ? i : j) + ")");
      if (std::fabs(lo - up) > kSymmetryTolerance * std::max(std::fabs(lo), std::fabs(up)))
        throw InvalidInput(path + ": expected a symmetric matrix (relative 1e-6), found A(" +
                           std::to_string(i) + ", " + std::to_string(j) + ") = " + number(lo) +
                           " but A(" + std::to_string(j) + ", " + std::to_string(i) +
                           ") = " + number(up));
    }
  return a;
}

// L dense, n x n float32, C order, upper triangle zero (the diagonal tiles' upper halves still
// hold A and are not part of L).
Array dense_lower(const linalg::TileMatrix& l_any) {
  const Array storage = l_any.storage.on_device() ? l_any.storage.to(Memory::host) : l_any.storage;
  const linalg::TileLayout& layout = l_any.layout;
  const std::int64_t n = layout.rows();
  Array out = Array::zeros(DType::f32, {n, n});
  float* o = out.data_as<float>();
  const float* s = storage.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) o[i * n + j] = s[layout.element_offset(i, j)];
  return out;
}

void write_report(const std::filesystem::path& path, const CholeskyCliOptions& c, std::int64_t n,
                  std::int64_t nb, const char* device, const linalg::CholeskyReport& r, double ms,
                  const bench::BackwardError* e) {
  nlohmann::json j;
  j["input"] = c.input;
  j["output"] = c.output;
  j["n"] = n;
  j["tile"] = nb;
  j["policy"] = r.policy;
  j["device"] = device;
  j["recover"] = c.recover;
  nlohmann::json tiles = nlohmann::json::object();
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    tiles[std::string(linalg::gemm_variant_name(v))] = r.count(v);
  j["tiles"] = tiles;
  j["attempts"] = r.attempts;
  j["workspace_bytes"] = r.workspace_bytes;
  j["recoveries"] = r.recoveries;
  j["factor_ms"] = ms;
  j["backward_error"] = e ? nlohmann::json(e->relative) : nlohmann::json(nullptr);
  j["halfscope"] = HALFSCOPE_VERSION;
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

void run_cholesky(const Globals& g, const CholeskyCliOptions& c) {
  // Everything that can be checked without the data fails first.
  const linalg::Policy policy = linalg::parse_policy(c.policy);
  if (io::extension_of(c.output) != "npy")
    throw InvalidInput("-o: expected a .npy output file, found '" + c.output + "'");
  io::check_output_path(c.output);
  if (!c.report.empty()) io::check_output_path(c.report);
  const DeviceKind device =
      resolve_device(parse_device_kind(c.device.empty() ? g.device : c.device));
  const bool gpu = device == DeviceKind::Cuda;
  const std::int64_t nb = c.tile > 0 ? c.tile : gpu ? 1024 : 512;

  const Array a = read_symmetric(c.input);
  const std::int64_t n = a.dim(0);
  // The FP32 input tiles; kept on the host for --check, since the factorization is in place.
  const linalg::TileMatrix input =
      linalg::TileMatrix::from_dense(a, nb, linalg::TileFill::lower, DType::f32, Memory::host);
  linalg::TileMatrix l = linalg::TileMatrix::from_dense(a, nb, linalg::TileFill::lower, DType::f32,
                                                        gpu ? Memory::device : Memory::host);
  linalg::CholeskyOptions options;
  options.policy = policy;
  options.recover = c.recover;
  const char* where = gpu ? "cuda" : "cpu";
  info(g, "cholesky: n = " + std::to_string(n) + ", tile " + std::to_string(nb) + ", policy " +
              policy.name() + ", " + where);
  const auto t0 = std::chrono::steady_clock::now();
  const linalg::CholeskyReport r = linalg::cholesky_tiles(l, options);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::cout << "policy " << r.policy << ", n = " << n << ", tile " << nb << ", " << where << ", "
            << number(ms) << " ms\n";
  std::cout << "off-diagonal tiles:";
  for (const linalg::GemmVariant v : linalg::all_gemm_variants())
    if (r.count(v) > 0) std::cout << " " << linalg::gemm_variant_name(v) << " " << r.count(v);
  std::cout << "\nattempts " << r.attempts << ", recoveries " << r.recoveries.size() << "\n";
  for (const std::string& line : r.recoveries) std::cout << "  " << line << "\n";
  bench::BackwardError e;
  if (c.check) {
    e = bench::cholesky_backward_error(l, input);  // every tile: exact, FP64
    std::cout << "backward error ||L L^T - A||_F / ||A||_F = " << number(e.relative)
              << " (FP64, A as factored in FP32)\n";
  }
  // L and the report appear together or not at all (ao_output_set.hpp).
  AoOutputSet outputs;
  io::write_npy(outputs.partial(c.output), dense_lower(l));
  if (!c.report.empty())
    write_report(outputs.partial(c.report), c, n, nb, where, r, ms, c.check ? &e : nullptr);
  outputs.commit();
  info(g, "wrote " + c.output + (c.report.empty() ? "" : " and " + c.report));
}

}  // namespace

void register_cholesky(CLI::App& app, Globals& g) {
  auto c = std::make_shared<CholeskyCliOptions>();
  auto* cmd = app.add_subcommand(
      "cholesky", "mixed-precision tile Cholesky A = L L^T of a symmetric positive definite .npy");
  cmd->add_option("input", c->input, "A: n x n symmetric float32 / float64 .npy")->required();
  cmd->add_option("-o,--output", c->output, "L: n x n float32 .npy, upper triangle zero")
      ->required();
  cmd->add_option("--policy", c->policy,
                  "GEMM precision per tile: uniform:<V>, band:SP=2,HP1=rest, adaptive:tol=1e-6 "
                  "(V: DP SP TF32 HP1 HP2 HP3 BF16)")
      ->capture_default_str();
  cmd->add_option("--tile", c->tile, "tile size nb (default 1024 on the GPU, 512 on the CPU)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  cmd->add_option("--device", c->device, "auto, cpu or cuda (default: the global --device)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_flag("--recover", c->recover,
                "on a failure refactor with the failing region promoted one precision up");
  cmd->add_flag("--check", c->check, "print ||L L^T - A||_F / ||A||_F computed in FP64");
  cmd->add_option("--report", c->report, "also write a JSON report (tiles per variant, time)");
  cmd->callback([&g, c] { run_cholesky(g, *c); });
}

}  // namespace halfscope::cli
