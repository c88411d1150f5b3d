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

// The calling thread's helpers, at least `parts` of them (itself the first),
// kept for its next calls.
inline ReplicaPool& chain_helpers(int parts) {
  thread_local std::unique_ptr<ReplicaPool> helpers;
  if (!helpers || helpers->size() < parts) helpers = std::make_unique<ReplicaPool>(parts);
  return *helpers;
}

// Runs part(i0, i1, j0, j1) for each thread's band of C: whole tiles, 32
// columns or 12 rows, on the calling thread and helpers of its own.
template <class Part>
void chain_split(int threads, int m, int n, int k, Part&& part) {
  const bool by_columns = n >= m;
  const int tile = by_columns ? kChainPanel : kChainMr, extent = by_columns ? n : m;
  const int tiles = (extent + tile - 1) / tile;
  const double flop = 2.0 * m * n * k;
  const int parts = flop < kChainSplitFlop ? 1 : std::min(std::max(threads, 1), tiles);
  if (parts <= 1) {
    part(0, m, 0, n);
    return;
  }
  const bool flush = flushing_denormals();
  chain_helpers(parts).run([&](int p) {
    if (p >= parts) return;
    const ScopedFlushDenormals mode(flush && p > 0);
    const int e0 = tiles * p / parts * tile, e1 = std::min(extent, tiles * (p + 1) / parts * tile);
    if (by_columns)
      part(0, m, e0, e1);
    else
      part(e0, e1, 0, n);
  });
}
}  // namespace detail

inline void chain_gemm_threads(int threads, bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                               const float* b, int ldb, bool accumulate, float* c, int ldc) {
  detail::chain_split(threads, m, n, k, [&](int i0, int i1, int j0, int j1) {
    const std::ptrdiff_t i = i0, j = j0;
    chain_gemm(trans_a, trans_b, i1 - i0, j1 - j0, k, trans_a ? a + i : a + i * lda, lda,
               trans_b ? b + j * ldb : b + j, ldb, accumulate, c + i * ldc + j, ldc);
  });
}

// chain_affine (op(A) op(B) + bias, then Relu or not) the same way.
inline void chain_affine_threads(int threads, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                                 const float* bias, bool relu, float* c, int ldc) {
  detail::chain_split(threads, m, n, k, [&](int i0, int i1, int j0, int j1) {
    const std::ptrdiff_t i = i0, j = j0;
    chain_affine(false, false, i1 - i0, j1 - j0, k, a + i * lda, lda, b + j, ldb, bias + j, relu, c + i * ldc + j,
                 ldc);
  });
}

// The same with op(B) from chain_pack_b's panels.
inline void chain_gemm_threads(int threads, bool trans_a, int m, int n, int k, const float* a, int lda,
                               ChainPackedB b, bool accumulate, float* c, int ldc) {
  detail::chain_split(threads, m, n, k, [&](int i0, int i1, int j0, int j1) {
    const std::ptrdiff_t i = i0;
    chain_gemm_packed(trans_a, i1 - i0, j1 - j0, k, trans_a ? a + i : a + i * lda, lda, b.from_column(j0),
                      accumulate, c + i * ldc + j0, ldc);
  });
}

}  // namespace lockstep::host
