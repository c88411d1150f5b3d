// Host SGEMM speed: the build's GEMM path (oneDNN or a BLAS, host::kGemmPath)
// against lockstep's blocked kernel, on the model's three GEMM shapes at
// batch 128 and on a large square (the peak), with every core.
// usage: gemm_peak [--size N]   (square size, default 1024)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <lockstep/lockstep.hpp>

#include "gemm_timing.hpp"


int main(int argc, char** argv) {
  int size = 1024;
  if (argc == 3 && std::string(argv[1]) == "--size") size = std::atoi(argv[2]);
  if (size < 1) {
    std::fprintf(stderr, "usage: gemm_peak [--size N], N >= 1\n");
    return 2;
  }
  lockstep::host::set_blas_threads(lockstep::Host::hardware_threads());
  const lockstep::bench::Gemm path = &lockstep::host::gemm<float>;
  const lockstep::bench::Gemm blocked = &lockstep::host::detail::gemm_blocked<float>;
  struct Shape {
    const char* name;
    bool ta, tb;
    int m, n, k;
  } shapes[] = {{"dense1_forward", false, false, 128, 256, 784},
                {"dense1_weight_grad", true, false, 784, 256, 128},
                {"dense2_input_grad", false, true, 128, 256, 10},
                {"square", false, false, size, size, size}};
  double peak = 0, blocked_peak = 0;
  for (const Shape& s : shapes) {
    const double g_path = lockstep::bench::gflops(path, s.ta, s.tb, s.m, s.n, s.k);
    const double g_blocked = lockstep::bench::gflops(blocked, s.ta, s.tb, s.m, s.n, s.k);
    std::printf("%s m=%d n=%d k=%d gemm_gflops=%.1f blocked_gflops=%.1f\n", s.name, s.m, s.n, s.k, g_path, g_blocked);
    peak = std::max(peak, g_path);
    blocked_peak = std::max(blocked_peak, g_blocked);
  }
  std::printf("gemm=%s threads=%d\n", lockstep::host::kGemmPath, lockstep::Host::hardware_threads());
  std::printf("sgemm_peak_gflops=%.1f blocked_peak_gflops=%.1f\n", peak, blocked_peak);
  return 0;
}
