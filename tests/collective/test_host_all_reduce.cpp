// HostAllReduce against a serial sum, for N = 1..8 replica threads and sizes
// that exercise empty, partial and uneven chunks.
#include <doctest/doctest.h>

#include <cmath>
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
        for (int r = 0; r < n; ++r)
          for (std::size_t i = 0; i < size; ++i) {
            data[r][i] = Philox4x32::uniform(static_cast<std::uint64_t>(r), 0, i) - 0.5f;
            expected[i] += data[r][i];
          }
        if (op == ReduceOp::kMean)
          for (auto& e : expected) e /= n;
        pool.run([&](int r) { group.all_reduce(r, data[r].data(), size, op); });
        double worst = 0;
        bool identical = true;
        for (int r = 0; r < n; ++r)
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

TEST_CASE("reduce_update_gather updates each parameter once and gives every replica the same parameters") {
  for (int n = 1; n <= 5; ++n) {
    host::ReplicaPool pool(n);
    HostAllReduce::Group group(n);
    for (std::size_t params : {std::size_t{1}, std::size_t{33}, std::size_t{100003}}) {
      CAPTURE(n);
      CAPTURE(params);
      const std::size_t count = params + 2;  // two statistics ride after the gradients
      std::vector<std::vector<float>> grads(static_cast<std::size_t>(n), std::vector<float>(count));
      std::vector<std::vector<float>> weights(static_cast<std::size_t>(n), std::vector<float>(params, 1.0f));
      std::vector<double> sum(count, 0.0);
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i) {
          grads[r][i] = Philox4x32::uniform(static_cast<std::uint64_t>(r), 1, i);
          sum[i] += grads[r][i];
        }
      std::vector<int> updates(params, 0);  // how often each parameter was updated, by any replica
      pool.run([&](int r) {
        group.reduce_update_gather(r, grads[r].data(), count, weights[r].data(), params,
                                   [&](std::size_t first, std::size_t last) {
                                     for (std::size_t i = first; i < last; ++i) {
                                       weights[r][i] -= grads[r][i];  // this replica's chunk holds the sum
                                       ++updates[i];                  // chunks are disjoint: no race
                                     }
                                   });
      });
      bool once = true, same = true;
      double worst = 0;
      for (std::size_t i = 0; i < params; ++i) once = once && updates[i] == 1;
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < params; ++i) {
          same = same && weights[r][i] == weights[0][i];
          worst = std::max(worst, std::abs(weights[r][i] - (1.0 - sum[i])));
        }
        for (std::size_t i = params; i < count; ++i) worst = std::max(worst, std::abs(grads[r][i] - sum[i]));
      }
      CHECK(once);
      CHECK(same);
      CHECK(worst < 1e-5);
    }
  }
}
