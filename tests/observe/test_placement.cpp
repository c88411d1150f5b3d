// The device placement log (lockstep::log_device_placement): what fit prints
// once at its start for each strategy, and nothing when the switch is off.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "lockstep/lockstep.hpp"
#include "lockstep/observe/placement.hpp"
#include "lockstep/strategy/profiled.hpp"
#include "lockstep/train/placement_log.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;  // 35 + 18 = 53 parameters

// Turns the log on into a string for one scope, and off again after it.
class CapturedLog {
 public:
  CapturedLog() { log_device_placement(true, &out_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  ~CapturedLog() { log_device_placement(false); }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// The log of one fit of `trainer`, one line per entry.
template <class Trainer>
std::vector<std::string> fit_and_log(Trainer& trainer) {
  const Dataset data = testing::argmax_dataset(16, 6, 3, 1);
  Model model{3};
  CapturedLog log;
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  MESSAGE(log.text());
  return log.lines();
}

bool has(const std::string& line, const char* part) { return line.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("the placement switch is off by default and toggles") {
  CHECK_FALSE(logging_device_placement());
  log_device_placement(true);
  CHECK(logging_device_placement());
  log_device_placement(false);
  CHECK_FALSE(logging_device_placement());
}

TEST_CASE("nothing is printed while the log is off") {
  std::ostringstream out;
  log_device_placement(false, &out);
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  const Dataset data = testing::argmax_dataset(16, 6, 3, 1);
  Model model{3};
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  CHECK(out.str().empty());
  log_device_placement(false);
}

TEST_CASE("OneDevicePolicy: one replica on device CPU:0, nothing to combine") {
  Trainer<OneDevicePolicy, Adam> trainer;
  const auto lines = fit_and_log(trainer);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "placement: strategy OneDevicePolicy, 1 replica in 1 process; variables on the one replica, "
                    "optimizer state with them");
  CHECK(lines[1] == "placement: gradients 53 floats (212 bytes) + 2 statistics, used as computed: 1 replica, nothing "
                    "for HostAllReduce to combine");
  CHECK(lines[2].rfind("placement: /job:worker/replica:0/task:0/device:CPU:0 -> thread ", 0) == 0);
  CHECK(has(lines[2], " on host \""));
  CHECK(has(lines[2], ", core "));
  CHECK(has(lines[2], "(pinned: "));
}

TEST_CASE("MirroredPolicy<HostAllReduce> with 2 replicas: the sharded update, two CPU devices") {
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  const auto lines = fit_and_log(trainer);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "placement: strategy MirroredPolicy<HostAllReduce>, 2 replicas in 1 process; variables shared: "
                    "one copy in host memory that every replica computes with, optimizer state sharded over 2 "
                    "replicas (each updates its chunk)");
  // 53 + 2 = 55 floats: 4 lines of 16, cut 2 + 2.
  CHECK(lines[1] == "placement: gradients 53 floats (212 bytes) + 2 statistics, reduced shard by shard into the "
                    "update by HostAllReduce: reduce-scatter in shared memory over 2 replicas in 2 chunks of up to 32 "
                    "floats (whole 64-byte lines), each summed in replica order by one replica, then the optimizer "
                    "applied by that replica to its chunk of the shared variables, nothing gathered; 2 barriers");
  CHECK(lines[2].rfind("placement: /job:worker/replica:0/task:0/device:CPU:0 -> thread ", 0) == 0);
  CHECK(lines[3].rfind("placement: /job:worker/replica:0/task:0/device:CPU:1 -> thread ", 0) == 0);
  // Two threads: the replica threads are distinct.
  const auto thread_of = [](const std::string& line) {
    const std::size_t at = line.find("thread ") + 7;
    return line.substr(at, line.find(' ', at) - at);
  };
  CHECK(thread_of(lines[2]) != thread_of(lines[3]));
}

TEST_CASE("the mirrored step: variables and optimizer state mirrored, all-reduced") {
  // GlobalClipNorm needs the whole gradient, so the host takes the mirrored step.
  using Strategy = MirroredPolicy<HostAllReduce>;
  Trainer<Strategy, GlobalClipNorm<Adam>> trainer{Strategy{2}, GlobalClipNorm<Adam>{Adam{}, 1.0}};
  const auto lines = fit_and_log(trainer);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "placement: strategy MirroredPolicy<HostAllReduce>, 2 replicas in 1 process; variables mirrored "
                    "on every replica, optimizer state mirrored on every replica");
  CHECK(has(lines[1], "all-reduced by HostAllReduce: reduce-scatter in shared memory over 2 replicas in 2 chunks"));
  CHECK(has(lines[1], "then all-gather folded in"));
}

TEST_CASE("MirroredPolicy<ReductionToOneDevice<Host>>: summed onto replica 0, then copied") {
  using Strategy = MirroredPolicy<ReductionToOneDevice<Host>>;
  Trainer<Strategy, Adam> trainer{Strategy{3}};
  const auto lines = fit_and_log(trainer);
  REQUIRE(lines.size() == 5);
  CHECK(has(lines[0], "strategy MirroredPolicy<ReductionToOneDevice>, 3 replicas in 1 process; variables mirrored"));
  CHECK(has(lines[1], "all-reduced by ReductionToOneDevice: every replica's buffer summed onto replica 0's in replica "
                      "order (replica 0 does all 2 adds per float), then copied to every replica"));
  CHECK(has(lines[4], "/device:CPU:2 -> thread "));
}

TEST_CASE("CentralStoragePolicy: variables and optimizer state central on replica 0") {
  Trainer<CentralStoragePolicy, Adam> trainer{CentralStoragePolicy{2}};
  const auto lines = fit_and_log(trainer);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "placement: strategy CentralStoragePolicy, 2 replicas in 1 process; variables central on replica "
                    "0 (task 0), which the other replicas read in shared memory, optimizer state central on replica 0");
  CHECK(has(lines[1], "reduced onto replica 0 by HostAllReduce: reduce-scatter"));
  CHECK(has(lines[1], "then written into replica 0's buffer only"));
  CHECK(has(lines[3], "/job:worker/replica:0/task:0/device:CPU:1 -> "));
}

TEST_CASE("the log is printed once per fit, at its start, also with validation_split") {
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  const Dataset data = testing::argmax_dataset(20, 6, 3, 1);
  Model model{3};
  CapturedLog log;
  FitOptions options = testing::quiet_fit(8, 2);
  options.validation_split = 0.2;
  trainer.fit(model, data, options);
  const auto lines = log.lines();
  CHECK(lines.size() == 4);
  trainer.fit(model, data, options);
  CHECK(log.lines().size() == 8);
}

TEST_CASE("a replica line names a GPU, its compute capability, memory and PCI bus") {
  observe::ReplicaPlacement p;
  p.process = 1;
  p.gpu = true;
  p.device_index = 3;
  p.host = "node7";
  p.thread = 4242;
  p.gpu_name = "NVIDIA H200";
  p.compute_capability = "9.0";
  p.pci_bus_id = "0000:19:00.0";
  p.memory_bytes = std::size_t(150) << 30;
  CHECK(observe::replica_line(p) == "/job:worker/replica:0/task:1/device:GPU:3 -> NVIDIA H200 (compute 9.0, 150.0 "
                                    "GiB, PCI 0000:19:00.0) on host \"node7\", driven by thread 4242");
  observe::ReplicaPlacement cpu;
  cpu.replica = cpu.device_index = 1;
  cpu.host = "node7";
  cpu.thread = 7;
  cpu.core = 5;
  cpu.allowed_cores = 1;
  CHECK(observe::replica_line(cpu) ==
        "/job:worker/replica:0/task:0/device:CPU:1 -> thread 7 on host \"node7\", core 5 (pinned: yes)");
  cpu.allowed_cores = 4;
  CHECK(observe::replica_line(cpu) ==
        "/job:worker/replica:0/task:0/device:CPU:1 -> thread 7 on host \"node7\", core 5 (pinned: no, 4 cores allowed)");
}

TEST_CASE("each collective describes its algorithm for a buffer size") {
  // 1000 floats over 3 replicas: 63 lines of 16 cut 21 each, 336 floats.
  CHECK(has(HostAllReduce::describe(1000, 3), "3 chunks of up to 336 floats"));
  CHECK(HostAllReduce::describe(1000, 1) == "nothing to combine with 1 replica");
  CHECK(has(ReductionToOneDevice<Host>::describe(1000, 2, 1, CollectiveCall::kReduceToRoot), "onto replica 0's"));
  // Declared without CUDA: their words are plain C++.
  CHECK(has(HierarchicalCopyAllReduce::describe(1000, 2), "2 parts of up to 512 floats (multiples of 64)"));
  CHECK(has(NcclAllReduce::describe(1000, 2, 1), "ncclAllReduce in place over 2 GPUs"));
  CHECK(has(NcclAllReduce::describe(1000, 2, 3), "over 6 GPUs (2 in each of 3 processes)"));
  CHECK(has(ReductionToOneDevice<Cuda>::describe(1000, 2), "onto replica 0's GPU"));
}

TEST_CASE("the strategy's title names its collective, and Profiled around it") {
  CHECK(detail::strategy_title<MirroredPolicy<HostAllReduce>>::get() == "MirroredPolicy<HostAllReduce>");
  CHECK(detail::strategy_title<CentralStoragePolicy>::get() == "CentralStoragePolicy");
  CHECK(detail::strategy_title<OneDevicePolicy>::get() == "OneDevicePolicy");
  CHECK(detail::strategy_title<Profiled<MirroredPolicy<HostAllReduce>>>::get() ==
        "Profiled<MirroredPolicy<HostAllReduce>>");
}
