// How many threads one GEMM (or oneDNN convolution) call may use: the
// process's setting (set_blas_threads in gemm.hpp: cores over replicas), and
// a calling thread's own, which wins over it while a ScopedGemmThreads
// lives. The deterministic mode's unit threads hold one of 1 for each job
// (ReplicaPool::set_gemm_threads), so another trainer in the process that
// sets the process's count cannot change how their products are summed.
#pragma once

#include <atomic>

namespace lockstep::host {
namespace detail {
// The process's count (0 until set: the library's default).
inline std::atomic<int>& gemm_threads() {
  static std::atomic<int> threads{0};
  return threads;
}
// The calling thread's own count; 0: the process's.
inline int& thread_gemm_threads() {
  thread_local int threads = 0;
  return threads;
}
// What a call on this thread uses.
inline int gemm_threads_here() {
  const int own = thread_gemm_threads();
  return own > 0 ? own : gemm_threads().load(std::memory_order_relaxed);
}
}  // namespace detail

// The calling thread's GEMM thread count for a scope (0: leave it as it is).
class ScopedGemmThreads {
 public:
  explicit ScopedGemmThreads(int threads) : saved_(detail::thread_gemm_threads()) {
    if (threads > 0) detail::thread_gemm_threads() = threads;
  }
  ScopedGemmThreads(const ScopedGemmThreads&) = delete;
  ScopedGemmThreads& operator=(const ScopedGemmThreads&) = delete;
  ~ScopedGemmThreads() { detail::thread_gemm_threads() = saved_; }

 private:
  int saved_;
};

}  // namespace lockstep::host
