// The replica threads of a host strategy: replica 0 is the calling thread and
// replicas 1..N-1 are threads that live as long as the pool (dlib's multi-GPU
// trainer has the same shape). run(job) calls job(replica) on every replica
// and returns when all are done; the first exception is rethrown on the caller.
// A pool made with Denormals::kFlushToZero runs every job with denormals
// flushed (backend/host/denormals.hpp says why), the caller's mode restored
// after; set_gemm_threads gives every job's GEMMs a thread count the same way.
// The caller waits for the other replicas with the timeout of set_timeout
// (CommunicationOptions): past it, the job's on_failure releases them from the
// collective, the run's Error names those that had not returned, and a line
// on stderr says so at once, since a thread stuck in user code cannot be
// stopped from outside and run() returns only once every replica has.
// A pool made with `concurrent` below its size (the deterministic mode's unit
// threads) lets only that many run a job at once (host::Permits), and its
// threads yield instead of spinning while they wait.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/denormals.hpp"
#include "lockstep/backend/host/gemm_threads.hpp"
#include "lockstep/backend/host/permits.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep::host {

enum class Denormals { kKeep, kFlushToZero };

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas, Denormals denormals = Denormals::kKeep, int concurrent = 0)
      : replicas_(replicas),
        flush_denormals_(denormals == Denormals::kFlushToZero),
        finished_(new Finished[static_cast<std::size_t>(replicas > 0 ? replicas : 1)]) {
    require(replicas >= 1, "replica pool: ", replicas, " replicas, expected at least 1");
    if (concurrent > 0 && concurrent < replicas) permits_.reset(new Permits(concurrent));
    spins_ = permits_ ? 0 : 4096;
    try {
      threads_.reserve(static_cast<std::size_t>(replicas - 1));
      for (int r = 1; r < replicas; ++r) threads_.emplace_back([this, r] { worker(r); });
    } catch (const std::exception& e) {  // std::system_error (no more threads), std::bad_alloc
      // The destructor does not run for a constructor that throws: the
      // threads made so far are stopped here, or ~thread would terminate.
      const std::size_t made = threads_.size();
      stop_workers();
      fail("replica pool: could not start the thread of replica ", made + 1, " of ", replicas, " (", e.what(),
           "); each host replica is a thread of this process, and this machine has ",
           std::thread::hardware_concurrency(), " hardware threads: use fewer replicas");
    }
  }
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;
  ~ReplicaPool() { stop_workers(); }

  int size() const { return replicas_; }
  // The GEMM threads of every job's calls on every replica (ScopedGemmThreads);
  // 0 (the default): the process's count.
  void set_gemm_threads(int threads) { gemm_threads_ = threads; }
  // How long run() waits for the other replicas once replica 0's part is done.
  void set_timeout(double seconds) {
    timeout_ = lockstep::detail::checked(CommunicationOptions{seconds}, "ReplicaPool").timeout_seconds;
  }

  // `on_failure` runs on the failing replica's thread before it returns, so a
  // collective can release the replicas waiting for it (SpinBarrier::abort).
  void run(const std::function<void(int)>& job, const std::function<void()>& on_failure = {}) {
    job_ = &job;
    on_failure_ = &on_failure;
    error_ = nullptr;
    pending_.store(replicas_ - 1, std::memory_order_relaxed);
    std::uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation = generation_.fetch_add(1, std::memory_order_release) + 1;
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
    execute(0);
    join(generation);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  void execute(int replica) {
    const ScopedFlushDenormals float_mode(flush_denormals_);
    const ScopedGemmThreads gemm_threads(gemm_threads_);
    try {
      const PermitHeld permit(permits_.get());
      (*job_)(replica);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      if (*on_failure_) (*on_failure_)();
    }
  }

  // Waits for replicas 1..N-1 to finish run `generation`: spins, yields,
  // then naps; the clock is read every 256 yields or naps.
  void join(std::uint64_t generation) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point start{};
    bool nap = false, expired = false;
    for (std::uint32_t spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < spins_) {
        LOCKSTEP_CPU_RELAX();
        continue;
      }
      if (spins % 256 == 0) {
        const Clock::time_point now = Clock::now();
        if (spins == spins_) start = now;
        const double waited = std::chrono::duration<double>(now - start).count();
        nap = waited > 0.05;
        if (!expired && waited > timeout_) {
          expired = true;
          time_out(generation);
        }
      }
      if (nap) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      } else {
        std::this_thread::yield();
      }
    }
  }

  // Replicas still in run `generation` after the timeout: the run's Error
  // (unless one failed first) names them, the collective lets them go.
  void time_out(std::uint64_t generation) {
    std::string missing;
    int count = 0;
    for (int r = 1; r < replicas_; ++r)
      if (finished_[static_cast<std::size_t>(r)].generation.load(std::memory_order_acquire) != generation) {
        missing += lockstep::detail::concat(count ? ", " : "", r);
        ++count;
      }
    if (count == 0) return;  // they finished meanwhile
    const std::string message = lockstep::detail::concat(
        "replica pool: ", count == 1 ? "replica " : "replicas ", missing, " (of ", replicas_,
        ") had not finished ", timeout_, " s after replica 0 finished its part of the job "
        "(CommunicationOptions::timeout_seconds); the collective is aborted to release ", count == 1 ? "it" : "them",
        ", and the pool waits for ", count == 1 ? "its thread" : "their threads",
        " to return (a thread cannot be stopped from outside)");
    std::fprintf(stderr, "lockstep: %s\n", message.c_str());
    std::fflush(stderr);
    {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::make_exception_ptr(Error(message));
    }
    if (*on_failure_) (*on_failure_)();
  }

  void worker(int replica) {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin briefly: between two steps the caller only prepares the next
      // batch. Unit threads (permits), more of them than cores, do not.
      for (int spins = 0; !permits_ && generation_.load(std::memory_order_acquire) == seen && spins < 20000; ++spins)
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
      finished_[static_cast<std::size_t>(replica)].generation.store(seen, std::memory_order_release);
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
  double timeout_ = CommunicationOptions{}.timeout_seconds;
  int gemm_threads_ = 0;               // set_gemm_threads
  std::unique_ptr<Permits> permits_;  // null: every replica runs at once
  std::uint32_t spins_ = 4096;        // join's spins before it yields: none with permits
  struct alignas(64) Finished {  // the last run each replica finished, on a line of its own
    std::atomic<std::uint64_t> generation{0};
  };
  std::unique_ptr<Finished[]> finished_;
};

}  // namespace lockstep::host
