// Chain GEMM: row-major C(m,n) = [C +] op(A)(m,k) * op(B)(k,n) in which every
// element of C is one chain of fused multiply-adds in k order,
//   c = fma(a(i,k-1), b(k-1,j), ... fma(a(i,1), b(1,j), fma(a(i,0), b(0,j), c0))),
// with c0 = C(i,j) when accumulating and +0 otherwise. So an element's bits do
// not depend on m, n, the tile it falls in, how the rows or columns are split
// over calls or threads, or where k is cut: C(i,j) after k rows of a first call
// and the rest in a second, accumulating, is the same float as after one call.
// That is what a deterministic mode needs and what a BLAS does not promise
// (oneDNN picks its blocking, and may split k over threads, by shape).
//
// Building block for issue 18's deterministic mode: a layer's forward and
// input gradient give each row the same bits whatever the rows per replica,
// and a weight gradient over the global batch, in row order, is the same
// float whichever replicas hold the rows. The executors do not use it so yet.
//
// Paths, chosen once per process from the running CPU: AVX-512F with FMA,
// AVX2 with FMA, or portable C++. The first two compute the same chain and give
// the same bits, and so does the portable one where the build targets FMA (an
// ARM64 build, say). Elsewhere (an x86 CPU without FMA, from before 2013) it
// rounds each product before adding it, and agrees with them only to
// rounding: on one machine every call takes the same path, which is what a
// deterministic mode needs. Each call runs on the calling thread; callers
// split rows or columns over threads. host::gemm runs it where the build has
// no GEMM library (the `blocked` path).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

// nvcc compiles the x86 kernels too, so that a program's .cu and .cpp files
// share one definition of each; only its front end does not know GCC's unroll
// pragma (the host compiler unrolls these loops at -O3 by itself).
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define LOCKSTEP_CHAIN_GEMM_X86 1
#include <immintrin.h>
#endif
#define LOCKSTEP_CHAIN_GEMM_PRAGMA(x) _Pragma(#x)
#if defined(__CUDACC__)
#define LOCKSTEP_CHAIN_GEMM_UNROLL(n)
#else
#define LOCKSTEP_CHAIN_GEMM_UNROLL(n) LOCKSTEP_CHAIN_GEMM_PRAGMA(GCC unroll n)
#endif

// Where the build targets FMA (x86 with -mfma or an -march that has it; ARM's
// AArch64 always), the portable kernel's std::fma is one instruction and the
// same chain as the x86 kernels': the same bits on both architectures.
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define LOCKSTEP_CHAIN_GEMM_FUSED 1
#endif

namespace lockstep::host {

namespace detail {

// The k rows packed per pass: a 12 x 256 panel of A and a 256 x 32 one of B
// stay in L1 and L2 while a tile of C lives in registers.
inline constexpr int kChainBlockK = 256;

// A tile of C: kChainMr x kChainNr. Every path has the same tile so that the
// driver is shared; only the kernel differs.
inline constexpr int kChainMr = 12, kChainNr = 32;

// The operands of one tile, read in place where their layout allows (no
// packing: it cost more than the FMAs on a 10-column layer) and from padded
// copies at the edges. A's element (i, p) is at a[p * a_step + i * a_row]; B's
// row p, kChainNr floats, at b + p * ldb.
struct ChainTile {
  const float* a;
  std::ptrdiff_t a_step, a_row;
  const float* b;
  std::ptrdiff_t ldb;
  float* c;
  std::ptrdiff_t ldc;
  int kc;
  bool load;  // start from C, else from +0
};
using ChainKernel = void (*)(const ChainTile& t);

// Portable: the same chain with std::fma where the build targets FMA
// (LOCKSTEP_CHAIN_GEMM_FUSED), else a rounded product added to c.
inline void chain_tile_portable(const ChainTile& t) {
  float acc[kChainMr][kChainNr];
  for (int i = 0; i < kChainMr; ++i)
    for (int j = 0; j < kChainNr; ++j) acc[i][j] = t.load ? t.c[i * t.ldc + j] : 0.0f;
  for (int p = 0; p < t.kc; ++p) {
    const float* a = t.a + p * t.a_step;
    const float* b = t.b + p * t.ldb;
    for (int i = 0; i < kChainMr; ++i)
      for (int j = 0; j < kChainNr; ++j)
#if defined(LOCKSTEP_CHAIN_GEMM_FUSED)
        acc[i][j] = std::fma(a[i * t.a_row], b[j], acc[i][j]);
#else
        acc[i][j] = acc[i][j] + a[i * t.a_row] * b[j];
#endif
  }
  for (int i = 0; i < kChainMr; ++i)
    for (int j = 0; j < kChainNr; ++j) t.c[i * t.ldc + j] = acc[i][j];
}

#if defined(LOCKSTEP_CHAIN_GEMM_X86)
// 24 accumulators of 16 floats: two per row of the tile. RowsApart: A's rows
// are a_row floats apart (A not transposed, read in place), else adjacent.
template <bool RowsApart>
__attribute__((target("avx512f,fma"))) inline void chain_tile_avx512(const ChainTile& t) {
  __m512 acc[kChainMr][2];
  for (int i = 0; i < kChainMr; ++i)
    for (int v = 0; v < 2; ++v) acc[i][v] = t.load ? _mm512_loadu_ps(t.c + i * t.ldc + 16 * v) : _mm512_setzero_ps();
  const std::ptrdiff_t a_row = RowsApart ? t.a_row : 1;
  const float* a = t.a;
  const float* b = t.b;
  for (int p = 0; p < t.kc; ++p, a += t.a_step, b += t.ldb) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    LOCKSTEP_CHAIN_GEMM_UNROLL(12)
    for (int i = 0; i < kChainMr; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * a_row]);
      acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < kChainMr; ++i)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(t.c + i * t.ldc + 16 * v, acc[i][v]);
}

// 16 registers: the 12 x 32 tile as 6 x 16 quarters, 12 accumulators of 8.
template <bool RowsApart>
__attribute__((target("avx2,fma"))) inline void chain_tile_avx2(const ChainTile& t) {
  constexpr int kRows = 6;
  const std::ptrdiff_t a_row = RowsApart ? t.a_row : 1;
  for (int half = 0; half < kChainMr / kRows; ++half)
    for (int cols = 0; cols < kChainNr; cols += 16) {
      __m256 acc[kRows][2];
      float* c = t.c + half * kRows * t.ldc + cols;
      for (int i = 0; i < kRows; ++i)
        for (int v = 0; v < 2; ++v) acc[i][v] = t.load ? _mm256_loadu_ps(c + i * t.ldc + 8 * v) : _mm256_setzero_ps();
      const float* a = t.a + half * kRows * a_row;
      const float* b = t.b + cols;
      for (int p = 0; p < t.kc; ++p, a += t.a_step, b += t.ldb) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        LOCKSTEP_CHAIN_GEMM_UNROLL(6)
        for (int i = 0; i < kRows; ++i) {
          const __m256 x = _mm256_set1_ps(a[i * a_row]);
          acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
        }
      }
      for (int i = 0; i < kRows; ++i)
        for (int v = 0; v < 2; ++v) _mm256_storeu_ps(c + i * t.ldc + 8 * v, acc[i][v]);
    }
}
#endif

// A path: its kernel for A's rows adjacent (packed, or A transposed) and for
// A's rows apart (A read in place by rows).
struct ChainPath {
  ChainKernel adjacent, apart;
  const char* name;
};

inline ChainPath chain_path_for_this_cpu() {
#if defined(LOCKSTEP_CHAIN_GEMM_X86)
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512f")) return {&chain_tile_avx512<false>, &chain_tile_avx512<true>, "avx512"};
  if (fma && __builtin_cpu_supports("avx2")) return {&chain_tile_avx2<false>, &chain_tile_avx2<true>, "avx2"};
#endif
  return {&chain_tile_portable, &chain_tile_portable, "portable"};
}

inline const ChainPath& chain_path() {
  static const ChainPath path = chain_path_for_this_cpu();
  return path;
}

// The packing buffers of the calling thread, reused between calls.
struct ChainPanels {
  std::vector<float> a, b, tile, transposed;
};
inline ChainPanels& chain_panels() {
  thread_local ChainPanels panels;
  return panels;
}

}  // namespace detail

// The kernel this process runs: "avx512", "avx2" or "portable".
inline const char* chain_gemm_path() { return detail::chain_path().name; }

namespace detail {

// chain_gemm on a given path (the tests compare the paths).
inline void chain_gemm_on(const ChainPath& path, bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                          int lda, const float* b, int ldb, bool accumulate, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int i = 0; i < m && !accumulate; ++i) {
      float* row = c + static_cast<std::ptrdiff_t>(i) * ldc;
      std::fill(row, row + n, 0.0f);
    }
    return;
  }
  ChainPanels& panels = chain_panels();
  if (n < kChainNr && m > n && trans_a) {
    // Few columns (a 10-class output layer) would fill a third of each tile:
    // compute C^T = op(B)^T op(A)^T instead, whose rows are C's columns. The
    // chains are the same, since fma(x, y, c) and fma(y, x, c) are one float.
    // Only where A is transposed, so that op(A)^T is read in place: copying it
    // costs more than the idle lanes.
    std::vector<float> t;
    t.swap(panels.transposed);  // the call below may use the panels again
    t.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
    auto c_at = [&](int i, int j) -> float& { return c[static_cast<std::ptrdiff_t>(i) * ldc + j]; };
    auto t_at = [&](int i, int j) -> float& {
      return t[static_cast<std::size_t>(j) * static_cast<std::size_t>(m) + static_cast<std::size_t>(i)];
    };
    for (int i = 0; i < m && accumulate; ++i)
      for (int j = 0; j < n; ++j) t_at(i, j) = c_at(i, j);
    chain_gemm_on(path, !trans_b, !trans_a, n, m, k, b, ldb, a, lda, accumulate, t.data(), m);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c_at(i, j) = t_at(i, j);
    t.swap(panels.transposed);
    return;
  }
  const int n_panels = (n + kChainNr - 1) / kChainNr;
  // k in equal blocks of at most kChainBlockK rows: no short last block, whose
  // C tiles would be loaded and stored for a few FMAs.
  const int blocks = (k + kChainBlockK - 1) / kChainBlockK;
  const int kc_max = (k + blocks - 1) / blocks;
  const int full_rows = m - m % kChainMr;  // rows in whole 12-row tiles; A read in place there
  panels.a.resize(static_cast<std::size_t>(kc_max) * kChainMr);
  panels.b.resize(static_cast<std::size_t>(kc_max) * kChainNr);
  panels.tile.resize(static_cast<std::size_t>(kChainMr) * kChainNr);
  for (int k0 = 0; k0 < k; k0 += kc_max) {
    const int kc = std::min(kc_max, k - k0);
    const bool load = accumulate || k0 > 0;
    // The last rows, if m is not a multiple of 12: a copy of A's for these k
    // rows, padded with zero rows, shared by every B panel below.
    if (full_rows < m) {
      const int height = m - full_rows;
      for (int p = 0; p < kc; ++p)
        for (int i = 0; i < kChainMr; ++i)
          panels.a[static_cast<std::size_t>(p * kChainMr + i)] =
              i >= height ? 0.0f
              : trans_a   ? a[static_cast<std::ptrdiff_t>(k0 + p) * lda + full_rows + i]
                          : a[static_cast<std::ptrdiff_t>(full_rows + i) * lda + k0 + p];
    }
    // Each B panel, these k rows and 32 columns (kept in L1), meets every 12
    // rows of A (streamed from L2).
    for (int panel = 0; panel < n_panels; ++panel) {
      const int j0 = panel * kChainNr, width = std::min(kChainNr, n - j0);
      ChainTile t{};
      t.kc = kc;
      t.load = load;
      if (!trans_b && width == kChainNr) {  // read in place: B stored by rows, a whole panel
        t.b = b + static_cast<std::ptrdiff_t>(k0) * ldb + j0;
        t.ldb = ldb;
      } else {  // copied, padded with zeros past column n
        float* bp = panels.b.data();
        for (int p = 0; p < kc; ++p) {
          float* row = bp + static_cast<std::ptrdiff_t>(p) * kChainNr;
          for (int j = 0; j < width && !trans_b; ++j) row[j] = b[static_cast<std::ptrdiff_t>(k0 + p) * ldb + j0 + j];
          std::fill(row + width, row + kChainNr, 0.0f);
        }
        for (int j = 0; j < width && trans_b; ++j) {  // along B's stored rows
          const float* column = b + static_cast<std::ptrdiff_t>(j0 + j) * ldb + k0;
          for (int p = 0; p < kc; ++p) bp[p * kChainNr + j] = column[p];
        }
        t.b = bp;
        t.ldb = kChainNr;
      }
      for (int i0 = 0; i0 < m; i0 += kChainMr) {
        const int height = std::min(kChainMr, m - i0);
        ChainKernel kernel = path.adjacent;
        if (i0 < full_rows) {  // A in place
          t.a = trans_a ? a + static_cast<std::ptrdiff_t>(k0) * lda + i0
                        : a + static_cast<std::ptrdiff_t>(i0) * lda + k0;
          t.a_step = trans_a ? lda : 1;
          t.a_row = trans_a ? 1 : lda;
          if (!trans_a) kernel = path.apart;
        } else {  // the last rows' copy
          t.a = panels.a.data();
          t.a_step = kChainMr;
          t.a_row = 1;
        }
        float* ct = c + static_cast<std::ptrdiff_t>(i0) * ldc + j0;
        if (height == kChainMr && width == kChainNr) {
          t.c = ct;
          t.ldc = ldc;
          kernel(t);
          continue;
        }
        // An edge tile runs the same kernel on a padded copy of C, so its
        // elements take exactly the chain of a full tile's.
        float* tile = panels.tile.data();
        for (int i = 0; i < kChainMr; ++i)
          for (int j = 0; j < kChainNr; ++j)
            tile[i * kChainNr + j] =
                load && i < height && j < width ? ct[static_cast<std::ptrdiff_t>(i) * ldc + j] : 0.0f;
        t.c = tile;
        t.ldc = kChainNr;
        kernel(t);
        for (int i = 0; i < height; ++i)
          std::copy(tile + i * kChainNr, tile + i * kChainNr + width, ct + static_cast<std::ptrdiff_t>(i) * ldc);
      }
    }
  }
}

}  // namespace detail

// lda, ldb and ldc are the row strides of A, B and C as stored (row-major), as
// for host::gemm. accumulate: start each chain from C's value (beta = 1), else
// from +0 (beta = 0); there is no alpha.
inline void chain_gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                       int ldb, bool accumulate, float* c, int ldc) {
  detail::chain_gemm_on(detail::chain_path(), trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

}  // namespace lockstep::host
