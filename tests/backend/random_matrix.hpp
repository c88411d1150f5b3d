// Test data for the GEMM tests: n floats uniform in [-1, 1), the same for the
// same seed (Philox, stream 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/core/rng.hpp"

namespace lockstep::testing {
inline std::vector<float> random_matrix(std::size_t n, std::uint64_t seed) {
  std::vector<float> m(n);
  for (std::size_t i = 0; i < n; ++i) m[i] = 2.0f * Philox4x32::uniform(seed, 0, i) - 1.0f;
  return m;
}
}  // namespace lockstep::testing
