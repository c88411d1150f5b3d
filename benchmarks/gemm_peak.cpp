// Host SGEMM speed: the BLAS path against lockstep's blocked kernel, on the
// model's three GEMM shapes at batch 128 and on a large square (the peak).
// usage: gemm_peak [--size N]   (square size, default 1024)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <lockstep/lockstep.hpp>

namespace {
using Gemm = void (*)(bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int);

// GFLOP/s of C(m,n) = op(A) op(B), best of several timed repetitions.
double gflops(Gemm gemm, bool ta, bool tb, int m, int n, int k) {
  std::vector<float> a(static_cast<std::size_t>(m) * k, 0.5f), b(static_cast<std::size_t>(k) * n, 0.25f),
      c(static_cast<std::size_t>(m) * n);
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
}  // namespace

int main(int argc, char** argv) {
  int size = 1024;
  if (argc == 3 && std::string(argv[1]) == "--size") size = std::atoi(argv[2]);
  if (size < 1) {
    std::fprintf(stderr, "usage: gemm_peak [--size N], N >= 1\n");
    return 2;
  }
  const Gemm blas = &lockstep::host::gemm<float>;
  const Gemm blocked = &lockstep::host::detail::gemm_blocked<float>;
  struct Shape {
    const char* name;
    bool ta, tb;
    int m, n, k;
  } shapes[] = {{"dense1_forward", false, false, 128, 256, 784},
                {"dense1_weight_grad", true, false, 784, 256, 128},
                {"dense2_input_grad", false, true, 128, 256, 10},
                {"square", false, false, size, size, size}};
  double blas_peak = 0, blocked_peak = 0;
  for (const Shape& s : shapes) {
    const double g_blas = gflops(blas, s.ta, s.tb, s.m, s.n, s.k);
    const double g_blocked = gflops(blocked, s.ta, s.tb, s.m, s.n, s.k);
    std::printf("%s m=%d n=%d k=%d blas_gflops=%.1f blocked_gflops=%.1f\n", s.name, s.m, s.n, s.k, g_blas, g_blocked);
    blas_peak = std::max(blas_peak, g_blas);
    blocked_peak = std::max(blocked_peak, g_blocked);
  }
  std::printf("blas=%d threads=%u\n", lockstep::host::kHaveBlas ? 1 : 0, std::thread::hardware_concurrency());
  std::printf("sgemm_peak_gflops=%.1f blocked_peak_gflops=%.1f\n", blas_peak, blocked_peak);
  return 0;
}
