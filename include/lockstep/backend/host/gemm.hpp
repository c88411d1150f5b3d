// Row-major single-precision GEMM for the host backend:
// C(m,n) = alpha * op(A)(m,k) * op(B)(k,n) + beta * C.
// With a CPU BLAS (LOCKSTEP_HAVE_BLAS, set by the lockstep CMake target when
// FindBLAS finds one) it calls the Fortran sgemm_, which every BLAS exports, so
// no vendor header is needed. Without one it runs a cache-blocked kernel of ours.
// OpenBLAS runs large sgemm at several times the speed of the blocked kernel on
// AVX2 (benchmarks/gemm_peak measures both), hence BLAS first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace lockstep::host {

#if defined(LOCKSTEP_HAVE_BLAS)
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
// Present only in OpenBLAS; weak so that other BLAS libraries link too.
void openblas_set_num_threads(int) __attribute__((weak));
}
#endif

inline constexpr bool kHaveBlas =
#if defined(LOCKSTEP_HAVE_BLAS)
    true;
#else
    false;
#endif

namespace detail {

// The blocked fallback. Transposes are handled by strides; the inner loop runs
// over contiguous columns of C and of B when B is not transposed.
template <class T>
void gemm_blocked(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                  T beta, T* c, int ldc) {
  for (int i = 0; i < m; ++i) {
    T* crow = c + static_cast<std::ptrdiff_t>(i) * ldc;
    if (beta == T(0)) {
      std::fill(crow, crow + n, T(0));
    } else if (beta != T(1)) {
      for (int j = 0; j < n; ++j) crow[j] *= beta;
    }
  }
  constexpr int kBlockK = 128, kBlockN = 512;
  for (int k0 = 0; k0 < k; k0 += kBlockK) {
    const int k1 = std::min(k, k0 + kBlockK);
    for (int j0 = 0; j0 < n; j0 += kBlockN) {
      const int j1 = std::min(n, j0 + kBlockN);
      for (int i = 0; i < m; ++i) {
        T* crow = c + static_cast<std::ptrdiff_t>(i) * ldc;
        for (int p = k0; p < k1; ++p) {
          const T av = alpha * (trans_a ? a[static_cast<std::ptrdiff_t>(p) * lda + i]
                                            : a[static_cast<std::ptrdiff_t>(i) * lda + p]);
          if (av == T(0)) continue;
          if (!trans_b) {
            const T* brow = b + static_cast<std::ptrdiff_t>(p) * ldb;
            for (int j = j0; j < j1; ++j) crow[j] += av * brow[j];
          } else {
            for (int j = j0; j < j1; ++j) crow[j] += av * b[static_cast<std::ptrdiff_t>(j) * ldb + p];
          }
        }
      }
    }
  }
}

}  // namespace detail

// lda, ldb, ldc are row strides of the matrices as stored (row-major). Double
// (used by the gradient tests) always runs the blocked kernel.
template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
          T* c, int ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (!std::is_same_v<T, float>) {
    detail::gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  } else {
#if defined(LOCKSTEP_HAVE_BLAS)
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  if (k == 0) {
    detail::gemm_blocked(trans_a, trans_b, m, n, 0, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  sgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
#else
    detail::gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
  }
}

// How many threads the BLAS may use inside one call. Replicas are threads of
// their own, so with R replicas on C cores each GEMM gets C / R of them.
inline void set_blas_threads(int threads) {
#if defined(LOCKSTEP_HAVE_BLAS)
  if (openblas_set_num_threads) openblas_set_num_threads(std::max(1, threads));
#else
  (void)threads;
#endif
}

}  // namespace lockstep::host
