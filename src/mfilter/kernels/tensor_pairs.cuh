// The observation operand of the tensor-core matched filter as 64-bit pairs (Tiling::kPairs):
// the staged tile holds, for every sample offset x, P[x] = (w(x), w(x + 8)) with w(x) the 16-bit
// pair (S[x], S[x + 1]), so every m16n8k16 B operand is one aligned LDS.64 straight into the
// register pair the mma reads, where the word-copy layout (tensor_mf.cuh) needs two register
// moves per mma to form the pair from its sliding ring. Twice the tile's shared memory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mfilter/kernels/tensor_operand.cuh"
#include "mfilter/kernels/tensor_step.cuh"
#include "mfilter/kernels/tensor_tuning.hpp"

namespace halfscope::mfilter::tensor {

/// warp_gemm with the observation staged as 64-bit pairs P[x] = (w(x), w(x + 8)), w(x) the
/// 16-bit pair (S[x], S[x + 1]): the B fragment of n-block a and chunk p is P[first + 8(a + 2p)],
/// one aligned LDS.64 straight into the register pair the mma reads. The warp keeps
/// P[2p .. 2p + kWarpNBlocks + 1] in a ring and loads the 2 pairs chunk p + 1 adds while chunk
/// p's mma run (their slots held chunk p - 1's first two pairs).
template <Operand O, class Tl>
__device__ __forceinline__ void warp_gemm_pairs(const KernelArgs& a, const std::uint32_t* words,
                                                const uint4* af,
                                                float (&acc)[Tl::kWarpNBlocks][4]) {
  constexpr int parts = kParts<O>;
  constexpr int nb = Tl::kWarpNBlocks;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int n = 0; n < nb; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const int first = warp * Tl::kWarpLags + g + 2 * q;
  const uint2* ph = reinterpret_cast<const uint2*>(words) + first;
  const uint2* pl = ph + a.pair_count;
  uint2 rh[Tl::kRing], rl[Tl::kRing];
#pragma unroll
  for (int j = 0; j < nb; ++j) {
    rh[j] = ph[8 * j];
    if constexpr (O == Operand::Split) rl[j] = pl[8 * j];
  }
  uint4 ah = af[0], al = parts > 1 ? af[32] : ah;
  const int chunks = static_cast<int>(a.chunks);
  for (int p0 = 0; p0 < chunks; p0 += Tl::kChunkUnroll) {
#pragma unroll
    for (int r = 0; r < Tl::kChunkUnroll; ++r) {
      const int p = p0 + r;
      if (p >= chunks) break;
      uint4 nh = ah, nl = al;
      if (p + 1 < chunks) {
        nh = af[(p + 1) * parts * 32];
        if constexpr (O == Operand::Split) nl = af[((p + 1) * parts + 1) * 32];
      }
      // Past the last chunk these read pairs that exist (pair_count covers them) but go unused.
      const int s1 = (2 * r + nb) % Tl::kRing, s2 = (2 * r + nb + 1) % Tl::kRing;
      const int m1 = 8 * (2 * p + nb);
      rh[s1] = ph[m1];
      rh[s2] = ph[m1 + 8];
      if constexpr (O == Operand::Split) {
        rl[s1] = pl[m1];
        rl[s2] = pl[m1 + 8];
      }
#pragma unroll
      for (int n = 0; n < nb; ++n) {
        const uint2 b = rh[(2 * r + n) % Tl::kRing];
        mma<O>(acc[n], ah, b.x, b.y);
      }
      if constexpr (O == Operand::Split) {
#pragma unroll
        for (int n = 0; n < nb; ++n) {
          const uint2 b = rl[(2 * r + n) % Tl::kRing];
          mma<O>(acc[n], ah, b.x, b.y);
        }
#pragma unroll
        for (int n = 0; n < nb; ++n) {
          const uint2 b = rh[(2 * r + n) % Tl::kRing];
          mma<O>(acc[n], al, b.x, b.y);
        }
      }
      ah = nh;
      al = nl;
    }
  }
}

/// Converts the raw tile into pairs P[x] (warp_gemm_pairs) scaled by 2^shift (the step's
/// tile_shift); one barrier at the end. Samples past the staged tile read as zero.
template <Operand O, class Tl>
__device__ void stage_pairs(const KernelArgs& a, const float* raw, std::uint32_t* words,
                            int shift) {
  const int tid = static_cast<int>(threadIdx.x);
  const int nsamp = static_cast<int>(2 * a.words), count = static_cast<int>(a.pair_count);
  const Pow2Scale scale(shift);
  auto* ph = reinterpret_cast<uint2*>(words);
  const auto convert = [&](auto two) {
    constexpr bool kTwo = decltype(two)::value;
    for (int x = tid; x < count; x += Tl::kThreads) {
      float v[4];
      if (x + 9 < nsamp) {
        v[0] = raw[x], v[1] = raw[x + 1], v[2] = raw[x + 8], v[3] = raw[x + 9];
      } else {  // the last pairs of the tile
        constexpr int kAt[4] = {0, 1, 8, 9};
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = x + kAt[e] < nsamp ? raw[x + kAt[e]] : 0.0f;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = scale.apply<kTwo>(v[e]);
      const std::uint32_t h0 = pack_hi<O>(v[0], v[1]), h1 = pack_hi<O>(v[2], v[3]);
      ph[x] = make_uint2(h0, h1);
      if constexpr (O == Operand::Split)
        ph[count + x] = make_uint2(pack_lo(v[0], v[1], h0), pack_lo(v[2], v[3], h1));
    }
  };
  if (scale.f2 == 1.0f)
    convert(std::false_type{});
  else
    convert(std::true_type{});
  __syncthreads();
}

}  // namespace halfscope::mfilter::tensor
