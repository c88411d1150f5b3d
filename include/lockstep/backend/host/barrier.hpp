// A reusable barrier for the replica threads of one process. Replicas arrive
// microseconds apart in a step, so it spins first (cheap wake-up) and yields
// after a while (fair on an oversubscribed machine). If a replica fails, abort()
// releases everyone waiting with an Error instead of leaving them hung.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "lockstep/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_CPU_RELAX() _mm_pause()
#else
#define LOCKSTEP_CPU_RELAX() ((void)0)
#endif

namespace lockstep::host {

class SpinBarrier {
 public:
  explicit SpinBarrier(int parties) : parties_(parties) {}

  void wait() {
    const std::uint32_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
      if (aborted_.load(std::memory_order_relaxed)) fail("a replica failed; the others stopped at a barrier");
      if (spins < 4096)
        LOCKSTEP_CPU_RELAX();
      else
        std::this_thread::yield();
    }
  }

  void abort() { aborted_.store(true, std::memory_order_relaxed); }
  int parties() const { return parties_; }

 private:
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  std::atomic<bool> aborted_{false};
  int parties_;
};

}  // namespace lockstep::host
