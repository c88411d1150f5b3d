// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). A value
// depends only on (key, counter), so initialisation and shuffling give the same
// numbers whatever the replica count or thread order.
#pragma once

#include <cstdint>

#include "lockstep/core/config.hpp"

// SSE2 is in every x86-64 CPU; nvcc's passes (host and device) keep the
// portable loop.
#if defined(__SSE2__) && !defined(__CUDACC__)
#define LOCKSTEP_PHILOX_SSE2 1
#include <emmintrin.h>
#endif

namespace lockstep {

struct Philox4x32 {
  using Counter = std::uint32_t[4];
  static constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  static constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

  // Four 32-bit random words for (seed, stream, index). `stream` separates users
  // of one seed (a layer's weights, an epoch's shuffle) so they never overlap.
  LOCKSTEP_HOST_DEVICE static void generate(std::uint64_t seed, std::uint64_t stream, std::uint64_t index,
                                            std::uint32_t out[4]) {
    std::uint32_t c0 = static_cast<std::uint32_t>(index), c1 = static_cast<std::uint32_t>(index >> 32);
    std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0;
      const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2;
      const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<std::uint32_t>(p1);
      c3 = static_cast<std::uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }

  // The words of indices first, first + 1, first + 2 and first + 3, in that
  // order (out[4 j + w] = word w of index first + j), the same bits as four
  // generate calls: on the host with SSE2 the four run side by side, a lane
  // each (two 32 x 32 -> 64-bit multiplies per instruction), which made
  // Dropout's mask about twice as fast as one index at a time.
  static void generate4(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::uint32_t out[16]) {
#if defined(LOCKSTEP_PHILOX_SSE2)
    const auto lanes = [&](int shift) {  // the counter word (index >> shift) of each lane
      auto word = [&](std::uint64_t j) { return static_cast<int>(static_cast<std::uint32_t>((first + j) >> shift)); };
      return _mm_set_epi32(word(3), word(2), word(1), word(0));
    };
    __m128i c0 = lanes(0), c1 = lanes(32);
    __m128i c2 = _mm_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream)));
    __m128i c3 = _mm_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream >> 32)));
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    const __m128i mul0 = _mm_set1_epi32(static_cast<int>(kMul0)), mul1 = _mm_set1_epi32(static_cast<int>(kMul1));
    // (low, high) 32-bit halves of the four 64-bit products m * c.
    const auto wide_multiply = [](__m128i m, __m128i c, __m128i& low, __m128i& high) {
      const __m128i even = _mm_shuffle_epi32(_mm_mul_epu32(c, m), _MM_SHUFFLE(3, 1, 2, 0));  // lo0 lo2 hi0 hi2
      const __m128i odd =
          _mm_shuffle_epi32(_mm_mul_epu32(_mm_srli_epi64(c, 32), m), _MM_SHUFFLE(3, 1, 2, 0));  // lo1 lo3 hi1 hi3
      low = _mm_unpacklo_epi32(even, odd);
      high = _mm_unpackhi_epi32(even, odd);
    };
    for (int round = 0; round < 10; ++round) {
      __m128i lo0, hi0, lo1, hi1;
      wide_multiply(mul0, c0, lo0, hi0);
      wide_multiply(mul1, c2, lo1, hi1);
      c0 = _mm_xor_si128(_mm_xor_si128(hi1, c1), _mm_set1_epi32(static_cast<int>(k0)));
      c2 = _mm_xor_si128(_mm_xor_si128(hi0, c3), _mm_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    // Lanes are indices, registers words: transpose to index-major order.
    const __m128i t0 = _mm_unpacklo_epi32(c0, c1), t1 = _mm_unpacklo_epi32(c2, c3);  // (i0: w0 w1) (i1: w0 w1)
    const __m128i t2 = _mm_unpackhi_epi32(c0, c1), t3 = _mm_unpackhi_epi32(c2, c3);  // (i2: w0 w1) (i3: w0 w1)
    __m128i* to = reinterpret_cast<__m128i*>(out);
    _mm_storeu_si128(to + 0, _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128(to + 1, _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128(to + 2, _mm_unpacklo_epi64(t2, t3));
    _mm_storeu_si128(to + 3, _mm_unpackhi_epi64(t2, t3));
#else
    for (std::uint64_t j = 0; j < 4; ++j) generate(seed, stream, first + j, out + 4 * j);
#endif
  }

  // A float uniform in [0, 1) from the first word, with 24 bits of mantissa.
  LOCKSTEP_HOST_DEVICE static float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    std::uint32_t r[4];
    generate(seed, stream, index, r);
    return static_cast<float>(r[0] >> 8) * (1.0f / 16777216.0f);
  }

  // A 64-bit random word for (seed, stream, index).
  LOCKSTEP_HOST_DEVICE static std::uint64_t bits64(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    std::uint32_t r[4];
    generate(seed, stream, index, r);
    return (static_cast<std::uint64_t>(r[1]) << 32) | r[0];
  }
};

// Streams reserved for lockstep's own uses of the generator.
namespace rng_stream {
inline constexpr std::uint64_t kShuffle = 1ull << 40;  // + epoch
inline constexpr std::uint64_t kLayer = 2ull << 40;    // + layer index
inline constexpr std::uint64_t kData = 3ull << 40;     // synthetic data in tests/benchmarks
inline constexpr std::uint64_t kStep = 4ull << 40;     // + epoch: a training step's key (step_key)
inline constexpr std::uint64_t kDropout = 5ull << 40;  // + layer index, keyed by the step's key
}  // namespace rng_stream

}  // namespace lockstep
