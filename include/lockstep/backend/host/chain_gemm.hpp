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
// float whichever replicas hold the rows: the row-order scheme runs every
// product on it (train/row_order.hpp).
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
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>
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

// The k rows per pass: a tile's rows of A for these k (at most 32 KB, the
// transposed A's rows a cache line each) stay in L1 while the tile meets
// every B panel of a column block in turn, the block's packed panels (at most
// kChainBlockBytes) streaming from L2. Fewer, longer passes load and store
// each tile of C fewer times.
inline constexpr int kChainBlockK = 512;
inline constexpr std::size_t kChainBlockBytes = std::size_t{1} << 20;

// Tiles of C, in registers: kChainMr rows by two vectors of 16 columns, or,
// for outputs at most 16 wide, twice the rows by one vector. The last rows of
// C, fewer than a tile's, run in tiles of 16, 8, 4, 2 and 1 rows, so that no
// row is padded; the last columns run on a zero-padded copy of C.
inline constexpr int kChainMr = 12, kChainLanes = 16;
// A wide tile's columns, and the width of B's packed panels.
inline constexpr int kChainPanel = 2 * kChainLanes;

// The operands of one tile. A's element (i, p) is at a[p * a_step + i * a_row],
// read in place; B's row p, 16 * vecs floats, at b + p * ldb.
struct ChainTile {
  const float* a;
  std::ptrdiff_t a_step, a_row;
  const float* b;
  std::ptrdiff_t ldb;
  float* c;
  std::ptrdiff_t ldc;
  // Where the chains start when `load`: C itself, or a bias row (ldc0 0)
  // that every row of the tile starts from.
  const float* c0;
  std::ptrdiff_t ldc0;
  int kc;
  int rows, vecs;  // the tile's shape: rows by 16 * vecs
  bool load;       // start from c0, else from +0
  bool relu;       // store max(c, +0): Relu::forward's x > 0 ? x : 0, NaN and -0 to +0 included
};
using ChainKernel = void (*)(const ChainTile& t);

// Portable: the same chain with std::fma where the build targets FMA
// (LOCKSTEP_CHAIN_GEMM_FUSED), else a rounded product added to c.
struct ChainPortable {
  template <int Rows, int Vecs, bool RowsApart>
  static void tile(const ChainTile& t) {
    any(t);
  }
  static void any(const ChainTile& t) {
    float acc[2 * kChainMr][2 * kChainLanes];
    const int cols = kChainLanes * t.vecs;
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < cols; ++j) acc[i][j] = t.load ? t.c0[i * t.ldc0 + j] : 0.0f;
    for (int p = 0; p < t.kc; ++p) {
      const float* a = t.a + p * t.a_step;
      const float* b = t.b + p * t.ldb;
      for (int i = 0; i < t.rows; ++i)
        for (int j = 0; j < cols; ++j)
#if defined(LOCKSTEP_CHAIN_GEMM_FUSED)
          acc[i][j] = std::fma(a[i * t.a_row], b[j], acc[i][j]);
#else
          acc[i][j] = acc[i][j] + a[i * t.a_row] * b[j];
#endif
    }
    for (int i = 0; i < t.rows; ++i)
      for (int j = 0; j < cols; ++j) t.c[i * t.ldc + j] = t.relu && !(acc[i][j] > 0.0f) ? 0.0f : acc[i][j];
  }
};

#if defined(LOCKSTEP_CHAIN_GEMM_X86)
// Up to 24 accumulators of 16 floats, Vecs per row. RowsApart: A's rows are
// a_row floats apart (A not transposed, read in place), else adjacent.
struct ChainAvx512 {
  // max(x, +0), all lanes; the zero-masked form, since g++ 12 warns that the
  // plain one's undefined pass-through may be used uninitialised.
  __attribute__((target("avx512f"))) static __m512 relu(__m512 x) {
    return _mm512_maskz_max_ps(static_cast<__mmask16>(0xFFFF), x, _mm512_setzero_ps());
  }
  template <int Rows, int Vecs, bool RowsApart>
  __attribute__((target("avx512f,fma"))) static void tile(const ChainTile& t) {
    __m512 acc[std::size_t{Rows}][std::size_t{Vecs}];
    for (int i = 0; i < Rows; ++i)
      for (int v = 0; v < Vecs; ++v)
        acc[i][v] = t.load ? _mm512_loadu_ps(t.c0 + i * t.ldc0 + 16 * v) : _mm512_setzero_ps();
    const std::ptrdiff_t a_row = RowsApart ? t.a_row : 1;
    const float* a = t.a;
    const float* b = t.b;
    for (int p = 0; p < t.kc; ++p, a += t.a_step, b += t.ldb) {
      __m512 bv[std::size_t{Vecs}];
      if constexpr (!RowsApart) {
        // A transposed: its rows for one k are adjacent, its k rows lda
        // floats apart, often more than the 2 KB the L1 stride prefetcher
        // follows (784 inputs: 3 KB). Fetch them 8 steps ahead.
        _mm_prefetch(reinterpret_cast<const char*>(a + 8 * t.a_step), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(a + 8 * t.a_step + Rows - 1), _MM_HINT_T0);
      }
      for (int v = 0; v < Vecs; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
      LOCKSTEP_CHAIN_GEMM_UNROLL(24)
      for (int i = 0; i < Rows; ++i) {
        const __m512 x = _mm512_set1_ps(a[i * a_row]);
        for (int v = 0; v < Vecs; ++v) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < Rows; ++i)
      for (int v = 0; v < Vecs; ++v)  // max(x, +0) gives its second operand for NaN and for -0
        _mm512_storeu_ps(t.c + i * t.ldc + 16 * v, t.relu ? relu(acc[i][v]) : acc[i][v]);
  }
};

// 16 registers: the tile in blocks of up to 6 rows by 16 columns, 12
// accumulators of 8 floats each; the tile's shape at run time.
struct ChainAvx2 {
  template <int Rows, bool RowsApart>
  __attribute__((target("avx2,fma"))) static void block(const ChainTile& t, int row0, int col0) {
    const std::ptrdiff_t a_row = RowsApart ? t.a_row : 1;
    float* c = t.c + row0 * t.ldc + col0;
    const float* c0 = t.c0 + row0 * t.ldc0 + col0;
    __m256 acc[std::size_t{Rows}][2];
    for (int i = 0; i < Rows; ++i)
      for (int v = 0; v < 2; ++v) acc[i][v] = t.load ? _mm256_loadu_ps(c0 + i * t.ldc0 + 8 * v) : _mm256_setzero_ps();
    const float* a = t.a + row0 * a_row;
    const float* b = t.b + col0;
    for (int p = 0; p < t.kc; ++p, a += t.a_step, b += t.ldb) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
      LOCKSTEP_CHAIN_GEMM_UNROLL(6)
      for (int i = 0; i < Rows; ++i) {
        const __m256 x = _mm256_set1_ps(a[i * a_row]);
        acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
      }
    }
    for (int i = 0; i < Rows; ++i)
      for (int v = 0; v < 2; ++v)
        _mm256_storeu_ps(c + i * t.ldc + 8 * v, t.relu ? _mm256_max_ps(acc[i][v], _mm256_setzero_ps()) : acc[i][v]);
  }

  template <bool RowsApart>
  static void any(const ChainTile& t) {
    for (int col0 = 0; col0 < kChainLanes * t.vecs; col0 += kChainLanes) {
      int row0 = 0;
      for (; row0 + 6 <= t.rows; row0 += 6) block<6, RowsApart>(t, row0, col0);
      for (int rows : {4, 2, 1})  // the rest, as the tile's rows are: 4 + 2 + 1 at most
        if (row0 + rows <= t.rows) {
          if (rows == 4) block<4, RowsApart>(t, row0, col0);
          if (rows == 2) block<2, RowsApart>(t, row0, col0);
          if (rows == 1) block<1, RowsApart>(t, row0, col0);
          row0 += rows;
        }
    }
  }
  template <int Rows, int Vecs, bool RowsApart>
  static void tile(const ChainTile& t) {
    any<RowsApart>(t);
  }
};
#endif

// A path's kernels for the tile shapes the driver runs: [RowsApart][rows],
// from an instruction set's tile<Rows, Vecs, RowsApart>; empty elsewhere.
inline constexpr int kChainWideRows[] = {12, 8, 4, 2, 1}, kChainNarrowRows[] = {24, 16, 8, 4, 2, 1};
struct ChainKernels {
  std::array<ChainKernel, kChainMr + 1> wide[2];       // 32 columns
  std::array<ChainKernel, 2 * kChainMr + 1> narrow[2];  // 16 columns
};

template <class Isa, int Vecs, bool RowsApart, const auto& Counts, std::size_t... I>
constexpr auto chain_kernels_by_rows(std::index_sequence<I...>) {
  std::array<ChainKernel, Counts[0] + 1> by_rows{};
  ((by_rows[Counts[I]] = &Isa::template tile<Counts[I], Vecs, RowsApart>), ...);
  return by_rows;
}

template <class Isa>
constexpr ChainKernels chain_kernels_of() {
  constexpr auto wide = std::make_index_sequence<std::size(kChainWideRows)>{};
  constexpr auto narrow = std::make_index_sequence<std::size(kChainNarrowRows)>{};
  return {{chain_kernels_by_rows<Isa, 2, false, kChainWideRows>(wide),
           chain_kernels_by_rows<Isa, 2, true, kChainWideRows>(wide)},
          {chain_kernels_by_rows<Isa, 1, false, kChainNarrowRows>(narrow),
           chain_kernels_by_rows<Isa, 1, true, kChainNarrowRows>(narrow)}};
}

struct ChainPath {
  ChainKernels kernels;
  const char* name;
};

// A path by name: "avx512", "avx2" or "portable" (the tests compare them).
inline ChainPath chain_path_named(const char* name) {
#if defined(LOCKSTEP_CHAIN_GEMM_X86)
  if (std::string_view(name) == "avx512") return {chain_kernels_of<ChainAvx512>(), "avx512"};
  if (std::string_view(name) == "avx2") return {chain_kernels_of<ChainAvx2>(), "avx2"};
#endif
  return {chain_kernels_of<ChainPortable>(), "portable"};
}

inline ChainPath chain_path_for_this_cpu() {
#if defined(LOCKSTEP_CHAIN_GEMM_X86)
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512f")) return chain_path_named("avx512");
  if (fma && __builtin_cpu_supports("avx2")) return chain_path_named("avx2");
#endif
  return chain_path_named("portable");
}

inline const ChainPath& chain_path() {
  static const ChainPath path = chain_path_for_this_cpu();
  return path;
}

// The buffers of the calling thread, reused between calls.
struct ChainPanels {
  std::vector<float> b, tile, transposed;
};
inline ChainPanels& chain_panels() {
  thread_local ChainPanels panels;
  return panels;
}
// n floats of a panel, from a 64-byte boundary: a vector of 16 floats read
// from it is one cache line, not two halves of two.
inline float* chain_aligned(std::vector<float>& v, std::size_t n) {
  v.resize(n + 16);
  const auto address = reinterpret_cast<std::uintptr_t>(v.data());
  return v.data() + ((64 - address % 64) % 64) / sizeof(float);
}

}  // namespace detail

// The kernel this process runs: "avx512", "avx2" or "portable".
inline const char* chain_gemm_path() { return detail::chain_path().name; }

// op(B) packed once (chain_pack_b) for several calls that read it, where the
// calls would each pack it again: panels of kChainPanel columns, panel q's
// row p at at[(q * k + p) * kChainPanel], zero past B's last column. A replica
// packs its own output gradient while it is in its cache, and every replica's
// weight gradient reads the panels (train/row_order.hpp).
struct ChainPackedB {
  const float* at = nullptr;
  int k = 0;  // the rows of each panel
  // The panels from column j on, a multiple of kChainPanel.
  ChainPackedB from_column(int j) const { return {at + static_cast<std::ptrdiff_t>(j) * k, k}; }
};
// The floats chain_pack_b writes for k rows and n columns.
inline std::size_t chain_packed_size(int k, int n) {
  const int panels = (n + detail::kChainPanel - 1) / detail::kChainPanel;
  return static_cast<std::size_t>(panels) * static_cast<std::size_t>(k) * detail::kChainPanel;
}

namespace detail {

// Rows k0 .. k0 + kc of op(B)'s columns n0 .. n0 + n as panels of nr
// columns, panel j's row p at out[(j * kc + p) * nr], zero past the last
// column: a panel's rows adjacent in memory (B's own rows may be 1 KB apart,
// which maps them to a few L1 sets), each read as whole cache lines.
inline void pack_b_panels(bool trans_b, int n, int kc, int nr, const float* b, int ldb, int k0, int n0, float* out) {
  const int n_panels = (n + nr - 1) / nr;
  for (int panel = 0; panel < n_panels; ++panel) {
    const int j0 = n0 + panel * nr, width = std::min(nr, n0 + n - j0);
    float* bp = out + static_cast<std::ptrdiff_t>(panel) * kc * nr;
    if (trans_b) {
      for (int p = 0; p < kc; ++p) std::fill(bp + p * nr + width, bp + (p + 1) * nr, 0.0f);
      for (int j = 0; j < width; ++j) {  // along B's stored rows
        const float* column = b + static_cast<std::ptrdiff_t>(j0 + j) * ldb + k0;
        for (int p = 0; p < kc; ++p) bp[p * nr + j] = column[p];
      }
      continue;
    }
    for (int p = 0; p < kc; ++p) {
      const float* row = b + static_cast<std::ptrdiff_t>(k0 + p) * ldb + j0;
      float* to = bp + static_cast<std::ptrdiff_t>(p) * nr;
      // A constant size is copied inline: a call per 64 or 128 bytes would cost more.
      if (width == 2 * kChainLanes) {
        std::memcpy(to, row, sizeof(float) * 2 * kChainLanes);
      } else if (width == kChainLanes && nr == kChainLanes) {
        std::memcpy(to, row, sizeof(float) * kChainLanes);
      } else {
        for (int j = 0; j < width; ++j) to[j] = row[j];
        for (int j = width; j < nr; ++j) to[j] = 0.0f;
      }
    }
  }
}

// What a call may add to C = [C +] op(A) op(B):
//   packed  op(B) from its panels (b, ldb and trans_b unused), in tiles of
//           kChainPanel columns whatever n: the same chains;
//   bias    every row's chains start from bias[0..n) instead of C or +0
//           (accumulate unused): a Dense layer's x W + b without copying b
//           into each row of C first, the same floats;
//   relu    C = Relu(the chains), applied as the last pass stores them.
struct ChainOptions {
  const ChainPackedB* packed = nullptr;
  const float* bias = nullptr;
  bool relu = false;
};

// chain_gemm on a given path (the tests compare the paths).
inline void chain_gemm_on(const ChainPath& path, bool trans_a, bool trans_b, int m, int n, int k, const float* a,
                          int lda, const float* b, int ldb, bool accumulate, float* c, int ldc,
                          const ChainOptions& options = {}) {
  if (m <= 0 || n <= 0) return;
  const ChainPackedB* const packed = options.packed;
  const float* const bias = options.bias;
  if (k <= 0) {
    if (!bias && !options.relu && accumulate) return;
    for (int i = 0; i < m; ++i) {
      float* row = c + static_cast<std::ptrdiff_t>(i) * ldc;
      for (int j = 0; j < n; ++j) {
        const float v = bias ? bias[j] : accumulate ? row[j] : 0.0f;
        row[j] = options.relu && !(v > 0.0f) ? 0.0f : v;
      }
    }
    return;
  }
  ChainPanels& panels = chain_panels();
  if (n < kChainPanel && m > n && trans_a && !packed && !bias && !options.relu) {
    // Few columns (a 10-class output layer) would leave lanes of each tile
    // idle: compute C^T = op(B)^T op(A)^T instead, whose rows are C's columns.
    // The chains are the same, since fma(x, y, c) and fma(y, x, c) are one
    // float. Only where A is transposed, so that op(A)^T is read in place.
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
  const bool narrow = n <= kChainLanes && !packed;
  const int nr = narrow ? kChainLanes : kChainPanel, mr = narrow ? 2 * kChainMr : kChainMr;
  const ChainKernel* kernels = narrow ? path.kernels.narrow[!trans_a].data() : path.kernels.wide[!trans_a].data();
  // k in equal blocks of at most kChainBlockK rows: no short last block, whose
  // C tiles would be loaded and stored for a few FMAs.
  const int blocks = (k + kChainBlockK - 1) / kChainBlockK;
  const int kc_max = (k + blocks - 1) / blocks;
  // Columns in blocks of whole panels whose packed copy fits kChainBlockBytes.
  const int panels_per_block = std::max<int>(
      1, static_cast<int>(kChainBlockBytes / (sizeof(float) * static_cast<std::size_t>(kc_max) * static_cast<std::size_t>(nr))));
  const int nc = std::min(panels_per_block * nr, (n + nr - 1) / nr * nr);
  // At most one tile's rows read B's whole panels in place, too few reads to
  // repay a copy; only a last, partial panel is packed, with its zeros.
  const bool in_place = !trans_b && m <= mr && !packed;
  float* const b_panels =
      packed || (in_place && n % nr == 0)
          ? nullptr
          : chain_aligned(panels.b, static_cast<std::size_t>(nc) * static_cast<std::size_t>(kc_max));
  float* const c_tile = chain_aligned(panels.tile, static_cast<std::size_t>(mr) * static_cast<std::size_t>(nr));
  const int* row_counts = narrow ? kChainNarrowRows : kChainWideRows;
  ChainTile t{};
  t.a_step = trans_a ? lda : 1;
  t.a_row = trans_a ? 1 : lda;
  t.vecs = nr / kChainLanes;
  for (int k0 = 0; k0 < k; k0 += kc_max) {
    const int kc = std::min(kc_max, k - k0);
    t.kc = kc;
    t.load = accumulate || k0 > 0 || bias;
    const bool from_bias = bias && k0 == 0;
    t.relu = options.relu && k0 + kc == k;
    for (int n0 = 0; n0 < n; n0 += nc) {
      const int block_n = std::min(nc, n - n0);
      const int whole = block_n / nr * nr;  // the block's columns in whole panels
      if (packed) {
        // packed once by the caller
      } else if (!in_place) {
        pack_b_panels(trans_b, block_n, kc, nr, b, ldb, k0, n0, b_panels);
      } else if (whole < block_n) {
        pack_b_panels(trans_b, block_n - whole, kc, nr, b, ldb, k0, n0 + whole, b_panels + std::ptrdiff_t{whole} * kc);
      }
      // Tiles of mr rows, then the rest of the rows in tiles of 16, 8, 4, 2
      // and 1; each meets the block's panels in turn.
      for (int i0 = 0, r = 0; i0 < m;) {
        while (i0 + row_counts[r] > m) ++r;
        const int height = row_counts[r];
        t.rows = height;
        t.a = trans_a ? a + static_cast<std::ptrdiff_t>(k0) * lda + i0 : a + static_cast<std::ptrdiff_t>(i0) * lda + k0;
        for (int j = 0; j < block_n; j += nr) {
          const int width = std::min(nr, block_n - j);
          if (packed) {
            t.b = packed->at + static_cast<std::ptrdiff_t>(n0 + j) * packed->k + static_cast<std::ptrdiff_t>(k0) * nr;
            t.ldb = nr;
          } else if (in_place && width == nr) {
            t.b = b + static_cast<std::ptrdiff_t>(k0) * ldb + n0 + j;
            t.ldb = ldb;
          } else {
            t.b = b_panels + static_cast<std::ptrdiff_t>(j) * kc;
            t.ldb = nr;
          }
          float* ct = c + static_cast<std::ptrdiff_t>(i0) * ldc + n0 + j;
          if (width == nr) {
            t.c = ct;
            t.ldc = ldc;
            t.c0 = from_bias ? bias + n0 + j : ct;
            t.ldc0 = from_bias ? 0 : ldc;
            kernels[height](t);
            continue;
          }
          // The last columns run on a zero-padded copy of C: the same chains.
          for (int i = 0; i < height; ++i)
            for (int jj = 0; jj < nr; ++jj)
              c_tile[i * nr + jj] = !t.load || jj >= width ? 0.0f
                                    : from_bias      ? bias[n0 + j + jj]
                                                     : ct[static_cast<std::ptrdiff_t>(i) * ldc + jj];
          t.c = c_tile;
          t.c0 = c_tile;
          t.ldc = t.ldc0 = nr;
          kernels[height](t);
          for (int i = 0; i < height; ++i)
            std::copy(c_tile + i * nr, c_tile + i * nr + width, ct + static_cast<std::ptrdiff_t>(i) * ldc);
        }
        i0 += height;
      }
    }
  }
}

}  // namespace detail

// Packs op(B) (k rows, n columns) for chain_gemm_packed into out, which holds
// chain_packed_size(k, n) floats, best from a 64-byte boundary.
inline void chain_pack_b(bool trans_b, int k, int n, const float* b, int ldb, float* out) {
  detail::pack_b_panels(trans_b, n, k, detail::kChainPanel, b, ldb, 0, 0, out);
}

// lda, ldb and ldc are the row strides of A, B and C as stored (row-major), as
// for host::gemm. accumulate: start each chain from C's value (beta = 1), else
// from +0 (beta = 0); there is no alpha.
inline void chain_gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                       int ldb, bool accumulate, float* c, int ldc) {
  detail::chain_gemm_on(detail::chain_path(), trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

// chain_gemm with op(B) from chain_pack_b's panels (b.k >= k: the first k
// rows of each): the same bits as chain_gemm on B itself.
inline void chain_gemm_packed(bool trans_a, int m, int n, int k, const float* a, int lda, ChainPackedB b,
                              bool accumulate, float* c, int ldc) {
  detail::ChainOptions options;
  options.packed = &b;
  detail::chain_gemm_on(detail::chain_path(), trans_a, false, m, n, k, a, lda, nullptr, 0, accumulate, c, ldc, options);
}

// C = [Relu](op(A) op(B) + bias) with each chain starting from its column's
// bias: a Dense layer's forward in one pass over C, the same floats as
// copying bias into C's rows, chain_gemm accumulating, then Relu.
inline void chain_affine(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
                         int ldb, const float* bias, bool relu, float* c, int ldc) {
  detail::ChainOptions options;
  options.bias = bias;
  options.relu = relu;
  detail::chain_gemm_on(detail::chain_path(), trans_a, trans_b, m, n, k, a, lda, b, ldb, true, c, ldc, options);
}

}  // namespace lockstep::host
