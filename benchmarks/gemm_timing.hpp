// GEMM timing shared by the benchmarks: GFLOP/s of one GEMM shape, and the
// SGEMM peak of this machine that train_throughput's mfu divides by.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include <lockstep/backend/host/gemm.hpp>

namespace lockstep::bench {

using Gemm = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int);

// GFLOP/s of C(m,n) = op(A) op(B), best of five timed groups of repetitions.
inline double gflops(Gemm gemm, bool ta, bool tb, int m, int n, int k) {
  const std::size_t um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n), uk = static_cast<std::size_t>(k);
  std::vector<float> a(um * uk, 0.5f), b(uk * un, 0.25f), c(um * un);
  const int lda = ta ? m : k, ldb = tb ? k : n;
  const double flop = 2.0 * m * n * k;
  const int reps = std::max(1, static_cast<int>(2e9 / flop));
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return flop / best * 1e-9;
}

// The host SGEMM peak: a large square through the same path the model uses.
inline double sgemm_peak_gflops(int size = 1024) {
  return gflops(&lockstep::host::gemm<float>, false, false, size, size, size);
}

}  // namespace lockstep::bench
