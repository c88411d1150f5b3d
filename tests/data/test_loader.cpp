// The loader's plan: every sample once per epoch whatever the replica count,
// seeded shuffles that differ between epochs, slices that cover each batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "lockstep/data/loader.hpp"

using lockstep::Loader;

TEST_CASE("each sample is seen exactly once per epoch for any replica count") {
  for (int replicas = 1; replicas <= 5; ++replicas) {
    for (std::size_t batch : {std::size_t{1}, std::size_t{3}, std::size_t{32}, std::size_t{1000}}) {
      Loader loader(103, batch, true, false, 42);
      for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
        loader.begin_epoch(epoch);
        std::vector<int> seen(103, 0);
        for (std::size_t step = 0; step < loader.steps(); ++step) {
          const auto [indices, count] = loader.batch(step);
          std::size_t covered = 0;
          for (int r = 0; r < replicas; ++r) {
            const auto [lo, hi] = Loader::replica_slice(count, r, replicas);
            CHECK(lo == covered);  // slices are contiguous and in replica order
            CHECK(hi - lo <= Loader::slice_capacity(batch, 103, replicas));
            for (std::size_t i = lo; i < hi; ++i) seen[indices[i]]++;
            covered = hi;
          }
          CHECK(covered == count);
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
      }
    }
  }
}

TEST_CASE("shuffles differ between epochs and repeat with the same seed") {
  Loader a(1000, 10, true, false, 7), b(1000, 10, true, false, 7), c(1000, 10, true, false, 8);
  a.begin_epoch(0);
  b.begin_epoch(0);
  c.begin_epoch(0);
  const auto a0 = a.order();
  CHECK(a0 == b.order());
  CHECK(a0 != c.order());
  a.begin_epoch(1);
  CHECK(a.order() != a0);
  a.begin_epoch(0);
  CHECK(a.order() == a0);
  Loader plain(10, 3, false, false, 7);
  plain.begin_epoch(5);
  CHECK(plain.order() == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("step counts - the short last batch and drop_remainder") {
  Loader keep(10, 4, false, false, 0), drop(10, 4, false, true, 0);
  CHECK(keep.steps() == 3);
  CHECK(keep.batch(2).second == 2);
  CHECK(drop.steps() == 2);
  CHECK_THROWS_WITH_AS(Loader(10, 0, true, false, 0), "lockstep: batch size 0, expected at least 1", lockstep::Error);
  CHECK_THROWS_AS(Loader(0, 4, true, false, 0), lockstep::Error);
  CHECK_THROWS_AS(Loader(3, 4, true, true, 0), lockstep::Error);
}

TEST_CASE("a batch size beyond the data set is one batch of all of it, and no size wraps around") {
  for (const std::size_t batch : {std::size_t{104}, std::size_t{1} << 40, std::numeric_limits<std::size_t>::max()}) {
    Loader loader(103, batch, true, false, 1);
    loader.begin_epoch(0);
    REQUIRE(loader.steps() == 1);
    CHECK(loader.batch(0).second == 103);
    CHECK(Loader::slice_capacity(batch, 103, 2) == 52);
    std::size_t covered = 0;
    Loader::for_each_slice(103, batch, 1, 2, [&](std::size_t first, int rows) {
      CHECK(first == 51);
      covered += static_cast<std::size_t>(rows);
    });
    CHECK(covered == 52);
  }
  CHECK(Loader(103, 10, false, false, 1).steps() == 11);
  CHECK(Loader(103, 10, false, true, 1).steps() == 10);
  CHECK(Loader::slice_capacity(7, 0, 2) == 1);  // no data: a buffer of one row, never zero
}
