// The deterministic mode across processes: MultiWorkerMirroredPolicy with
// Deterministic{12} under mpirun -np P (2 replicas each) ends with the bits
// of one process of MirroredPolicy with 4 replicas and of OneDevicePolicy
// under the same mode: parameters, moving statistics, optimizer slots and
// every logged value, with Dropout and synchronised BatchNormalization; and
// the same for the row-order scheme (Deterministic::in_row_order()).
#include <doctest/doctest.h>

#include <string>

#include "lockstep/mpi.hpp"
#include "train/determinism_helpers.hpp"

using namespace lockstep;
using namespace lockstep::testing::determinism;

namespace {
constexpr int kLocal = 2, kJobUnits = 12;  // 12 covers np 2 and 3 x 2 replicas, and 4 in one process

// np processes x 2 replicas, one process of 4 and one device, in `mode`
// (the job's units, or row order) on model M: every bit the same.
template <class M, class Optimizer>
void check_against_one_process(const Optimizer& opt, Deterministic mode) {
  using Multi = MultiWorkerMirroredPolicy<MpiAllReduce>;
  using Mirrored = MirroredPolicy<HostAllReduce>;
  const Outcome multi = train<Multi, Optimizer, M>(Multi{kLocal}, opt, mode);
  const Outcome four = train<Mirrored, Optimizer, M>(Mirrored{4}, opt, mode);
  const Outcome one = train<OneDevicePolicy, Optimizer, M>(OneDevicePolicy{}, opt, mode);
  CHECK(multi.snapshot.params != M{21}.parameters());
  MESSAGE(std::string(mode.row_order ? "row order" : "units")
          << ", np x 2 replicas against one process of 4: "
          << (first_difference(multi, four).empty() ? "every bit equal" : first_difference(multi, four) + " differ")
          << "; against one device: "
          << (first_difference(multi, one).empty() ? "every bit equal" : first_difference(multi, one) + " differ"));
  CHECK(first_difference(multi, four) == "");
  CHECK(first_difference(multi, one) == "");
}
}  // namespace

TEST_CASE("deterministic mode: P processes x 2 replicas give the bits of one process of 4 replicas (Adam)") {
  check_against_one_process<Model>(Adam{0.01}, Deterministic{kJobUnits});
}

TEST_CASE("deterministic mode: P processes x 2 replicas give the bits of one process of 4 replicas (Sgd)") {
  check_against_one_process<Model>(Sgd(0.05, 0.9), Deterministic{kJobUnits});
}

// The row-order scheme across processes: each process's rows exchanged, every
// replica's slice computed over the job's rows in global row order.
TEST_CASE("deterministic row order: P processes x 2 replicas give the bits of one process of 4 replicas (Adam)") {
  check_against_one_process<RowOrderModel>(Adam{0.01}, Deterministic::in_row_order());
}

TEST_CASE("deterministic row order: P processes x 2 replicas give the bits of one process of 4 replicas (Sgd)") {
  check_against_one_process<RowOrderModel>(Sgd(0.05, 0.9), Deterministic::in_row_order());
}
