// Permits: at most N of a larger set of threads computing at once. The
// deterministic mode (core/determinism.hpp) runs one thread per unit of the
// batch, but only as many at a time as the process has cores (or replicas):
// a thread holds a permit while it computes and lends it out while it waits
// for the others (SpinBarrier::wait, through PermitLent), so the units share
// the cores without spinning against each other, and no thread waits for a
// permit that a waiting thread holds.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace lockstep::host {

class Permits {
 public:
  explicit Permits(int count) : free_(count) {}
  Permits(const Permits&) = delete;
  Permits& operator=(const Permits&) = delete;

  // Waits until a permit is free (yielding: the holders are computing on
  // the cores it would take); the calling thread then holds it.
  // A wait past 50 ms (a holder stuck in user code) naps instead.
  void acquire() {
    std::chrono::steady_clock::time_point start{};
    for (std::uint32_t polls = 0;; ++polls) {
      int free = free_.load(std::memory_order_acquire);
      if (free > 0 && free_.compare_exchange_weak(free, free - 1, std::memory_order_acq_rel)) break;
      if (polls < 256) {
        std::this_thread::yield();
        continue;
      }
      if (polls == 256) start = std::chrono::steady_clock::now();
      if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(50))
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      else
        std::this_thread::yield();
    }
    holder() = this;
  }
  void release() {
    holder() = nullptr;
    free_.fetch_add(1, std::memory_order_acq_rel);
  }

  // The permits the calling thread holds a permit of, or null: a thread of a
  // pool without permits, or one that lent its permit out.
  static Permits*& holder() {
    thread_local Permits* held = nullptr;
    return held;
  }

 private:
  std::atomic<int> free_;
};

// A permit held for a scope (a replica's job), returned also when it throws;
// nothing where `permits` is null (a pool without permits).
class PermitHeld {
 public:
  explicit PermitHeld(Permits* permits) : permits_(permits) {
    if (permits_) permits_->acquire();
  }
  PermitHeld(const PermitHeld&) = delete;
  PermitHeld& operator=(const PermitHeld&) = delete;
  ~PermitHeld() {
    if (permits_) permits_->release();
  }

 private:
  Permits* permits_;
};

// The calling thread's permit lent out for a scope (a wait for other
// threads), taken back at its end, also when the wait ends in an Error.
class PermitLent {
 public:
  PermitLent() : permits_(Permits::holder()) {
    if (permits_) permits_->release();
  }
  PermitLent(const PermitLent&) = delete;
  PermitLent& operator=(const PermitLent&) = delete;
  ~PermitLent() {
    if (permits_) permits_->acquire();
  }

 private:
  Permits* permits_;
};

}  // namespace lockstep::host
