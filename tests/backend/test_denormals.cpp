// Replica jobs of a flushing pool compute denormals as zero (they cost ~100
// cycles each otherwise), and the caller's floating-point mode is untouched.
#include <doctest/doctest.h>

#include <cfloat>
#include <vector>

#include "lockstep/backend/host/replica_pool.hpp"

namespace {
// FLT_MIN / 2^10 is denormal; the volatile keeps the compiler from folding it.
float half_of_a_denormal() {
  volatile float tiny = FLT_MIN / 1024.0f;
  return tiny * 0.5f;
}
}  // namespace

#if defined(LOCKSTEP_HAVE_MXCSR) || defined(__aarch64__)
TEST_CASE("a flushing pool's jobs see denormals as zero; the caller keeps its mode") {
  using lockstep::host::Denormals;
  using lockstep::host::ReplicaPool;
  REQUIRE(half_of_a_denormal() > 0.0f);  // the default mode keeps denormals
  for (int n : {1, 3}) {
    ReplicaPool flushing(n, Denormals::kFlushToZero), keeping(n);
    std::vector<float> seen(static_cast<std::size_t>(n), -1.0f);
    flushing.run([&](int r) { seen[static_cast<std::size_t>(r)] = half_of_a_denormal(); });
    for (float v : seen) CHECK(v == 0.0f);
    CHECK(half_of_a_denormal() > 0.0f);  // replica 0 ran on this thread: its mode is restored
    keeping.run([&](int r) { seen[static_cast<std::size_t>(r)] = half_of_a_denormal(); });
    for (float v : seen) CHECK(v > 0.0f);
  }
}
#else
TEST_CASE("a flushing pool's jobs see denormals as zero" * doctest::skip()) {}
#endif
