// The replica threads of a host strategy: replica 0 is the calling thread and
// replicas 1..N-1 are threads that live as long as the pool (dlib's multi-GPU
// trainer has the same shape). run(job) calls job(replica) on every replica
// and returns when all are done; the first exception is rethrown on the caller.
// A pool made with Denormals::kFlushToZero runs every job with denormals
// flushed (backend/host/denormals.hpp says why), the caller's mode restored after.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/denormals.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep::host {

enum class Denormals { kKeep, kFlushToZero };

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas, Denormals denormals = Denormals::kKeep)
      : replicas_(replicas), flush_denormals_(denormals == Denormals::kFlushToZero) {
    require(replicas >= 1, "replica pool: ", replicas, " replicas, expected at least 1");
    for (int r = 1; r < replicas; ++r) threads_.emplace_back([this, r] { worker(r); });
  }
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;
  ~ReplicaPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  int size() const { return replicas_; }

  // `on_failure` runs on the failing replica's thread before it returns, so a
  // collective can release the replicas waiting for it (SpinBarrier::abort).
  void run(const std::function<void(int)>& job, const std::function<void()>& on_failure = {}) {
    job_ = &job;
    on_failure_ = &on_failure;
    error_ = nullptr;
    pending_.store(replicas_ - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    execute(0);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 4096)
        LOCKSTEP_CPU_RELAX();
      else
        std::this_thread::yield();
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void execute(int replica) {
    const ScopedFlushDenormals float_mode(flush_denormals_);
    try {
      (*job_)(replica);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      if (*on_failure_) (*on_failure_)();
    }
  }

  void worker(int replica) {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin briefly: between two steps the caller only prepares the next batch.
      for (int spins = 0; generation_.load(std::memory_order_acquire) == seen && spins < 20000; ++spins)
        LOCKSTEP_CPU_RELAX();
      if (generation_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      execute(replica);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int replicas_;
  bool flush_denormals_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  const std::function<void()>* on_failure_ = nullptr;
  std::exception_ptr error_;
  std::mutex error_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  alignas(64) std::atomic<std::uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  bool stop_ = false;
};

}  // namespace lockstep::host
