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
  // Another GEMM library than the host's: close, not the same bits. Close is
  // measured with Sgd: Adam scales the rounding noise of gradients that are
  // zero in exact arithmetic (the bias of a ReLU unit active on every row of
  // a batch, right before BatchNormalization, which subtracts the mean) up to
  // steps of ~lr whose sign depends on the summation order, so with Adam the
  // GPU and the host part by ~1e-3 (1.9e-3 on an H200) with nothing wrong.
  const Sgd sgd(0.05, 0.9);
  const double sgd_apart = testing::max_abs_difference(train(OneDevice{1}, sgd, kGpuUnits).snapshot.params,
                                                       train(MirroredPolicy<HostAllReduce>{2}, sgd, kGpuUnits).snapshot.params);
  const double adam_apart = testing::max_abs_difference(
      one.snapshot.params, train(MirroredPolicy<HostAllReduce>{2}, Adam{0.01}, kGpuUnits).snapshot.params);
  MESSAGE("GPU against host, max abs parameter difference: Sgd ", sgd_apart, ", Adam ", adam_apart);
  CHECK(sgd_apart <= 1e-4);
  CHECK(adam_apart <= 1e-2);  // 6 Adam steps of 0.01: a broken GPU path lands far beyond
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
