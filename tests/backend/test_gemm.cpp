// The host GEMM (the path the build chose: oneDNN, BLAS or the blocked
// kernel, and the blocked kernel itself) against a double-precision
// reference, for every transpose combination.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/host/gemm.hpp"
#include "random_matrix.hpp"

namespace {
using lockstep::testing::random_matrix;

template <class Gemm>
void check_gemm(Gemm gemm, bool ta, bool tb, int m, int n, int k, float beta) {
  const int lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  // The same shapes as indices for the reference.
  const std::size_t um = static_cast<std::size_t>(m), un = static_cast<std::size_t>(n),
                    uk = static_cast<std::size_t>(k), ulda = static_cast<std::size_t>(lda),
                    uldb = static_cast<std::size_t>(ldb);
  const auto a = random_matrix(um * uk, 1);
  const auto b = random_matrix(uk * un, 2);
  auto c = random_matrix(um * un, 3);
  const auto c0 = c;
  gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  double worst = 0;
  for (std::size_t i = 0; i < um; ++i)
    for (std::size_t j = 0; j < un; ++j) {
      double ref = beta * double(c0[i * un + j]);
      for (std::size_t p = 0; p < uk; ++p) {
        const double av = ta ? a[p * ulda + i] : a[i * ulda + p];
        const double bv = tb ? b[j * uldb + p] : b[p * uldb + j];
        ref += 0.5 * av * bv;
      }
      worst = std::max(worst, std::abs(ref - c[i * un + j]));
    }
  CHECK(worst < 1e-4 * (1 + k / 64.0));  // float accumulation of k products of size <= 1
}
}  // namespace

TEST_CASE("gemm equals the reference for all transposes and odd shapes") {
  const auto blas = [](auto... args) { lockstep::host::gemm<float>(args...); };
  const auto blocked = [](auto... args) { lockstep::host::detail::gemm_blocked<float>(args...); };
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f, 0.25f}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        check_gemm(blas, ta, tb, 7, 13, 300, beta);
        check_gemm(blas, ta, tb, 65, 1, 3, beta);
        check_gemm(blocked, ta, tb, 7, 13, 300, beta);
        check_gemm(blocked, ta, tb, 130, 600, 5, beta);
      }
}

TEST_CASE("gemm with k = 0 scales C by beta - with m = 0 does nothing") {
  std::vector<float> c = {1, 2, 3, 4};
  lockstep::host::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
  lockstep::host::gemm<float>(false, false, 0, 2, 3, 1.0f, nullptr, 3, nullptr, 2, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
}

TEST_CASE("the GEMM path compiled in is the one CMake reported") {
#if defined(LOCKSTEP_EXPECTED_GEMM_PATH)
  CHECK(std::string(lockstep::host::kGemmPath) == LOCKSTEP_EXPECTED_GEMM_PATH);
#else
  CHECK(std::string(lockstep::host::kGemmPath) == "blocked");
#endif
#if defined(LOCKSTEP_HAVE_ONEDNN) && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  // Weakly linked: were it left unresolved, every replica's GEMM would start
  // a team on every core, and replicas would fight over them.
  CHECK(omp_set_num_threads != nullptr);
#endif
}

TEST_CASE("gemm called on two threads at once, one GEMM thread each, gives the bits of a lone call") {
  // The replicas of a host strategy call the GEMM concurrently, each limited
  // to its share of the cores; reproducible training needs the same bits.
  const int m = 96, n = 200, k = 300;
  const auto a = random_matrix(static_cast<std::size_t>(m) * k, 4);
  const auto b = random_matrix(static_cast<std::size_t>(k) * n, 5);
  lockstep::host::set_blas_threads(1);
  std::vector<float> lone(static_cast<std::size_t>(m) * n);
  lockstep::host::gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, lone.data(), n);
  std::vector<std::vector<float>> out(2, std::vector<float>(lone.size()));
  auto work = [&](std::size_t t) {
    for (int rep = 0; rep < 20; ++rep)
      lockstep::host::gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, out[t].data(), n);
  };
  std::thread other(work, std::size_t{1});
  work(0);
  other.join();
  for (std::size_t t = 0; t < 2; ++t) CHECK(std::memcmp(out[t].data(), lone.data(), lone.size() * sizeof(float)) == 0);
}
