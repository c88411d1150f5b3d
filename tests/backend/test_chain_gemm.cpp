// The chain GEMM (backend/host/chain_gemm.hpp): each element of C is one
// chain of fused multiply-adds in k order, so it equals a scalar chain bit for
// bit, and splitting the rows, the columns or k over calls changes no bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "lockstep/backend/host/chain_gemm.hpp"
#include "lockstep/backend/host/chain_gemm_threads.hpp"
#include "random_matrix.hpp"

namespace {
using lockstep::host::chain_gemm;
using lockstep::host::detail::chain_gemm_on;

using lockstep::testing::random_matrix;

std::size_t z(int v) { return static_cast<std::size_t>(v); }

bool fused_path() { return std::string(lockstep::host::chain_gemm_path()) != "portable"; }

struct Problem {
  bool ta, tb;
  int m, n, k;
  std::vector<float> a, b, c0;
  int lda() const { return ta ? m : k; }
  int ldb() const { return tb ? k : n; }
  float av(int i, int p) const {
    return ta ? a[z(p) * z(m) + z(i)] : a[z(i) * z(k) + z(p)];
  }
  float bv(int p, int j) const {
    return tb ? b[z(j) * z(k) + z(p)] : b[z(p) * z(n) + z(j)];
  }
};

Problem make(bool ta, bool tb, int m, int n, int k, std::uint64_t seed) {
  const auto um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n), uk = static_cast<std::size_t>(k);
  return {ta, tb, m, n, k, random_matrix(um * uk, seed), random_matrix(uk * un, seed + 1),
          random_matrix(um * un, seed + 2)};
}

// The chain one element at a time: what every path must compute.
std::vector<float> scalar_chain(const Problem& q, bool accumulate, bool fused) {
  std::vector<float> c(q.c0.size());
  for (int i = 0; i < q.m; ++i)
    for (int j = 0; j < q.n; ++j) {
      float acc = accumulate ? q.c0[z(i) * z(q.n) + z(j)] : 0.0f;
      for (int p = 0; p < q.k; ++p) {
        if (fused) {
          acc = std::fma(q.av(i, p), q.bv(p, j), acc);
        } else {
          const volatile float product = q.av(i, p) * q.bv(p, j);  // rounded, as the portable path without FMA
          acc = acc + product;
        }
      }
      c[z(i) * z(q.n) + z(j)] = acc;
    }
  return c;
}

std::vector<float> run(const Problem& q, bool accumulate) {
  std::vector<float> c = q.c0;
  chain_gemm(q.ta, q.tb, q.m, q.n, q.k, q.a.data(), q.lda(), q.b.data(), q.ldb(), accumulate, c.data(), q.n);
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("chain_gemm: every element is the scalar chain of fused multiply-adds in k order, bit for bit") {
#if defined(LOCKSTEP_CHAIN_GEMM_FUSED)
  const bool fused = true;  // the portable path uses std::fma too
#else
  const bool fused = fused_path();
#endif
  const std::string path = std::string("chain_gemm path: ") + lockstep::host::chain_gemm_path();
  MESSAGE(path);
  std::uint64_t seed = 10;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int m : {1, 13, 23, 37})
        for (int n : {1, 16, 17, 33, 70})
          for (int k : {1, 7, 300}) {
            const Problem q = make(ta, tb, m, n, k, seed += 3);
            for (bool accumulate : {false, true}) {
              CAPTURE(ta);
              CAPTURE(tb);
              CAPTURE(m);
              CAPTURE(n);
              CAPTURE(k);
              CAPTURE(accumulate);
              REQUIRE(same_bits(run(q, accumulate), scalar_chain(q, accumulate, fused)));
            }
          }
  // k in several passes (kChainBlockK) and the columns in several blocks of
  // packed panels (kChainBlockBytes), the last one part of a panel.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Problem q = make(ta, tb, 5, 750, 1030, seed += 3);
      for (bool accumulate : {false, true}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(accumulate);
        REQUIRE(same_bits(run(q, accumulate), scalar_chain(q, accumulate, fused)));
      }
    }
}

TEST_CASE("chain_gemm: rows, columns or k split over calls give the same bits as one call") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Problem q = make(ta, tb, 50, 75, 530, 7);
      const std::vector<float> whole = run(q, false);
      const std::size_t un = static_cast<std::size_t>(q.n);
      // Rows 0-16 and 17-49 (a split inside a 12-row tile), as two replicas would hold them.
      std::vector<float> rows(q.c0.size());
      for (auto [i0, i1] : {std::pair{0, 17}, std::pair{17, 50}}) {
        const float* a = ta ? q.a.data() + z(i0) : q.a.data() + z(i0) * z(q.k);
        chain_gemm(ta, tb, i1 - i0, q.n, q.k, a, q.lda(), q.b.data(), q.ldb(), false, rows.data() + z(i0) * un, q.n);
      }
      CHECK(same_bits(rows, whole));
      // Columns 0-40 and 41-74.
      std::vector<float> cols(q.c0.size());
      for (auto [j0, j1] : {std::pair{0, 41}, std::pair{41, 75}}) {
        const float* b = tb ? q.b.data() + z(j0) * z(q.k) : q.b.data() + z(j0);
        chain_gemm(ta, tb, q.m, j1 - j0, q.k, q.a.data(), q.lda(), b, q.ldb(), false, cols.data() + z(j0), q.n);
      }
      CHECK(same_bits(cols, whole));
      // k rows 0-99, then 100-529 accumulating: a weight gradient whose batch
      // rows are held by two replicas, the second continuing the first's chain.
      std::vector<float> chained(q.c0.size());
      for (auto [p0, p1] : {std::pair{0, 100}, std::pair{100, 530}}) {
        const float* a = ta ? q.a.data() + z(p0) * z(q.m) : q.a.data() + z(p0);
        const float* b = tb ? q.b.data() + z(p0) : q.b.data() + z(p0) * z(q.n);
        chain_gemm(ta, tb, q.m, q.n, p1 - p0, a, q.lda(), b, q.ldb(), p0 > 0, chained.data(), q.n);
      }
      CHECK(same_bits(chained, whole));
    }
}

TEST_CASE("chain_gemm: the AVX-512 and AVX2 kernels give the same bits where the CPU has both") {
#if defined(LOCKSTEP_CHAIN_GEMM_X86)
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    MESSAGE("this CPU lacks AVX-512F, AVX2 or FMA: nothing to compare");
    return;
  }
  using lockstep::host::detail::chain_path_named;
  const auto avx512 = chain_path_named("avx512"), avx2 = chain_path_named("avx2");
  // Wide tiles (90 columns), narrow ones (10), and 61 rows: whole tiles and
  // every smaller tile down to one row.
  std::uint64_t seed = 21;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int n : {10, 90}) {
        const Problem q = make(ta, tb, 61, n, 300, seed += 3);
        std::vector<float> wide = q.c0, narrow = q.c0;
        chain_gemm_on(avx512, q.ta, q.tb, q.m, q.n, q.k, q.a.data(), q.lda(), q.b.data(), q.ldb(), true, wide.data(),
                      q.n);
        chain_gemm_on(avx2, q.ta, q.tb, q.m, q.n, q.k, q.a.data(), q.lda(), q.b.data(), q.ldb(), true, narrow.data(),
                      q.n);
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(n);
        CHECK(same_bits(wide, narrow));
        CHECK(same_bits(wide, scalar_chain(q, true, true)));
      }
#else
  MESSAGE("not an x86 build with GCC or clang: only the portable kernel exists");
#endif
}

TEST_CASE("chain_gemm: k = 0 gives zeros, or C unchanged when accumulating; m = 0 or n = 0 touches nothing") {
  std::vector<float> c(6, 3.0f);
  const float dummy = 1.0f;
  chain_gemm(false, false, 2, 3, 0, &dummy, 1, &dummy, 3, true, c.data(), 3);
  CHECK(c == std::vector<float>(6, 3.0f));
  chain_gemm(false, false, 0, 3, 4, &dummy, 4, &dummy, 3, false, c.data(), 3);
  CHECK(c == std::vector<float>(6, 3.0f));
  chain_gemm(false, false, 2, 3, 0, &dummy, 1, &dummy, 3, false, c.data(), 3);
  CHECK(c == std::vector<float>(6, 0.0f));
}

TEST_CASE("chain_gemm_threads: 1, 2 or 3 threads give the same bits, by columns and by rows, denormals flushed or not") {
  using lockstep::host::chain_gemm_threads;
  auto threaded = [](const Problem& q, int threads) {
    std::vector<float> c = q.c0;
    chain_gemm_threads(threads, q.ta, q.tb, q.m, q.n, q.k, q.a.data(), q.lda(), q.b.data(), q.ldb(), true, c.data(),
                       q.n);
    return c;
  };
  // 200 x 300 splits its columns, 300 x 70 its rows (both above the split's 4 MFLOP).
  for (auto [m, n, k] : {std::tuple{200, 300, 100}, std::tuple{300, 70, 150}})
    for (bool ta : {false, true}) {
      const Problem q = make(ta, !ta, m, n, k, 40);
      const std::vector<float> one = threaded(q, 1);
      CAPTURE(m);
      CAPTURE(ta);
      CHECK(same_bits(one, run(q, true)));
      CHECK(same_bits(threaded(q, 2), one));
      CHECK(same_bits(threaded(q, 3), one));
    }
  // Products of 1e-20 and 1e-20 are denormal: flushed on the calling thread,
  // so they must be on the helpers too, or part of C would differ.
  Problem tiny = make(false, false, 200, 300, 100, 50);
  for (float& v : tiny.a) v *= 1e-20f;
  for (float& v : tiny.b) v *= 1e-20f;
  for (float& v : tiny.c0) v = 0.0f;
  const std::vector<float> kept = threaded(tiny, 2);
  std::vector<float> flushed_one, flushed_two;
  {
    const lockstep::host::ScopedFlushDenormals flush;
    flushed_one = threaded(tiny, 1);
    flushed_two = threaded(tiny, 2);
  }
  CHECK(same_bits(kept, threaded(tiny, 1)));
  CHECK(same_bits(flushed_two, flushed_one));
  CHECK_FALSE(same_bits(flushed_one, kept));  // the flush did change something
}

TEST_CASE("chain_gemm_packed: B packed once (chain_pack_b) gives chain_gemm's bits, from any panel, on 1 to 3 threads") {
  using lockstep::host::chain_gemm_packed;
  using lockstep::host::chain_gemm_threads;
  using lockstep::host::ChainPackedB;
  // Outputs narrower than a vector (which chain_gemm runs on narrow tiles or
  // transposed), a partial last panel, and several k passes and column blocks.
  for (auto [m, n, k] : {std::tuple{1, 10, 7}, std::tuple{30, 20, 40}, std::tuple{37, 75, 530},
                         std::tuple{5, 750, 1030}, std::tuple{200, 300, 100}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(ta);
        CAPTURE(tb);
        const Problem q = make(ta, tb, m, n, k, 60);
        std::vector<float> panels(lockstep::host::chain_packed_size(k, n));
        lockstep::host::chain_pack_b(tb, k, n, q.b.data(), q.ldb(), panels.data());
        const ChainPackedB packed{panels.data(), k};
        for (bool accumulate : {false, true}) {
          std::vector<float> c = q.c0;
          chain_gemm_packed(ta, m, n, k, q.a.data(), q.lda(), packed, accumulate, c.data(), n);
          CHECK(same_bits(c, run(q, accumulate)));
        }
        for (int threads : {1, 2, 3}) {
          std::vector<float> c = q.c0;
          chain_gemm_threads(threads, ta, m, n, k, q.a.data(), q.lda(), packed, true, c.data(), n);
          CHECK(same_bits(c, run(q, true)));
        }
        // Columns from the second panel on, and the first k rows of each panel
        // (a replica's slice of a bias, the first rows of a chain).
        if (n > 32) {
          const int k1 = k / 2 + 1;
          std::vector<float> part(z(m) * z(n - 32)), expected(part.size());
          chain_gemm_packed(ta, m, n - 32, k1, q.a.data(), q.lda(), packed.from_column(32), false, part.data(), n - 32);
          const float* b = tb ? q.b.data() + 32 * z(q.k) : q.b.data() + 32;
          chain_gemm(ta, tb, m, n - 32, k1, q.a.data(), q.lda(), b, q.ldb(), false, expected.data(), n - 32);
          CHECK(same_bits(part, expected));
        }
      }
}

TEST_CASE("chain_affine: chains from the bias, Relu on the store, give the bits of bias copied, chain_gemm, then Relu") {
  using lockstep::host::chain_affine;
  using lockstep::host::chain_affine_threads;
  using lockstep::host::detail::chain_path_named;
  using lockstep::host::detail::ChainOptions;
  std::vector<const char*> paths = {"portable"};
#if defined(LOCKSTEP_CHAIN_GEMM_X86)
  if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2")) paths.push_back("avx2");
  if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx512f")) paths.push_back("avx512");
#endif
  // Narrow and wide outputs, partial panels, several k passes and column
  // blocks, and k = 0 (C = Relu(bias)).
  for (auto [m, n, k] : {std::tuple{7, 10, 30}, std::tuple{61, 90, 300}, std::tuple{30, 64, 1030},
                         std::tuple{5, 750, 600}, std::tuple{3, 40, 0}})
    for (bool relu : {false, true})
      for (const char* name : paths) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(relu);
        CAPTURE(name);
        const auto path = chain_path_named(name);
        Problem q = make(false, false, m, n, k, 70);
        std::vector<float> bias = random_matrix(z(n), 71);
        // Zeros of both signs and a NaN: Relu::forward's x > 0 ? x : 0 gives +0 for each.
        bias[0] = -0.0f;
        if (n > 2) bias[2] = std::nanf("");
        std::vector<float> expected(z(m) * z(n));
        for (int i = 0; i < m; ++i) std::copy(bias.begin(), bias.end(), expected.begin() + i * n);
        chain_gemm_on(path, false, false, m, n, k, q.a.data(), q.lda(), q.b.data(), q.ldb(), true, expected.data(), n);
        if (relu)
          for (float& v : expected) v = v > 0.0f ? v : 0.0f;
        std::vector<float> fused = q.c0;  // overwritten: the chains start from the bias
        ChainOptions options;
        options.bias = bias.data();
        options.relu = relu;
        chain_gemm_on(path, false, false, m, n, k, q.a.data(), q.lda(), q.b.data(), q.ldb(), false, fused.data(), n,
                      options);
        CHECK(same_bits(fused, expected));
        if (std::string(name) == lockstep::host::chain_gemm_path()) {
          std::vector<float> c = q.c0;
          chain_affine(false, false, m, n, k, q.a.data(), q.lda(), q.b.data(), q.ldb(), bias.data(), relu, c.data(), n);
          CHECK(same_bits(c, expected));
          for (int threads : {2, 3}) {
            std::vector<float> t = q.c0;
            chain_affine_threads(threads, m, n, k, q.a.data(), q.lda(), q.b.data(), q.ldb(), bias.data(), relu,
                                 t.data(), n);
            CHECK(same_bits(t, expected));
          }
        }
      }
}
