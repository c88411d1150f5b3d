// The chain GEMM over several threads: the calling thread and helpers of its
// own (a ReplicaPool per calling thread, kept for its next calls) each take a
// band of C's columns, or of its rows where C is taller than wide. Since every
// element of C is one chain in k order whatever the split (chain_gemm.hpp),
// the bits do not depend on the thread count. The helpers run in the calling
// thread's denormal mode (a replica thread flushes them), which the bits do
// depend on. host::gemm's built-in path calls it with the GEMM threads of
// the calling thread (gemm_threads.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>

#include "lockstep/backend/host/chain_gemm.hpp"
#include "lockstep/backend/host/denormals.hpp"
#include "lockstep/backend/host/replica_pool.hpp"

namespace lockstep::host {

namespace detail {
// Below this many flops a call stays on the calling thread: waking a helper
// and sharing B's panels would cost more than half the product saves.
inline constexpr double kChainSplitFlop = 4e6;
}  // namespace detail

inline void chain_gemm_threads(int threads, bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                               const float* b, int ldb, bool accumulate, float* c, int ldc) {
  // A band holds whole tiles: 32 columns, or 12 rows.
  const bool by_columns = n >= m;
  const int tile = by_columns ? 2 * detail::kChainLanes : detail::kChainMr, extent = by_columns ? n : m;
  const int tiles = (extent + tile - 1) / tile;
  const double flop = 2.0 * m * n * k;
  const int parts = flop < detail::kChainSplitFlop ? 1 : std::min(std::max(threads, 1), tiles);
  if (parts <= 1) {
    chain_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
    return;
  }
  thread_local std::unique_ptr<ReplicaPool> helpers;
  if (!helpers || helpers->size() < parts) helpers = std::make_unique<ReplicaPool>(parts);
  const bool flush = flushing_denormals();
  helpers->run([&](int part) {
    if (part >= parts) return;
    const ScopedFlushDenormals mode(flush && part > 0);
    const int e0 = tiles * part / parts * tile, e1 = std::min(extent, tiles * (part + 1) / parts * tile);
    const std::ptrdiff_t at = e0;
    if (by_columns)
      chain_gemm(trans_a, trans_b, m, e1 - e0, k, a, lda, trans_b ? b + at * ldb : b + at, ldb, accumulate, c + at,
                 ldc);
    else
      chain_gemm(trans_a, trans_b, e1 - e0, n, k, trans_a ? a + at : a + at * lda, lda, b, ldb, accumulate,
                 c + at * ldc, ldc);
  });
}

}  // namespace lockstep::host
