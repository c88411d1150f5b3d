// Row-major single-precision GEMM for the host backend:
// C(m,n) = alpha * op(A)(m,k) * op(B)(k,n) + beta * C.
// Three paths, the first that the build has (the lockstep CMake target sets
// the macros from what it finds; host::kGemmPath names the one compiled in):
//   onednn   oneDNN's dnnl_sgemm (LOCKSTEP_HAVE_ONEDNN): JIT kernels for the
//            running CPU's widest ISA. On this project's AVX-512 machine it
//            runs the model's GEMMs 15-25% faster than OpenBLAS on one core
//            (benchmarks/gemm_peak), as TensorFlow and PyTorch use it on CPUs.
//   blas     the Fortran sgemm_ of a CPU BLAS (LOCKSTEP_HAVE_BLAS), which
//            every BLAS exports, so no vendor header is needed.
//   blocked  lockstep's own kernels, no library: host::chain_gemm
//            (chain_gemm.hpp: AVX-512 or AVX2 chosen at run time) for float
//            with alpha 1 and beta 0 or 1, which is every call the layers
//            make, on the calling thread's GEMM threads (chain_gemm_threads.hpp:
//            the same bits for any count), else the cache-blocked loop below.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <type_traits>

#include "lockstep/backend/host/chain_gemm_threads.hpp"
#include "lockstep/backend/host/gemm_threads.hpp"
#include "lockstep/core/error.hpp"

#if defined(LOCKSTEP_HAVE_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
// oneDNN sizes each call's thread team with OpenMP's per-thread setting. Weak:
// a oneDNN built on another threading runtime has no OpenMP to set.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

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

// Which GEMM this build runs (see the top of this file).
inline constexpr const char* kGemmPath =
#if defined(LOCKSTEP_HAVE_ONEDNN)
    "onednn";
#elif defined(LOCKSTEP_HAVE_BLAS)
    "blas";
#else
    "blocked";
#endif

namespace detail {

// The threads each GEMM call may use (gemm_threads.hpp: set_blas_threads',
// or the calling thread's own). oneDNN reads it per calling thread, so every
// replica thread applies it before its next call.
#if defined(LOCKSTEP_HAVE_ONEDNN)
inline void apply_gemm_threads() {
  thread_local int applied = 0;
  const int want = gemm_threads_here();
  if (want == applied) return;
  if (omp_set_num_threads) omp_set_num_threads(want);
  applied = want;
}
#endif

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
#if defined(LOCKSTEP_HAVE_ONEDNN) || defined(LOCKSTEP_HAVE_BLAS)
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  if (k == 0) {
    detail::gemm_blocked(trans_a, trans_b, m, n, 0, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#if defined(LOCKSTEP_HAVE_ONEDNN)
  detail::apply_gemm_threads();
  const dnnl_status_t status = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    fail("host gemm: oneDNN's dnnl_sgemm returned status ", static_cast<int>(status), " for ", ta, tb, " m=", m,
         " n=", n, " k=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc, "; expected dnnl_success");
#else
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  sgemm_(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
#endif
#else
    if (alpha == 1.0f && (beta == 0.0f || beta == 1.0f))
      chain_gemm_threads(detail::gemm_threads_here(), trans_a, trans_b, m, n, k, a, lda, b, ldb, beta == 1.0f, c, ldc);
    else
      detail::gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
  }
}

// How many threads the BLAS may use inside one call. Replicas are threads of
// their own, so with R replicas on C cores each GEMM gets C / R of them.
inline void set_blas_threads(int threads) {
  threads = std::max(1, threads);
  detail::gemm_threads().store(threads, std::memory_order_relaxed);
#if defined(LOCKSTEP_HAVE_BLAS)
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
#endif
}

}  // namespace lockstep::host
