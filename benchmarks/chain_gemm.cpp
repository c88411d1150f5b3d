// The chain GEMM (backend/host/chain_gemm.hpp, issue 18's building block)
// against the build's GEMM path (host::gemm: oneDNN or a BLAS), one thread
// each, on the MLP's GEMM shapes at 128 rows (batch 128 on 1 replica) and 512
// rows (batch 1024 on 2 replicas): what the deterministic mode would pay for
// GEMMs whose every element is one FMA chain in k order. Then, on 2 threads,
// a weight gradient relayed between replicas (host::ChainRelay) against each
// replica's own (the relay's cost, relay_speed_over_split). Rounds interleave
// the two paths; each figure is the median over rounds of each round's best.
// usage: chain_gemm [--rounds N]   (default 5)
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <lockstep/backend/host/chain_gemm.hpp>
#include <lockstep/backend/host/chain_relay.hpp>
#include <lockstep/backend/host/replica_pool.hpp>
#include <lockstep/lockstep.hpp>

#include "gemm_timing.hpp"
#include "median.hpp"

namespace {
// host::gemm's signature, for gemm_timing's function pointer: alpha 1 and beta 0 only.
void chain_as_gemm(bool ta, bool tb, int m, int n, int k, float, const float* a, int lda, const float* b, int ldb,
                   float beta, float* c, int ldc) {
  lockstep::host::chain_gemm(ta, tb, m, n, k, a, lda, b, ldb, beta != 0.0f, c, ldc);
}

using lockstep::bench::median;

// dense1's weight gradient over a batch of 1024 rows on 2 replica threads of
// 512 rows each: relayed into one C (host::ChainRelay, the deterministic
// design's) or each into a C of its own (as the default mode computes it,
// before its all-reduce, which is not counted). GFLOP/s, best of 20 runs.
double two_replicas_gflops(bool relayed) {
  constexpr int m = 784, n = 256, rows = 1024, replicas = 2;
  const std::vector<float> x(std::size_t{rows} * m, 0.5f), dy(std::size_t{rows} * n, 0.25f);
  std::vector<float> c(std::size_t{replicas} * m * n);
  lockstep::host::ReplicaPool pool(replicas);
  lockstep::host::ChainRelay relay(replicas);
  double best = 1e30;
  for (int run = 0; run < 20; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int r) {
      const std::ptrdiff_t p0 = rows / replicas * r;
      const float* xr = x.data() + p0 * m;
      const float* dyr = dy.data() + p0 * n;
      if (relayed) {
        relay.gemm(r, true, false, m, n, rows / replicas, xr, m, dyr, n, false, c.data(), n);
        relay.wait_complete(r);
      } else {
        lockstep::host::chain_gemm(true, false, m, n, rows / replicas, xr, m, dyr, n, false,
                                   c.data() + std::ptrdiff_t{m} * n * r, n);
      }
    });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * m * n * rows / best * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  if (argc == 3 && std::string(argv[1]) == "--rounds") rounds = std::atoi(argv[2]);
  if (argc != 1 && argc != 3) rounds = 0;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: chain_gemm [--rounds N], N >= 1\n");
    return 2;
  }
  lockstep::host::set_blas_threads(1);
  struct Shape {
    const char* name;
    bool ta, tb;
    int m, n, k;  // m or k = 0: the rows
  } shapes[] = {{"dense1_forward", false, false, 0, 256, 784},  {"dense1_weight_grad", true, false, 784, 256, 0},
                {"dense2_forward", false, false, 0, 10, 256},   {"dense2_input_grad", false, true, 0, 256, 10},
                {"dense2_weight_grad", true, false, 256, 10, 0}};
  for (int rows : {128, 512}) {
    double gemm_total = 0, chain_total = 0;  // seconds per step: every shape once
    for (const Shape& s : shapes) {
      const int m = s.m ? s.m : rows, k = s.k ? s.k : rows;
      std::vector<double> g, c;
      for (int r = 0; r < rounds; ++r) {
        g.push_back(lockstep::bench::gflops(&lockstep::host::gemm<float>, s.ta, s.tb, m, s.n, k));
        c.push_back(lockstep::bench::gflops(&chain_as_gemm, s.ta, s.tb, m, s.n, k));
      }
      const double flop = 2.0 * m * s.n * k, g_gflops = median(g), c_gflops = median(c);
      gemm_total += flop / (g_gflops * 1e9);
      chain_total += flop / (c_gflops * 1e9);
      std::printf("%s m=%d n=%d k=%d gemm_gflops=%.1f chain_gflops=%.1f\n", s.name, m, s.n, k, g_gflops, c_gflops);
    }
    std::printf("rows=%d gemm_step_us=%.1f chain_step_us=%.1f\n", rows, gemm_total * 1e6, chain_total * 1e6);
    std::printf("chain_speed_over_gemm_rows%d=%.3f\n", rows, gemm_total / chain_total);
  }
  std::vector<double> relayed, split;
  for (int r = 0; r < rounds; ++r) {
    split.push_back(two_replicas_gflops(false));
    relayed.push_back(two_replicas_gflops(true));
  }
  std::printf("replicas=2 dense1_weight_grad rows=1024 split_gflops=%.1f relay_gflops=%.1f\n", median(split),
              median(relayed));
  std::printf("relay_speed_over_split_replicas2=%.3f\n", median(relayed) / median(split));
  std::printf("gemm=%s chain=%s threads=1 rounds=%d\n", lockstep::host::kGemmPath, lockstep::host::chain_gemm_path(),
              rounds);
  return 0;
}
