// The replica pool runs a job once per replica, in parallel, reusable; a
// failing replica's error reaches the caller and releases the others; a wait
// past the timeout names who did not arrive.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/replica_pool.hpp"

using lockstep::host::ReplicaPool;
using lockstep::host::SpinBarrier;

TEST_CASE("ReplicaPool runs each replica exactly once per run") {
  for (int n : {1, 2, 5}) {
    ReplicaPool pool(n);
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    SpinBarrier barrier(n);
    for (int run = 0; run < 50; ++run)
      pool.run([&](int r) {
        hits[static_cast<std::size_t>(r)]++;
        barrier.wait();  // all replicas are live at once
      });
    for (auto& h : hits) CHECK(h.load() == 50);
  }
}

TEST_CASE("an exception on one replica is rethrown and releases the others") {
  ReplicaPool pool(3);
  SpinBarrier barrier(3);
  const std::function<void()> abort = [&] { barrier.abort(); };
  CHECK_THROWS_WITH_AS(pool.run(
                           [&](int r) {
                             if (r == 1) throw lockstep::Error("replica 1 broke");
                             barrier.wait();
                           },
                           abort),
                       "lockstep: replica 1 broke", lockstep::Error);
  CHECK_THROWS_AS(ReplicaPool(0), lockstep::Error);
}

TEST_CASE("a wait past the timeout of a barrier names the replicas that did not arrive and releases the others") {
  ReplicaPool pool(3);
  SpinBarrier barrier(3, 0.2);
  const std::function<void()> abort = [&] { barrier.abort(); };
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(pool.run(
                           [&](int r) {
                             if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(600));
                             barrier.wait(r);  // replica 2 comes late, to a barrier aborted by the others
                           },
                           abort),
                       doctest::Contains("replica 2 (of 3) did not arrive"), lockstep::Error);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 2.0);
  // Aborted for good: the owner makes a new one (as the executors make the collective anew).
  CHECK_THROWS_WITH_AS(barrier.wait(0), doctest::Contains("did not arrive"), lockstep::Error);

  // A wait that does not name its replica can only count them.
  SpinBarrier anonymous(2, 0.05);
  CHECK_THROWS_WITH_AS(anonymous.wait(), doctest::Contains("1 of 2 replicas did not arrive"), lockstep::Error);

  // Waits within the timeout pass, many times over.
  SpinBarrier fine(3, 5.0);
  pool.run([&](int r) {
    for (int i = 0; i < 1000; ++i) fine.wait(r);
  });
}

TEST_CASE("replicas that time out together all report the timeout, never the generic abort") {
  // Several waits expire at once: one writes the reason, the others must wait
  // for it rather than throw "a replica failed" (the pool reports whichever
  // error comes first). Which replicas the reason lists as absent is what the
  // expiring wait saw: on a loaded machine (TSan, 6 threads on 2 cores) a
  // replica may not have been scheduled within the 5 ms and is rightly listed
  // beside replica 5. So the test asserts what holds in every schedule: all
  // five report the one reason, a timeout's, naming replica 5; and a gate
  // (every replica running before any waits) makes "replica 5" alone the
  // usual list, which a mutation naming the wrong replica would break.
  constexpr int kParties = 6;
  ReplicaPool pool(kParties);
  int rounds_naming_5_alone = 0;
  for (int round = 0; round < 50; ++round) {
    SpinBarrier barrier(kParties, 0.005);
    std::atomic<int> running{0};
    std::vector<std::string> messages(kParties);
    pool.run([&](int r) {
      if (r == kParties - 1) return;  // never arrives
      running.fetch_add(1);
      while (running.load() < kParties - 1) std::this_thread::yield();
      try {
        barrier.wait(r);
      } catch (const lockstep::Error& e) {
        messages[static_cast<std::size_t>(r)] = e.what();
      }
    });
    const std::string& reason = messages[0];
    INFO("round ", round, ": ", reason);
    CHECK(reason.rfind("lockstep: a barrier of 6 replicas timed out: replica ", 0) == 0);
    CHECK(reason.find("5 (of 6) did not arrive") != std::string::npos);
    for (int r = 1; r + 1 < kParties; ++r) CHECK(messages[static_cast<std::size_t>(r)] == reason);
    if (reason.find("; replica 5 (of 6) did not arrive") != std::string::npos) ++rounds_naming_5_alone;
  }
  // Most rounds on any machine; 0 only if every round had a replica
  // unscheduled for 5 ms after the gate, or if the list is wrong.
  CHECK(rounds_naming_5_alone > 0);
}

TEST_CASE("the pool names replicas that have not returned within its timeout and still waits for them") {
  ReplicaPool pool(2);
  pool.set_timeout(0.1);
  std::atomic<bool> released{false};
  const std::function<void()> on_failure = [&] { released = true; };
  CHECK_THROWS_WITH_AS(pool.run([&](int r) {
                         if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
                       }, on_failure),
                       doctest::Contains("replica 1 (of 2) had not finished"), lockstep::Error);
  CHECK(released.load());
  pool.run([](int) {});  // usable afterwards
  CHECK_THROWS_AS(pool.set_timeout(0.0), lockstep::Error);
  CHECK_THROWS_AS(SpinBarrier(2, -1.0), lockstep::Error);
}
