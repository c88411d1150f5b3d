// The deterministic mode on GPUs (core/determinism.hpp): units as logical
// replicas on the GPUs, summed in unit order by ReductionToOneDevice or
// HierarchicalCopyAllReduce, cuDNN's deterministic algorithms. 1 and 2
// replicas (on one GPU, and on two where there are two), and two runs of
// the same, give the same bits; NCCL is refused with a sentence; the result
// stays within float rounding of the host's deterministic mode.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gpu_count.hpp"
#include "lockstep/cuda.hpp"
#include "train/determinism_helpers.hpp"

using namespace lockstep;
using namespace lockstep::testing::determinism;

namespace {
constexpr int kGpuUnits = 4;
using OneDevice = MirroredPolicy<ReductionToOneDevice<>>;
using Hierarchical = MirroredPolicy<HierarchicalCopyAllReduce>;
}  // namespace

TEST_CASE("deterministic mode on a GPU: 1 and 2 replicas, two runs and both collectives give the same bits") {
  const Outcome one = train(OneDevice{1}, Adam{0.01}, kGpuUnits);
  CHECK(one.snapshot.params != Model{21}.parameters());
  CHECK(first_difference(one, train(OneDevice{1}, Adam{0.01}, kGpuUnits)) == "");  // run to run
  CHECK(first_difference(one, train(OneDevice{std::vector<int>{0, 0}}, Adam{0.01}, kGpuUnits)) == "");
  CHECK(first_difference(one, train(Hierarchical{std::vector<int>{0, 0}}, Adam{0.01}, kGpuUnits)) == "");
  // Another GEMM library than the host's: close, not the same bits.
  const Outcome host = train(MirroredPolicy<HostAllReduce>{2}, Adam{0.01}, kGpuUnits);
  CHECK(testing::max_abs_difference(one.snapshot.params, host.snapshot.params) <= 1e-3);
}

TEST_CASE("deterministic mode on two GPUs gives the bits of one" * doctest::test_suite("multi_gpu")) {
  if (!testing::enough_gpus(2)) return;
  const Outcome one = train(OneDevice{1}, Sgd(0.05, 0.9), kGpuUnits);
  CHECK(first_difference(one, train(OneDevice{2}, Sgd(0.05, 0.9), kGpuUnits)) == "");
  CHECK(first_difference(one, train(Hierarchical{2}, Sgd(0.05, 0.9), kGpuUnits)) == "");
}

TEST_CASE("deterministic mode with NCCL is an Error that names the collectives to use") {
  CHECK_THROWS_WITH_AS(train(MirroredPolicy<NcclAllReduce>{1}, Adam{0.01}, kGpuUnits),
                       doctest::Contains("use MirroredPolicy<ReductionToOneDevice<>> or "
                                         "MirroredPolicy<HierarchicalCopyAllReduce>"),
                       Error);
}
