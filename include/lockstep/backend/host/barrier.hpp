// A reusable barrier for the replica threads of one process. Replicas arrive
// microseconds apart in a step, so it spins first (cheap wake-up), yields
// after a while (fair on an oversubscribed machine) and sleeps in short naps
// once a wait is long (a stalled peer must not cost a core). If a replica
// fails, abort() releases everyone waiting with an Error instead of leaving
// them hung; a wait longer than the timeout (CommunicationOptions) aborts the
// barrier itself, naming the replicas that did not arrive. A thread that
// holds a permit (backend/host/permits.hpp: the deterministic mode's unit
// threads, more of them than cores) lends it out and yields from the start
// instead of spinning, so the threads that compute have the cores (yielding
// hands a core over faster than a condition variable's wake-up: 3.3 against
// 4.2 ms a step for 24 units on 2 cores, benchmarks/train_throughput).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockstep/backend/host/permits.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LOCKSTEP_CPU_RELAX() _mm_pause()
#else
#define LOCKSTEP_CPU_RELAX() ((void)0)
#endif

namespace lockstep::host {

// A wait that ran out of time, for the message of the Error it becomes.
struct Stall {
  int replica = -1;          // the replica that gave up; -1 when the wait did not say
  double waited_seconds = 0; // the timeout it waited for
  int parties = 0;
  int arrived = 0;           // replicas that had arrived, the one that gave up included
  std::vector<int> missing;  // those that had not (known when every wait names its replica)

  // "replica 0 waited 1 s; replica 1 (of 2) did not arrive"
  std::string text() const {
    using lockstep::detail::concat;
    std::string out = replica >= 0 ? concat("replica ", replica, " waited ") : std::string("a replica waited ");
    out += concat(waited_seconds, " s; ");
    if (missing.empty()) return out + concat(parties - arrived, " of ", parties, " replicas did not arrive");
    out += missing.size() == 1 ? "replica " : "replicas ";
    for (std::size_t i = 0; i < missing.size(); ++i) out += concat(i ? ", " : "", missing[i]);
    return out + concat(" (of ", parties, ") did not arrive");
  }
};

namespace detail {

// Releases the waiters of a barrier or a relay with an Error once set: the
// first reason given stays. An abort being written is waited out, so that
// every waiter reports its reason: a waiter whose own expiry lost the race to
// another's would otherwise throw the generic message, and that could be the
// error the pool reports first.
class AbortSwitch {
 public:
  // False when an abort came first.
  bool set(const std::string& reason) {
    int expected = kRunning;
    if (!state_.compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) return false;
    reason_ = reason;
    state_.store(kAborted, std::memory_order_release);
    return true;
  }
  bool on() const { return state_.load(std::memory_order_acquire) != kRunning; }
  // The reason, or `otherwise` where it was empty.
  [[noreturn]] void raise(const char* otherwise) const {
    int state = state_.load(std::memory_order_acquire);
    while (state == kWriting) {
      std::this_thread::yield();
      state = state_.load(std::memory_order_acquire);
    }
    if (state == kAborted && !reason_.empty()) throw Error(reason_);
    fail(otherwise);
  }

 private:
  enum : int { kRunning, kWriting, kAborted };
  std::atomic<int> state_{kRunning};
  std::string reason_;  // written once, before state_ becomes kAborted
};

// Waits until done(): spins first (replicas arrive microseconds apart), then
// yields, then naps 200 us once the wait passes 50 ms (a stalled peer must
// not cost a core); the clock is read only once the spinning is over, then
// every 256 yields or naps. An abort ends the wait with its Error; so does a
// wait past `timeout` seconds, through expire(), which must throw, unless
// done() has come meanwhile.
template <class Done, class Expire>
void wait_until(const Done& done, const AbortSwitch& abort, const char* aborted, double timeout, Expire&& expire) {
  constexpr std::uint32_t kSpins = 4096;  // a multiple of 256: the first clock read
  constexpr double kNapAfterSeconds = 0.05;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start{};
  bool nap = false;
  for (std::uint32_t spins = 0; !done(); ++spins) {
    if (abort.on()) abort.raise(aborted);
    if (spins < kSpins) {
      LOCKSTEP_CPU_RELAX();
      continue;
    }
    if (spins % 256 == 0) {
      const Clock::time_point now = Clock::now();
      if (spins == kSpins) start = now;
      const double waited = std::chrono::duration<double>(now - start).count();
      nap = waited > kNapAfterSeconds;
      if (waited > timeout && !done()) expire();
    }
    if (nap)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    else
      std::this_thread::yield();
  }
}

}  // namespace detail

class SpinBarrier {
 public:
  explicit SpinBarrier(int parties, double timeout_seconds = CommunicationOptions{}.timeout_seconds)
      : parties_(parties), arrivals_(new Arrival[static_cast<std::size_t>(parties > 0 ? parties : 1)]) {
    set_timeout(timeout_seconds);
  }

  // Set while no replica waits (between steps).
  void set_timeout(double seconds) {
    timeout_ = lockstep::detail::checked(CommunicationOptions{seconds}, "SpinBarrier").timeout_seconds;
  }
  double timeout() const { return timeout_; }

  // wait(replica) lets a timeout name the replicas that did not arrive;
  // describe(const Stall&) -> std::string makes the message, called only then.
  void wait() { wait(-1, plain_message); }
  void wait(int replica) { wait(replica, plain_message); }
  template <class Describe>
  void wait(int replica, Describe&& describe) {
    if (abort_.on()) abort_.raise(kAborted);
    const std::uint32_t generation = generation_.load(std::memory_order_acquire);
    if (replica >= 0 && replica < parties_)
      arrivals_[static_cast<std::size_t>(replica)].generation.store(generation + 1, std::memory_order_relaxed);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
      return;
    }
    if (Permits::holder()) {
      wait_lent(replica, generation, describe);
      return;
    }
    detail::wait_until([&] { return generation_.load(std::memory_order_acquire) != generation; }, abort_, kAborted,
                       timeout_, [&] { expire(replica, generation, describe); });
  }

  // Releases every replica waiting (and any that arrives later) with an
  // Error: `reason` as its message, or a replica's failure when empty. The
  // first abort's reason stays.
  void abort(const std::string& reason = {}) { abort_.set(reason); }
  int parties() const { return parties_; }

 private:
  static constexpr double kNapAfterSeconds = 0.05;  // wait_lent's naps, as wait_until's
  static constexpr const char* kAborted = "a replica failed; the others stopped at a barrier";
  struct alignas(64) Arrival {  // written by its replica only: no line shared with another
    std::atomic<std::uint32_t> generation{0};
  };

  // wait() for a thread with a permit: lent out while it waits, taken back
  // (PermitLent's destructor) once the last replica arrives, or on an Error.
  template <class Describe>
  void wait_lent(int replica, std::uint32_t generation, Describe& describe) {
    const PermitLent lent;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint32_t polls = 0; generation_.load(std::memory_order_acquire) == generation; ++polls) {
      if (abort_.on()) abort_.raise(kAborted);
      std::this_thread::yield();
      if (polls % 256 != 255) continue;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_ && generation_.load(std::memory_order_acquire) == generation)
        expire(replica, generation, describe);
      if (waited > kNapAfterSeconds) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  static std::string plain_message(const Stall& stall) {
    return lockstep::detail::concat("a barrier of ", stall.parties, " replicas timed out: ", stall.text(), ". ",
                          lockstep::detail::kAfterTimeout);
  }

  template <class Describe>
  [[noreturn]] void expire(int replica, std::uint32_t generation, Describe& describe) {
    Stall stall;
    stall.replica = replica;
    stall.waited_seconds = timeout_;
    stall.parties = parties_;
    stall.arrived = arrived_.load(std::memory_order_acquire);
    if (replica >= 0)
      for (int r = 0; r < parties_; ++r)
        if (arrivals_[static_cast<std::size_t>(r)].generation.load(std::memory_order_relaxed) != generation + 1)
          stall.missing.push_back(r);
    const std::string message = describe(static_cast<const Stall&>(stall));
    abort(message);
    abort_.raise(kAborted);  // this abort's message, or an earlier one's
  }

  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  detail::AbortSwitch abort_;
  int parties_;
  double timeout_ = CommunicationOptions{}.timeout_seconds;
  std::unique_ptr<Arrival[]> arrivals_;
};

}  // namespace lockstep::host
