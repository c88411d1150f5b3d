// ReductionToOneDevice<Host> against a host sum in double for 1..4 replica
// threads: sums and means, all_reduce and reduce_to_root, and the bits of a
// float sum taken in replica order on every replica.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/collective/reduction_to_one_device.hpp"
#include "lockstep/core/rng.hpp"

using namespace lockstep;

TEST_CASE("ReductionToOneDevice<Host> sums and averages across 1..4 replicas in replica order") {
  for (int n = 1; n <= 4; ++n) {
    host::ReplicaPool pool(n);
    ReductionToOneDevice<Host>::Group group(n);
    CHECK(group.size() == n);
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{1000003}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
        for (bool everywhere : {true, false}) {
          CAPTURE(n);
          CAPTURE(size);
          CAPTURE(everywhere);
          std::vector<std::vector<float>> data(static_cast<std::size_t>(n), std::vector<float>(size));
          std::vector<double> expected(size, 0.0);
          std::vector<float> ordered(size, 0.0f);  // the float sum x_0 + x_1 + ... in that order
          for (std::size_t r = 0; r < data.size(); ++r)
            for (std::size_t i = 0; i < size; ++i) {
              data[r][i] = Philox4x32::uniform(r, 3, i) - 0.5f;
              expected[i] += data[r][i];
              ordered[i] = r == 0 ? data[r][i] : ordered[i] + data[r][i];
            }
          if (op == ReduceOp::kMean) {
            for (auto& e : expected) e /= n;
            if (n > 1)
              for (auto& o : ordered) o *= 1.0f / static_cast<float>(n);
          }
          pool.run([&](int r) {
            float* mine = data[static_cast<std::size_t>(r)].data();
            if (everywhere)
              group.all_reduce(r, mine, size, op);
            else
              group.reduce_to_root(r, mine, size, op);
          });
          double worst = 0;
          bool identical = true;
          const std::size_t holders = everywhere ? data.size() : 1;
          for (std::size_t r = 0; r < holders; ++r)
            for (std::size_t i = 0; i < size; ++i) {
              worst = std::max(worst, std::abs(data[r][i] - expected[i]));
              identical = identical && std::memcmp(&data[r][i], &ordered[i], sizeof(float)) == 0;
            }
          CHECK(worst < 1e-5);  // absolute: every |x| <= 0.5 and n <= 4
          CHECK(identical);     // the replica-order float sum, bit for bit, on every holder
        }
      }
    }
  }
}

TEST_CASE("ReductionToOneDevice<Host> abort releases replicas waiting for a failed one") {
  host::ReplicaPool pool(3);
  ReductionToOneDevice<Host>::Group group(3);
  std::vector<float> buffer(3 * 16, 1.0f);
  CHECK_THROWS_AS(pool.run(
                      [&](int r) {
                        if (r == 2) fail("replica 2 failed on purpose");
                        group.all_reduce(r, buffer.data() + 16 * r, 16);
                      },
                      [&] { group.abort(); }),
                  Error);
}
