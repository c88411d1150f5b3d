// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). A value
// depends only on (key, counter), so initialisation and shuffling give the same
// numbers whatever the replica count or thread order.
#pragma once

#include <cstdint>

#include "lockstep/core/config.hpp"

namespace lockstep {

struct Philox4x32 {
  using Counter = std::uint32_t[4];

  // Four 32-bit random words for (seed, stream, index). `stream` separates users
  // of one seed (a layer's weights, an epoch's shuffle) so they never overlap.
  LOCKSTEP_HOST_DEVICE static void generate(std::uint64_t seed, std::uint64_t stream, std::uint64_t index,
                                            std::uint32_t out[4]) {
    std::uint32_t c0 = static_cast<std::uint32_t>(index), c1 = static_cast<std::uint32_t>(index >> 32);
    std::uint32_t c2 = static_cast<std::uint32_t>(stream), c3 = static_cast<std::uint32_t>(stream >> 32);
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
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
