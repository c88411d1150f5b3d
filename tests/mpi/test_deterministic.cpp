// The deterministic mode across processes: MultiWorkerMirroredPolicy with
// Deterministic{12} under mpirun -np P (2 replicas each) ends with the bits
// of one process of MirroredPolicy with 4 replicas and of OneDevicePolicy
// under the same mode: parameters, moving statistics, optimizer slots and
// every logged value, with Dropout and synchronised BatchNormalization.
#include <doctest/doctest.h>

#include "lockstep/mpi.hpp"
#include "train/determinism_helpers.hpp"

using namespace lockstep;
using namespace lockstep::testing::determinism;

namespace {
constexpr int kLocal = 2, kJobUnits = 12;  // 12 covers np 2 and 3 x 2 replicas, and 4 in one process

template <class Optimizer>
void check_against_one_process(const Optimizer& opt) {
  const Outcome multi = train(MultiWorkerMirroredPolicy<MpiAllReduce>{kLocal}, opt, kJobUnits);
  const Outcome four = train(MirroredPolicy<HostAllReduce>{4}, opt, kJobUnits);
  const Outcome one = train(OneDevicePolicy{}, opt, kJobUnits);
  CHECK(multi.snapshot.params != Model{21}.parameters());
  MESSAGE("np x 2 replicas against one process of 4: "
          << (first_difference(multi, four).empty() ? "every bit equal" : first_difference(multi, four) + " differ")
          << "; against one device: "
          << (first_difference(multi, one).empty() ? "every bit equal" : first_difference(multi, one) + " differ"));
  CHECK(first_difference(multi, four) == "");
  CHECK(first_difference(multi, one) == "");
}
}  // namespace

TEST_CASE("deterministic mode: P processes x 2 replicas give the bits of one process of 4 replicas (Adam)") {
  check_against_one_process(Adam{0.01});
}

TEST_CASE("deterministic mode: P processes x 2 replicas give the bits of one process of 4 replicas (Sgd)") {
  check_against_one_process(Sgd(0.05, 0.9));
}
