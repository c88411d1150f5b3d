// The replica pool runs a job once per replica, in parallel, reusable; a
// failing replica's error reaches the caller and releases the others.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
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
