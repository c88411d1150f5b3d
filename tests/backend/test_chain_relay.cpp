// ChainRelay: replicas holding consecutive rows of a batch continue one
// another's chains in a shared C, so C is bit for bit one chain_gemm over all
// the rows, for any replica count and split, round after round; a replica
// that fails or stalls ends the others' calls with an Error, not a hang.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/host/chain_gemm.hpp"
#include "lockstep/backend/host/chain_relay.hpp"
#include "lockstep/backend/host/replica_pool.hpp"
#include "random_matrix.hpp"

namespace {
using lockstep::host::ChainRelay;
using lockstep::host::ReplicaPool;

std::size_t z(int v) { return static_cast<std::size_t>(v); }

// A weight gradient's shape: C (m x n) = X^T (m x k) dY (k x n), X and dY
// stored by rows (k rows of m and of n values), k the batch.
struct Batch {
  int m, n, k;
  std::vector<float> x, dy;
};
Batch batch(int m, int n, int k, std::uint64_t seed) {
  return {m, n, k, lockstep::testing::random_matrix(z(k) * z(m), seed),
          lockstep::testing::random_matrix(z(k) * z(n), seed + 1)};
}

// Rows [cuts[r], cuts[r + 1]) on replica r, relayed; `rounds` products in a
// row into the same C, each round restarting from +0 (replica 0 does not
// accumulate), except a last one that `continues` from the round before.
std::vector<float> relayed(const Batch& q, const std::vector<int>& cuts, int rounds, bool continues = false) {
  const int replicas = static_cast<int>(cuts.size()) - 1;
  std::vector<float> c(z(q.m) * z(q.n), -1.0f);
  ChainRelay relay(replicas);
  ReplicaPool pool(replicas);
  for (int round = 0; round < rounds; ++round)
    pool.run([&](int r) {
      const int p0 = cuts[z(r)], p1 = cuts[z(r) + 1];
      relay.gemm(r, true, false, q.m, q.n, p1 - p0, q.x.data() + z(p0) * z(q.m), q.m, q.dy.data() + z(p0) * z(q.n),
                 q.n, continues && round == rounds - 1, c.data(), q.n);
      relay.wait_complete(r);
    });
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("ChainRelay: 1, 2, 3, 4, 6 and 8 replicas give the bits of one chain over every row") {
  // 784 x 256: several blocks of rows and of columns; 256 x 10: one panel.
  for (auto [m, n] : {std::pair{784, 256}, std::pair{256, 10}}) {
    const Batch q = batch(m, n, 240, 3);
    std::vector<float> whole(z(m) * z(n));
    lockstep::host::chain_gemm(true, false, m, n, q.k, q.x.data(), m, q.dy.data(), n, false, whole.data(), n);
    for (int replicas : {1, 2, 3, 4, 6, 8}) {
      std::vector<int> cuts;
      for (int r = 0; r <= replicas; ++r) cuts.push_back(q.k * r / replicas);
      CAPTURE(m);
      CAPTURE(replicas);
      CHECK(same_bits(relayed(q, cuts, 2), whole));  // the second round starts afresh
    }
    // Uneven rows, one replica with none (a short last batch).
    CHECK(same_bits(relayed(q, {0, 7, 7, 200, 240}, 1), whole));
    // The last of three rounds continues the second's C: two chains over the batch, one after the other.
    std::vector<float> twice = whole;
    lockstep::host::chain_gemm(true, false, m, n, q.k, q.x.data(), m, q.dy.data(), n, true, twice.data(), n);
    CHECK(same_bits(relayed(q, {0, 100, 240}, 3, true), twice));
  }
}

TEST_CASE("ChainRelay: a failed replica or a stalled one ends the others' calls with an Error") {
  const Batch q = batch(100, 70, 40, 9);
  std::vector<float> c(z(q.m) * z(q.n));
  auto part = [&](ChainRelay& relay, int r) {
    relay.gemm(r, true, false, q.m, q.n, 20, q.x.data() + z(r) * 20 * z(q.m), q.m, q.dy.data() + z(r) * 20 * z(q.n),
               q.n, false, c.data(), q.n);
  };
  {
    ChainRelay relay(2);
    ReplicaPool pool(2);
    const std::function<void()> abort = [&] { relay.abort(); };
    CHECK_THROWS_WITH_AS(pool.run(
                             [&](int r) {
                               if (r == 0) throw lockstep::Error("replica 0 broke");
                               part(relay, r);  // waits for replica 0, released by the abort
                             },
                             abort),
                         "lockstep: replica 0 broke", lockstep::Error);
  }
  {
    ChainRelay relay(2, 0.2);
    ReplicaPool pool(2);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(pool.run([&](int r) {
                           if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(600));
                           part(relay, r);
                         }),
                         doctest::Contains("replica 1 (of 2) waited 0.2 s for replica 0 to pass block 0"),
                         lockstep::Error);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0);
  }
  ChainRelay relay(1);
  part(relay, 0);
  CHECK_THROWS_WITH_AS(relay.gemm(0, true, false, 50, q.n, 20, q.x.data(), q.m, q.dy.data(), q.n, false, c.data(),
                                  q.n),
                       doctest::Contains("C of 50x70"), lockstep::Error);
  CHECK_THROWS_WITH_AS(part(relay, 1), doctest::Contains("replica 1, expected 0 to 0"), lockstep::Error);
  CHECK_THROWS_AS(ChainRelay(0), lockstep::Error);
}
