// The CUDA collectives (NcclAllReduce, HierarchicalCopyAllReduce,
// ReductionToOneDevice<Cuda>) against a host sum in double, with one host
// thread per replica as the trainer runs them: on every visible GPU, with
// several replicas sharing GPU 0 where the collective allows it, for sizes
// that leave parts empty, partial and uneven; plus NCCL's duplicate-device
// error, NCCL inside a captured CUDA graph, and abort() releasing replicas.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/collective/hierarchical_copy_all_reduce.cuh"
#include "lockstep/collective/nccl_all_reduce.cuh"
#include "lockstep/collective/reduction_to_one_device.cuh"
#include "lockstep/core/rng.hpp"
#include "gpu_count.hpp"

using namespace lockstep;

static_assert(NcclAllReduce::Group::kCapturable && NcclAllReduce::Group::kPartial);
static_assert(!HierarchicalCopyAllReduce::Group::kCapturable && !HierarchicalCopyAllReduce::Group::kPartial);
static_assert(!ReductionToOneDevice<Cuda>::Group::kCapturable && !ReductionToOneDevice<Cuda>::Group::kPartial);
static_assert(HierarchicalCopyAllReduce::Group::kCapturableAlone && ReductionToOneDevice<Cuda>::Group::kCapturableAlone);

namespace {

const std::size_t kCounts[] = {0, 1, 7, 1000, 1000003};

std::vector<int> visible_gpus() {
  int n = 0;
  LOCKSTEP_CUDA_CHECK(cudaGetDeviceCount(&n));
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  return devices;
}

// Runs job(r) on one new thread per replica with devices[r] current, as the
// trainer's replica threads are. A replica that throws calls group.abort() so
// the others leave their barriers; every replica's error comes back.
template <class Group, class Job>
std::vector<std::exception_ptr> run_replicas(Group& group, const std::vector<int>& devices, const Job& job) {
  std::vector<std::exception_ptr> errors(devices.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < devices.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        LOCKSTEP_CUDA_CHECK(cudaSetDevice(devices[r]));
        job(static_cast<int>(r));
      } catch (...) {
        errors[r] = std::current_exception();
        group.abort();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

template <class Group, class Job>
void on_replicas(Group& group, const std::vector<int>& devices, const Job& job) {
  for (const auto& error : run_replicas(group, devices, job))
    if (error) std::rethrow_exception(error);
}

float input(std::size_t replica, std::size_t i) { return Philox4x32::uniform(replica, 7, i) - 0.5f; }

// Each replica uploads its input, all-reduces it on its own stream and reads
// the result back. `in_replica_order`: the collective adds x_0 + x_1 + ... in
// float in that order, so its bits must equal the host's sum in that order.
template <class Group>
void check_sum(const std::vector<int>& devices, bool in_replica_order) {
  Group group(devices);
  const int n = static_cast<int>(devices.size());
  for (std::size_t count : kCounts) {
    CAPTURE(n);
    CAPTURE(count);
    std::vector<std::vector<float>> data(devices.size(), std::vector<float>(count));
    for (std::size_t r = 0; r < data.size(); ++r)
      for (std::size_t i = 0; i < count; ++i) data[r][i] = input(r, i);
    std::vector<std::vector<float>> result(devices.size(), std::vector<float>(count));
    on_replicas(group, devices, [&](int r) {
      const auto ri = static_cast<std::size_t>(r);
      gpu::Stream stream;
      gpu::DeviceBuffer<float> buffer(count);
      // DeviceBuffer zero-fills with cudaMemset, on the legacy default stream,
      // which a non-blocking stream does not wait for: let it finish first.
      LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());
      if (count) LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), data[ri].data(), count * sizeof(float),
                                                     cudaMemcpyHostToDevice, stream));
      group.all_reduce(r, buffer.data(), count, stream);
      if (count) LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(result[ri].data(), buffer.data(), count * sizeof(float),
                                                     cudaMemcpyDeviceToHost, stream));
      stream.synchronize();
    });
    // Tolerance: 1e-5 relative to the summands' magnitude sum_r |x_r,i|, which
    // bounds float rounding however much the terms cancel (N <= 8 adds give
    // at most ~N * 6e-8 of it).
    double worst = 0;
    bool identical = true, replica_order = true;
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      float ordered = data[0][i];
      for (std::size_t r = 0; r < data.size(); ++r) {
        exact += data[r][i];
        magnitude += std::abs(static_cast<double>(data[r][i]));
        if (r > 0) ordered += data[r][i];
      }
      for (std::size_t r = 0; r < result.size(); ++r) {
        worst = std::max(worst, std::abs(result[r][i] - exact) / std::max(magnitude, 1e-30));
        identical = identical && std::memcmp(&result[r][i], &result[0][i], sizeof(float)) == 0;
      }
      replica_order = replica_order && std::memcmp(&result[0][i], &ordered, sizeof(float)) == 0;
    }
    CHECK(worst <= 1e-5);
    CHECK(identical);  // every replica holds the same bits
    if (in_replica_order) CHECK(replica_order);
  }
}

}  // namespace

TEST_CASE("NcclAllReduce sums over every visible GPU") {
  check_sum<NcclAllReduce::Group>(visible_gpus(), false);
}

TEST_CASE("HierarchicalCopyAllReduce sums in replica order over every visible GPU") {
  check_sum<HierarchicalCopyAllReduce::Group>(visible_gpus(), true);
}

TEST_CASE("HierarchicalCopyAllReduce sums 3 replicas sharing GPU 0") {
  check_sum<HierarchicalCopyAllReduce::Group>({0, 0, 0}, true);
}

TEST_CASE("ReductionToOneDevice<Cuda> sums in replica order over every visible GPU") {
  check_sum<ReductionToOneDevice<Cuda>::Group>(visible_gpus(), true);
}

TEST_CASE("ReductionToOneDevice<Cuda> sums 3 replicas sharing GPU 0") {
  check_sum<ReductionToOneDevice<Cuda>::Group>({0, 0, 0}, true);
}

TEST_CASE("the copy collectives mix shared and distinct GPUs" * doctest::test_suite("multi_gpu")) {
  if (!testing::enough_gpus(2)) return;  // says so; ctest's "(2+ GPUs)" entry reports the skip
  check_sum<HierarchicalCopyAllReduce::Group>({0, 1, 0, 1, 1}, true);
  check_sum<ReductionToOneDevice<Cuda>::Group>({1, 0, 1}, true);
}

TEST_CASE("NcclAllReduce refuses a GPU given to two replicas") {
  CHECK_THROWS_WITH_AS(NcclAllReduce::Group({0, 0}), doctest::Contains("one replica per GPU"), Error);
  CHECK_THROWS_WITH_AS(NcclAllReduce::Group({0, 0}), doctest::Contains("GPU 0 is given to replicas 0 and 1"), Error);
}

TEST_CASE("NcclAllReduce called layer by layer equals one call, and replays from a CUDA graph") {
  const std::vector<int> devices = visible_gpus();
  NcclAllReduce::Group group(devices);
  // Small integers: every order of adding them is exact, so eager, partial
  // and captured calls must agree bit for bit whatever algorithm NCCL picks.
  const std::size_t count = 1000003, split = 4099;
  std::vector<std::vector<float>> eager(devices.size()), parts(devices.size()), replayed(devices.size());
  on_replicas(group, devices, [&](int r) {
    const auto ri = static_cast<std::size_t>(r);
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(static_cast<int>((i * 7 + ri) % 23) - 11);
    gpu::Stream stream;
    gpu::DeviceBuffer<float> a(count), b(count), c(count);
    LOCKSTEP_CUDA_CHECK(cudaDeviceSynchronize());  // their zero-fill, on the legacy stream, is done
    for (auto* buffer : {&a, &b, &c})
      LOCKSTEP_CUDA_CHECK(
          cudaMemcpyAsync(buffer->data(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream));
    stream.synchronize();  // pageable copies: the host vector must outlive them
    group.all_reduce(r, a.data(), count, stream);
    group.all_reduce(r, b.data(), split, stream);
    group.all_reduce(r, b.data() + split, count - split, stream);
    gpu::Graph graph;  // captured in cudaStreamCaptureModeThreadLocal, as NCCL asks of threaded programs
    graph.capture(stream, [&] { group.all_reduce(r, c.data(), count, stream); });
    graph.launch(stream);
    for (auto [out, buffer] : {std::pair{&eager, &a}, std::pair{&parts, &b}, std::pair{&replayed, &c}}) {
      (*out)[ri].resize(count);
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync((*out)[ri].data(), buffer->data(), count * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream));
    }
    stream.synchronize();
  });
  for (std::size_t r = 0; r < devices.size(); ++r) {
    CAPTURE(r);
    bool exact = true;
    for (std::size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (std::size_t q = 0; q < devices.size(); ++q) sum += static_cast<float>(static_cast<int>((i * 7 + q) % 23) - 11);
      exact = exact && eager[r][i] == sum;
    }
    CHECK(exact);
    CHECK(std::memcmp(eager[r].data(), parts[r].data(), count * sizeof(float)) == 0);
    CHECK(std::memcmp(eager[r].data(), replayed[r].data(), count * sizeof(float)) == 0);
  }
}

TEST_CASE("abort() releases copy-collective replicas waiting for one that failed") {
  for (int one_device = 0; one_device < 2; ++one_device) {
    CAPTURE(one_device);
    const std::vector<int> devices{0, 0, 0};
    auto check = [&](auto& group) {
      const auto errors = run_replicas(group, devices, [&](int r) {
        if (r == 1) fail("replica 1 failed on purpose");
        gpu::Stream stream;
        gpu::DeviceBuffer<float> buffer(100);
        group.all_reduce(r, buffer.data(), buffer.size(), stream);
        stream.synchronize();
      });
      for (int r = 0; r < 3; ++r) {
        CAPTURE(r);
        REQUIRE(errors[static_cast<std::size_t>(r)]);
        CHECK_THROWS_WITH_AS(std::rethrow_exception(errors[static_cast<std::size_t>(r)]),
                             doctest::Contains(r == 1 ? "failed on purpose" : "stopped at a barrier"), Error);
      }
    };
    if (one_device) {
      ReductionToOneDevice<Cuda>::Group group(devices);
      check(group);
    } else {
      HierarchicalCopyAllReduce::Group group(devices);
      check(group);
    }
  }
}
