// HostAllReduce against a serial sum, for N = 1..8 replica threads and sizes
// that exercise empty, partial and uneven chunks.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/core/rng.hpp"

using namespace lockstep;

TEST_CASE("HostAllReduce sums and averages across 1..8 replicas") {
  for (int n = 1; n <= 8; ++n) {
    host::ReplicaPool pool(n);
    HostAllReduce::Group group(n);
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, static_cast<std::size_t>(n - 1),
                             std::size_t{1000003}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
        CAPTURE(n);
        CAPTURE(size);
        std::vector<std::vector<float>> data(static_cast<std::size_t>(n), std::vector<float>(size));
        std::vector<double> expected(size, 0.0);
        for (std::size_t r = 0; r < data.size(); ++r)
          for (std::size_t i = 0; i < size; ++i) {
            data[r][i] = Philox4x32::uniform(r, 0, i) - 0.5f;
            expected[i] += data[r][i];
          }
        if (op == ReduceOp::kMean)
          for (auto& e : expected) e /= n;
        pool.run([&](int r) { group.all_reduce(r, data[static_cast<std::size_t>(r)].data(), size, op); });
        double worst = 0;
        bool identical = true;
        for (std::size_t r = 0; r < data.size(); ++r)
          for (std::size_t i = 0; i < size; ++i) {
            worst = std::max(worst, std::abs(data[r][i] - expected[i]));
            identical = identical && data[r][i] == data[0][i];
          }
        CHECK(worst < 1e-5);
        CHECK(identical);  // every replica holds bit-identical results
      }
    }
  }
}

TEST_CASE("all_reduce and reduce_to_root give the sum in replica order, bit for bit") {
  for (int n = 1; n <= 5; ++n) {
    host::ReplicaPool pool(n);
    HostAllReduce::Group group(n);
    for (std::size_t size : {std::size_t{1}, std::size_t{33}, std::size_t{100003}}) {
      for (bool everywhere : {true, false}) {
        CAPTURE(n);
        CAPTURE(size);
        CAPTURE(everywhere);
        std::vector<std::vector<float>> data(static_cast<std::size_t>(n), std::vector<float>(size));
        std::vector<float> expected(size, 0.0f);  // summed as the collective must: replica 0, 1, ...
        for (std::size_t r = 0; r < data.size(); ++r)
          for (std::size_t i = 0; i < size; ++i) {
            data[r][i] = Philox4x32::uniform(r, 2, i) - 0.5f;
            expected[i] = r == 0 ? data[r][i] : expected[i] + data[r][i];
          }
        for (int call = 0; call < 2; ++call) {  // the second call sums the first call's results
          pool.run([&](int r) {
            float* mine = data[static_cast<std::size_t>(r)].data();
            if (everywhere) group.all_reduce(r, mine, size);
            else group.reduce_to_root(r, mine, size);
          });
          if (call == 0 && !everywhere) break;  // other replicas hold partial sums: nothing to sum again
          if (call == 1)
            for (auto& e : expected) {  // n equal buffers, summed in order
              const float once = e;
              for (int r = 1; r < n; ++r) e += once;
            }
        }
        bool exact = true;
        for (std::size_t r = 0; r < (everywhere ? data.size() : 1); ++r)
          for (std::size_t i = 0; i < size; ++i) exact = exact && data[r][i] == expected[i];
        CHECK(exact);
      }
    }
  }
}

// One reduce_update test: `apply(update)` hands reduce_update an update made
// from update(first, last, summed), with summed a `const float*` or the sum
// the collective chose to pass.
template <class Apply>
void check_reduce_update(Apply apply) {
  for (int n = 1; n <= 5; ++n) {
    host::ReplicaPool pool(n);
    HostAllReduce::Group group(n);
    for (std::size_t params : {std::size_t{1}, std::size_t{33}, std::size_t{100003}}) {
      CAPTURE(n);
      CAPTURE(params);
      const std::size_t count = params + 2;  // two statistics ride after the gradients
      std::vector<std::vector<float>> grads(static_cast<std::size_t>(n), std::vector<float>(count));
      std::vector<float> weights(params, 1.0f);  // one copy, shared by every replica
      std::vector<double> sum(count, 0.0);
      std::vector<float> exact(count, 0.0f);  // the float sum in replica order
      for (std::size_t r = 0; r < grads.size(); ++r)
        for (std::size_t i = 0; i < count; ++i) {
          grads[r][i] = Philox4x32::uniform(r, 1, i);
          sum[i] += grads[r][i];
          exact[i] += grads[r][i];
        }
      std::vector<int> updates(params, 0);  // how often each parameter was updated, by any replica
      bool sums_exact = true;
      for (int step = 0; step < 2; ++step)  // the second step reuses the group and buffers
        pool.run([&](int r) {
          std::vector<float>& mine = grads[static_cast<std::size_t>(r)];
          if (step == 1)  // this step's gradients are the first step's again
            for (std::size_t i = 0; i < count; ++i) mine[i] = Philox4x32::uniform(static_cast<std::uint64_t>(r), 1, i);
          bool exact_here = true;
          group.reduce_update(r, mine.data(), count, params,
                              apply([&](std::size_t first, std::size_t last, auto summed) {
                                for (std::size_t i = first; i < last; ++i) {
                                  exact_here = exact_here && summed[i] == exact[i];
                                  weights[i] -= summed[i];
                                  ++updates[i];  // chunks are disjoint: no race
                                }
                              }));
          if (!exact_here) sums_exact = false;  // a benign race: only ever set to false
        });
      bool twice = true;
      double worst = 0;
      for (std::size_t i = 0; i < params; ++i) {
        twice = twice && updates[i] == 2;
        worst = std::max(worst, std::abs(weights[i] - (1.0 - 2.0 * sum[i])));
      }
      for (std::size_t i = params; i < count; ++i)  // the statistics' sums are in replica 0's buffer
        worst = std::max(worst, std::abs(grads[0][i] - sum[i]));
      CHECK(twice);
      CHECK(sums_exact);  // bit for bit the sum in replica order, whichever path
      CHECK(worst < 1e-4);
    }
  }
}

TEST_CASE("reduce_update updates each shared parameter once, with the summed gradient") {
  SUBCASE("an update that takes any summed view (two replicas: host::SumOfTwo)") {
    check_reduce_update([](auto update) { return update; });
  }
  SUBCASE("an update that takes only pointers (the collective sums into the owner's buffer)") {
    check_reduce_update([](auto update) {
      return [update](std::size_t first, std::size_t last, const float* summed) { update(first, last, summed); };
    });
  }
}

TEST_CASE("with two replicas, an update that takes it is handed host::SumOfTwo, not a reduced buffer") {
  host::ReplicaPool pool(2);
  HostAllReduce::Group group(2);
  std::vector<std::vector<float>> grads(2, std::vector<float>(64, 1.0f));
  std::atomic<int> views{0}, pointers{0};
  pool.run([&](int r) {
    group.reduce_update(r, grads[static_cast<std::size_t>(r)].data(), 64, 64,
                        [&](std::size_t, std::size_t, auto summed) {
                          ++(std::is_same_v<decltype(summed), host::SumOfTwo> ? views : pointers);
                        });
  });
  CHECK(views == 2);
  CHECK(pointers == 0);
  // Nothing was summed into a buffer: each still holds its own gradients.
  CHECK(grads[0][0] == 1.0f);
  CHECK(grads[1][63] == 1.0f);
}
