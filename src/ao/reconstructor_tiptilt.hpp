// The LGS tip-tilt constants of Cmm handled as a low-rank term (internal header of
// reconstructor_mixed.cpp).
//
// Each LGS adds a constant c (lgs_tiptilt_arcsec2, MOAO's lgsCst: the tip-tilt an LGS cannot
// measure) to every xx and every yy entry of its own block: Cmm = K + U C U^T, with U the n x q
// indicators of the q LGS slope groups (one x and one y group per LGS) and C = diag(c). That term
// has eigenvalues c * (valid subapertures), 640 arcsec^2 on preset mid against a smallest
// eigenvalue of 1.2e-5: kappa(Cmm) = 5.4e7, which an FP32 Cholesky cannot factor (kappa u32 = 3),
// while kappa(K) = 1.9e5. The reconstructor therefore factors K and applies Woodbury's identity
//   Ctm Cmm^-1 = X - (X U) (C^-1 + W U)^-1 W,   X = Ctm K^-1,  W = U^T K^-1,
// exact in exact arithmetic: the q rows of U^T ride along as extra right-hand sides of the same
// solve, and the q x q system and the rank-q update are done in FP64. The rows hold 1/count rather
// than 1 (U D, D = diag(1/count) as stored in float, C replaced by D^-1 C D^-1): unit rows give
// W entries of 6.7e4 on preset check, past FP16's 65504 in an HP1 substitution; the group means
// are of the size of the slopes' own solutions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "halfscope/ao/system.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/array.hpp"

namespace halfscope::ao::detail {

/// One slope group carrying a tip-tilt constant: measurement slopes [first, first + count).
struct TiptiltGroup {
  std::int64_t first = 0;
  std::int64_t count = 0;
  double variance = 0;  // c, arcsec^2
  float weight = 0;     // the value of its indicator row: 1 / count rounded to float
};

/// The groups of the system's Cmm (empty when the noise is off or no LGS has a constant).
std::vector<TiptiltGroup> lgs_tiptilt_groups(const AoSystem& system);

/// The system with every LGS tip-tilt constant set to zero: its Cmm is K.
AoSystem without_lgs_tiptilt(const AoSystem& system);

/// Writes the q indicator rows U^T into rows [first_row, first_row + q) of `rhs` (float32, C order,
/// host or device): the group's weight on its slopes, 0 elsewhere.
void write_indicator_rows(Array& rhs, std::int64_t first_row,
                          const std::vector<TiptiltGroup>& groups);

/// sums[r * q + g] = sum over group g's columns of row r of `x` (rows x n float32, host or device),
/// accumulated in FP64.
std::vector<double> group_sums(const Array& x, const std::vector<TiptiltGroup>& groups);

/// Rows [0, rows) of `x` -= P W, with P (rows x q, row-major, FP64) and W the q rows of `x` from
/// `w_row` on; FP64 accumulation, one rounding to float32.
void subtract_rank_update(Array& x, std::int64_t rows, const std::vector<double>& p,
                          std::int64_t w_row, std::int64_t q);

/// S = W U D + D C^-1 D (q x q, row-major, FP64) from the group sums (group_sums) of the q solved
/// rows W.
std::vector<double> tiptilt_system(std::vector<double> w_sums,
                                   const std::vector<TiptiltGroup>& groups);

/// P = (X U D) S^-1 (rows x q, row-major, FP64) from the group sums of `rows` solved rows X and
/// tiptilt_system's S: X - P W is their correction. NumericalError when S is singular.
std::vector<double> tiptilt_coefficients(const std::vector<double>& s, std::vector<double> x_sums,
                                         std::int64_t rows,
                                         const std::vector<TiptiltGroup>& groups);

/// The whole correction: given the solved (m + q) x n array [X; W], replaces X (rows [0, m)) by
/// X - (X U) (C^-1 + W U)^-1 W (with the weights: U D, D^-1 C D^-1). NumericalError when the
/// q x q matrix is singular.
void apply_tiptilt_correction(Array& solved, std::int64_t m,
                              const std::vector<TiptiltGroup>& groups);

#if HALFSCOPE_WITH_CUDA
// Device halves of group_sums and subtract_rank_update (reconstructor_tiptilt_cuda.cu).
std::vector<double> group_sums_cuda(const Array& x, const std::vector<TiptiltGroup>& groups);
void subtract_rank_update_cuda(Array& x, std::int64_t rows, const std::vector<double>& p,
                               std::int64_t w_row, std::int64_t q);
#endif

/// The correction applied on the device to the blocks of solved [X; W] rows (m + q rows of n) of a
/// streamed solve (linalg::detail::RowBlockHook, blocks handed over last first): the first block
/// holds W, which gives S and stays on the device for the blocks after it. Declined (applied()
/// false: the caller corrects on the host) when that block does not hold all of W or the groups
/// are more than the device passes take. Unsupported in a build without CUDA. Results equal
/// apply_tiptilt_correction's up to the order of each group sum.
class DeviceTiptiltBlocks {
 public:
  DeviceTiptiltBlocks(std::vector<TiptiltGroup> groups, std::int64_t m, std::int64_t n)
      : groups_(std::move(groups)), m_(m), n_(n) {}
  /// One block: rows [first, first + count) on the current device, work on `stream`
  /// (a cudaStream_t), which it synchronises.
  void operator()(float* rows, std::int64_t first, std::int64_t count, void* stream);
  [[nodiscard]] bool applied() const { return started_ && !declined_; }
  /// The device memory it takes at most (W, a block's sums and coefficients) for m + q rows of n.
  static std::int64_t device_bytes(std::int64_t m, std::int64_t q, std::int64_t n) {
    return q * n * 4 + 2 * (m + q) * q * 8 + 4096;
  }

 private:
  std::vector<TiptiltGroup> groups_;
  std::int64_t m_, n_;
  std::vector<double> s_;  // S, from the first block
  Array w_;                // W on the device
  bool started_ = false, declined_ = false;
};

}  // namespace halfscope::ao::detail
