// The deterministic mode (core/determinism.hpp): with Deterministic{24},
// 1, 2, 3, 4, 6 and 8 host replicas and OneDevicePolicy end with the same
// bits - parameters, BatchNormalization's moving statistics, the optimizer's
// slots and step count, every logged value - with Dropout and synchronised
// BatchNormalization in the model and a short last batch, for Adam and Sgd;
// and the mode stays within 1e-5 of the default mode, which itself keeps its
// 1e-5 agreement across replica counts.
#include <doctest/doctest.h>

#include <string>

#include "determinism_helpers.hpp"

using namespace lockstep;

namespace {
using namespace testing::determinism;

// One device, then 1, 2, 3, 4, 6 and 8 replicas and central storage, in
// `mode` (24 units, or row order) on model M: every bit the same.
template <class M, class Optimizer>
void check_every_replica_count(const Optimizer& opt, Deterministic mode) {
  const std::string scheme = mode.row_order ? "row order" : "24 units";
  const Outcome one = train<OneDevicePolicy, Optimizer, M>(OneDevicePolicy{}, opt, mode);
  REQUIRE(one.snapshot.params != M{21}.parameters());  // training moved the weights
  REQUIRE(one.history["loss"].size() == 2);
  REQUIRE(one.history["val_loss"].size() == 2);  // validation is logged, and compared, too
  for (int replicas : {1, 2, 3, 4, 6, 8}) {
    CAPTURE(replicas);
    const Outcome many =
        train<MirroredPolicy<HostAllReduce>, Optimizer, M>(MirroredPolicy<HostAllReduce>{replicas}, opt, mode);
    const std::string differs = first_difference(one, many);
    MESSAGE(scheme << ", " << replicas << " replicas against one device: "
                   << (differs.empty() ? "every bit equal" : differs + " differ") << " ("
                   << many.snapshot.params.size() << " parameters, " << many.snapshot.state.size() << " state values, "
                   << many.snapshot.slots.size() << " optimizer slots, loss " << many.history["loss"].back() << ")");
    CHECK(differs == "");
  }
  // The central update sums the same units (or slices) in the same order.
  CHECK(first_difference(one, train<CentralStoragePolicy, Optimizer, M>(CentralStoragePolicy{3}, opt, mode)) == "");
}
}  // namespace

TEST_CASE("deterministic mode: 1, 2, 3, 4, 6 and 8 replicas and one device give the same bits (Adam)") {
  check_every_replica_count<Model>(Adam{0.01}, Deterministic{kUnits});
}

TEST_CASE("deterministic mode: 1, 2, 3, 4, 6 and 8 replicas and one device give the same bits (Sgd, momentum)") {
  check_every_replica_count<Model>(Sgd(0.05, 0.9), Deterministic{kUnits});
}

TEST_CASE("deterministic mode stays within 1e-5 of the default mode, which keeps its own 1e-5 agreement") {
  // Dropout's masks follow the global row in both modes; synchronised
  // BatchNormalization sees the whole batch in both. Sgd, not Adam: the
  // bias of the Dense before BatchNormalization has a gradient of exactly 0
  // in exact arithmetic, and rounding noise of 1e-9 there becomes an Adam
  // step of lr * g / (|g| + epsilon), 1e-4, whatever the mode.
  using Mirrored = MirroredPolicy<HostAllReduce>;
  const Sgd opt(0.05, 0.9);
  const Outcome plain1 = train<Mirrored, Sgd, SyncModel>(Mirrored{1}, opt, 0);
  const Outcome plain3 = train<Mirrored, Sgd, SyncModel>(Mirrored{3}, opt, 0);
  const Outcome fixed = train<Mirrored, Sgd, SyncModel>(Mirrored{2}, opt, kUnits);
  MESSAGE("default mode, 1 against 3 replicas: max |difference| "
          << testing::max_abs_difference(plain1.snapshot.params, plain3.snapshot.params)
          << "; deterministic (2 replicas) against default (1 replica): "
          << testing::max_abs_difference(plain1.snapshot.params, fixed.snapshot.params));
  CHECK(testing::max_abs_difference(plain1.snapshot.params, plain3.snapshot.params) <= 1e-5);
  // The default mode with 3 replicas sums in another order: not the same bits.
  CHECK(testing::max_abs_difference(plain1.snapshot.params, fixed.snapshot.params) > 0);
  CHECK(testing::max_abs_difference(plain1.snapshot.params, fixed.snapshot.params) <= 1e-5);
  CHECK(testing::max_abs_difference(plain1.snapshot.state, fixed.snapshot.state) <= 1e-5);
}

TEST_CASE("deterministic mode: a trainer made later with another GEMM thread count does not change its bits") {
  // The later trainer sets the process's GEMM threads to every core; the
  // deterministic trainer's threads keep their own count of one.
  MirroredPolicy<HostAllReduce> strategy{2};
  strategy.set_deterministic(Deterministic{kUnits});
  Trainer<MirroredPolicy<HostAllReduce>, Adam> fixed{strategy, Adam{0.01}};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> later{MirroredPolicy<HostAllReduce>{1}, Adam{0.01}};
  Model model{21};
  fixed.fit(model, data_set(), options());
  CHECK(model.parameters() == train(OneDevicePolicy{}, Adam{0.01}, kUnits).snapshot.params);
  CHECK(later.replicas() == 1);
}

TEST_CASE("deterministic mode: a unit count that does not split over the replicas is an Error that says what to use") {
  MirroredPolicy<HostAllReduce> strategy{5};
  strategy.set_deterministic(Deterministic{24});
  try {
    Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{strategy, Adam{}};
    FAIL("expected an Error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "lockstep: Deterministic{24}: 24 units do not split evenly over 1 process x 5 replicas (5); choose a unit count that "
          "is a multiple of every replica count you run with (24 covers 1, 2, 3, 4, 6 and 8; 48 also covers 16)");
  }
  CHECK_THROWS_WITH_AS(strategy.set_deterministic(Deterministic{-3}),
                       doctest::Contains("Deterministic::units -3, expected 0 (off) or a unit count from 1 to 4096"),
                       Error);
}

// The row-order scheme: no units; the chain GEMM and every sum over rows in
// the global batch's row order (with synchronised BatchNormalization, fused
// with a Relu, and Dropout in the model).
TEST_CASE("deterministic row order: 1, 2, 3, 4, 6 and 8 replicas and one device give the same bits (Adam)") {
  check_every_replica_count<RowOrderModel>(Adam{0.01}, Deterministic::in_row_order());
}

TEST_CASE("deterministic row order: 1, 2, 3, 4, 6 and 8 replicas and one device give the same bits (Sgd, momentum)") {
  check_every_replica_count<RowOrderModel>(Sgd(0.05, 0.9), Deterministic::in_row_order());
}

TEST_CASE("deterministic row order: a layer whose layer below meets first skips its second meeting, same bits") {
  // Which layers skip it: those with a Dense, or a synchronised
  // BatchNormalization past the Relu fused into it, below.
  static_assert(RowOrderStack::below_meets_first<1>() && RowOrderStack::below_meets_first<5>());
  static_assert(RowOrderStack::below_meets_first<4>());  // layer 3 (Relu) is fused into layer 2
  static_assert(!RowOrderStack::below_meets_first<0>());  // nothing below the first layer
  static_assert(!RowOrderModel::below_meets_first<4>() && !RowOrderModel::below_meets_first<6>());  // Dropout, Relu
  static_assert(!Sequential<Input<4>, Dense<4>, BatchNormalization<>, Relu, Dense<2>>::below_meets_first<3>());
  check_every_replica_count<RowOrderStack>(Adam{0.01}, Deterministic::in_row_order());
}

TEST_CASE("deterministic row order stays within 1e-5 of the default mode") {
  using Mirrored = MirroredPolicy<HostAllReduce>;
  const Sgd opt(0.05, 0.9);
  const Outcome plain = train<Mirrored, Sgd, RowOrderModel>(Mirrored{1}, opt, Deterministic{});
  const Outcome rows = train<Mirrored, Sgd, RowOrderModel>(Mirrored{3}, opt, Deterministic::in_row_order());
  const double gap = testing::max_abs_difference(plain.snapshot.params, rows.snapshot.params);
  MESSAGE("row order (3 replicas) against the default mode (1 replica): max |difference| " << gap);
  CHECK(gap <= 1e-5);
  CHECK(std::abs(plain.history["loss"].back() - rows.history["loss"].back()) <= 1e-5);
}

TEST_CASE("deterministic row order: a per-replica BatchNormalization is an Error that says what to use") {
  MirroredPolicy<HostAllReduce> strategy{2};
  strategy.set_deterministic(Deterministic::in_row_order());
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{strategy, Adam{}};
  Model model{21};  // the per-replica BatchNormalization: layer 4
  CHECK_THROWS_WITH_AS(trainer.fit(model, data_set(), options()),
                       "lockstep: Deterministic::in_row_order(): layer 4 (batch_normalization_1) takes sums over rows "
                       "that the row-order scheme does not run (it runs Dense, SyncBatchNormalization, activations, "
                       "Dropout, Flatten, Reshape, pooling and Softmax; a per-replica BatchNormalization's statistics "
                       "depend on the replica count); use Deterministic{units} (for example 24) for this model",
                       Error);
  CHECK_THROWS_WITH_AS(trainer.evaluate(model, data_set(), 32), doctest::Contains("layer 4 (batch_normalization_1)"),
                       Error);
  Deterministic both = Deterministic::in_row_order();
  both.units = 24;
  CHECK_THROWS_WITH_AS(strategy.set_deterministic(both),
                       doctest::Contains("units 24 and row_order both set, expected one scheme"), Error);
}
