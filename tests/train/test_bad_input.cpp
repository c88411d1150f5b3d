// Bad input ends in a lockstep::Error that names it, never in a hang, a crash
// or another exception: FIFOs, devices and directories given to the readers,
// NaN in a data set, a NaN loss during fit, more replica threads than the
// system can start, and a batch whose buffers do not fit in memory.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<8, Relu>, Dense<3>>;
using Mirrored = MirroredPolicy<HostAllReduce>;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Calls read(path) for a FIFO, /dev/zero and a directory: each must be an
// Error naming what the path is, at once (no read from a FIFO or a device).
template <class Read>
void check_rejects_non_regular_files(Read&& read) {
  testing::TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(read(fifo), doctest::Contains((fifo + ": a FIFO (named pipe), expected a regular file").c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(read("/dev/zero"), doctest::Contains("/dev/zero: a character device, expected a regular file"),
                       Error);
  CHECK_THROWS_WITH_AS(read(dir.str()), doctest::Contains((dir.str() + ": a directory").c_str()), Error);
  CHECK(seconds_since(start) < 5.0);
}
}  // namespace

TEST_CASE("a FIFO, /dev/zero or a directory is an Error for every reader, not a hang") {
  SUBCASE("IDX") {
    check_rejects_non_regular_files([](const std::string& path) { return read_idx(path); });
  }
  SUBCASE("CSV") {
    check_rejects_non_regular_files([](const std::string& path) { return read_csv(path); });
  }
  SUBCASE("load_weights") {
    check_rejects_non_regular_files([](const std::string& path) {
      Model model{1};
      load_weights(model, path);
    });
  }
  SUBCASE("load_checkpoint") {
    check_rejects_non_regular_files([](const std::string& path) {
      Model model{1};
      Trainer<Mirrored, Adam> trainer{Mirrored{1}};
      load_checkpoint(trainer, model, path);
    });
  }
}

TEST_CASE("a NaN or infinite feature is an Error when the data set is built, naming the sample and the feature") {
  std::vector<float> x(4 * 3, 0.5f);
  x[2 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(Dataset(x, 3, std::vector<std::int32_t>(4, 0)),
                       doctest::Contains("Dataset: feature 1 of sample 2 is nan, expected a finite number"), Error);
  x[2 * 3 + 1] = 0.5f;
  x[3 * 3 + 2] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(Dataset(x, 3, std::vector<std::int32_t>(4, 0)), doctest::Contains("feature 2 of sample 3 is -inf"),
                       Error);
  x[3 * 3 + 2] = 0.5f;
  std::vector<float> targets(4, 1.0f);
  targets[1] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(RegressionDataset(x, 3, targets), doctest::Contains("target 0 of sample 1 is inf"), Error);
  CHECK(Dataset(x, 3, std::vector<std::int32_t>(4, 0)).size() == 4);

  testing::TempDir dir;
  const std::string csv = dir.file("nan.csv");
  testing::write_file(csv, std::string("1,2,0\n3,4,1\n"));
  CsvOptions options;
  options.feature_scale = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(read_csv(csv, options), doctest::Contains("feature_scale is nan, expected a finite, non-zero"),
                       Error);
  options.feature_scale = 0.0f;
  CHECK_THROWS_WITH_AS(read_csv(csv, options), doctest::Contains("feature_scale is 0"), Error);
}

TEST_CASE("a NaN loss ends fit with an Error naming the epoch and the step; terminate_on_nan = false trains on") {
  const Dataset data = testing::argmax_dataset(60, 6, 3, 1);
  FitOptions options = testing::quiet_fit(10, 3);
  options.shuffle = false;
  Model model{1};
  Trainer<Mirrored, Sgd> trainer{Mirrored{2}, Sgd{1e30}};  // the first update sends the weights to infinity
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options),
                       doctest::Contains("fit: the loss is nan at epoch 1/3, step 2/6 (1-based"), Error);
  CHECK(trainer.run_state().steps_done == 2);

  Model on{1};
  Trainer<Mirrored, Sgd> keeps_going{Mirrored{2}, Sgd{1e30}};
  options.terminate_on_nan = false;
  const History history = keeps_going.fit(on, data, options);
  CHECK(keeps_going.run_state().steps_done == 18);
  CHECK(std::isnan(history["loss"][2]));
}

// RLIMIT_AS lowered to a little above what the process maps now, so that the
// thread stacks run out after a few threads (as 100000 threads would on any
// machine), fast, whatever the system's thread limits.
struct AddressSpaceLimit {
  rlimit saved{};
  bool set = false;
  explicit AddressSpaceLimit(std::size_t headroom) {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    if (!(statm >> pages) || ::getrlimit(RLIMIT_AS, &saved) != 0) return;
    rlimit lower = saved;
    lower.rlim_cur = static_cast<rlim_t>(pages * static_cast<std::size_t>(::sysconf(_SC_PAGE_SIZE)) + headroom);
    if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < lower.rlim_cur) return;
    set = ::setrlimit(RLIMIT_AS, &lower) == 0;
  }
  ~AddressSpaceLimit() {
    if (set) ::setrlimit(RLIMIT_AS, &saved);
  }
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LOCKSTEP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOCKSTEP_TEST_SANITIZED 1
#endif
#endif

TEST_CASE("100000 replica threads are an Error naming the replicas, not std::system_error") {
#if defined(LOCKSTEP_TEST_SANITIZED)
  MESSAGE("skipped under a sanitizer, which needs more address space than the limit leaves");
#else
  std::string message;
  {
    const AddressSpaceLimit limit(std::size_t{256} << 20);
    REQUIRE(limit.set);
    try {
      Trainer<Mirrored, Adam> trainer{Mirrored{100000}};
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("not a lockstep::Error: ") + e.what();
    }
  }
  CHECK(message.find("replica pool: could not start the thread of replica") != std::string::npos);
  CHECK(message.find("of 100000") != std::string::npos);
  CHECK(message.find("use fewer replicas") != std::string::npos);
  // The pool is usable again afterwards: the threads it had made were stopped.
  Trainer<Mirrored, Adam> fine{Mirrored{2}};
  CHECK(fine.replicas() == 2);
#endif
}

TEST_CASE("a batch whose buffers exceed the memory is an Error naming the bytes, before any allocation") {
  // A batch size beyond the data set is one batch of the whole set, so the
  // buffers that do not fit need rows that exist: 2^20 samples of a layer
  // 2^18 wide are over 1 TB of activations at any batch size above 2^19.
  using Wide = Sequential<Input<1>, Dense<1 << 18, Relu>, Dense<3>>;
  const std::size_t samples = std::size_t{1} << 20;
  const Dataset data(std::vector<float>(samples, 0.5f), 1, std::vector<std::int32_t>(samples, 0));
  Wide model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  FitOptions options = testing::quiet_fit(std::size_t{1} << 50, 1);
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options),
                       doctest::Contains("fit: a batch of 524288 rows per replica (the batch size, or the data set's "
                                         "samples if fewer, over 2 replicas) needs "),
                       Error);
  try {
    trainer.fit(model, data, options);
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find(" bytes (") != std::string::npos);
    CHECK(what.find("of memory; use a smaller batch size") != std::string::npos);
  }
  options.batch_size = std::numeric_limits<std::size_t>::max();  // no wrap-around to a small batch
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options), doctest::Contains("needs "), Error);
  CHECK_THROWS_WITH_AS(trainer.evaluate(model, data, std::size_t{1} << 50), doctest::Contains("evaluate: a batch of"),
                       Error);
  CHECK_THROWS_WITH_AS(trainer.predict(model, data, std::size_t{1} << 50), doctest::Contains("predict: a batch of"),
                       Error);
  // The trainer still trains.
  Model small{1};
  options.batch_size = 10;
  trainer.fit(small, testing::argmax_dataset(60, 6, 3, 1), options);
  CHECK(trainer.run_state().steps_done == 6);
}
