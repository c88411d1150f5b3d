// The contracts of the layer and callback redesign, checked end to end on
// host replicas: synchronised and per-replica BatchNormalization, Dropout,
// a learning rate changed from a callback, what a FitView sees at the end of
// an epoch, and snapshot / restore.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "test_helpers.hpp"

using namespace lockstep;

namespace {
using Mirrored = MirroredPolicy<HostAllReduce>;
using SyncBnModel = Sequential<Input<6>, Dense<5>, SyncBatchNormalization, Relu, Dense<3>>;
using LocalBnModel = Sequential<Input<6>, Dense<5>, BatchNormalization<>, Relu, Dense<3>>;

static_assert(SyncBnModel::kParams == LocalBnModel::kParams && SyncBnModel::kState == LocalBnModel::kState);
static_assert(SyncBnModel::kState == 10, "moving_mean (5) and moving_variance (5)");

// Fits a copy of `init` on `data` and returns the trained model.
template <class Strategy, class Optimizer, class Model>
Model fit_copy(const Strategy& strategy, const Optimizer& opt, const Model& init, const Dataset& data,
               const FitOptions& options) {
  Model model(init);
  Trainer<Strategy, Optimizer> trainer{strategy, opt};
  trainer.fit(model, data, options);
  return model;
}

FitOptions unshuffled(std::size_t batch, int epochs) {
  FitOptions options = testing::quiet_fit(batch, epochs);
  options.shuffle = false;
  return options;
}
}  // namespace

// ---------------------------------------------------------------------------
// 1. Synchronised BatchNormalization: N replicas train as one on the global batch.

TEST_CASE("SyncBatchNormalization - 1 to 4 replicas and CentralStoragePolicy equal one replica on the global batch") {
  // 18 samples at batch 8: steps of 8, 8 and 2; with 3 or 4 replicas the last
  // step leaves replicas without rows.
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const SyncBnModel init{11};
  const Sgd opt(0.1, 0.9, true);
  for (bool shuffle : {false, true}) {
    CAPTURE(shuffle);
    FitOptions options = testing::quiet_fit(8, 2);
    options.shuffle = shuffle;
    const SyncBnModel one = fit_copy(Mirrored{1}, opt, init, data, options);
    CHECK(one.parameters() != init.parameters());
    CHECK(one.state() != init.state());  // the moving statistics moved
    for (int n = 2; n <= 4; ++n) {
      CAPTURE(n);
      const SyncBnModel many = fit_copy(Mirrored{n}, opt, init, data, options);
      CHECK(testing::max_abs_difference(one.parameters(), many.parameters()) <= 1e-5);
      CHECK(testing::max_abs_difference(one.state(), many.state()) <= 1e-5);
    }
    const SyncBnModel central = fit_copy(CentralStoragePolicy{3}, opt, init, data, options);
    CHECK(testing::max_abs_difference(one.parameters(), central.parameters()) <= 1e-5);
    CHECK(testing::max_abs_difference(one.state(), central.state()) <= 1e-5);
  }
}

TEST_CASE("SyncBatchNormalization with Adam - 3 replicas equal one replica (but the bias before it)") {
  // The bias of the Dense layer right before BatchNormalization has a zero
  // gradient in exact arithmetic (normalising subtracts the batch mean), so
  // its float gradient is rounding noise, which Adam scales up to steps of
  // ~1e-3 whose sign depends on the summation order. It, and the moving mean
  // (which follows it), are left out; everything else must agree.
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const SyncBnModel init{11};
  const FitOptions options = testing::quiet_fit(8, 1);
  const SyncBnModel one = fit_copy(Mirrored{1}, Adam{0.01}, init, data, options);
  const SyncBnModel three = fit_copy(Mirrored{3}, Adam{0.01}, init, data, options);
  constexpr std::size_t kBias = 6 * 5, kBiasEnd = kBias + 5;  // Dense<5>'s b after its (6, 5) W
  auto without_bias = [&](const std::vector<float>& p) { return testing::without(p, kBias, kBiasEnd); };
  auto moving_variance = [](const std::vector<float>& s) { return std::vector<float>(s.begin() + 5, s.end()); };
  CHECK(testing::max_abs_difference(without_bias(one.parameters()), without_bias(three.parameters())) <= 1e-5);
  CHECK(testing::max_abs_difference(moving_variance(one.state()), moving_variance(three.state())) <= 1e-5);
  CHECK(testing::max_abs_difference(one.state(), three.state()) <= 1e-4);
}

// ---------------------------------------------------------------------------
// 2. Per-replica BatchNormalization<>: each replica normalises its own slice.

namespace {
// The moving statistics after one training step on the global batch
// data[0, count) split over `replicas` replicas, computed by hand in double
// from the first Dense layer's parameters: the mean over replicas with rows
// of their slices' mean and (biased) variance, Keras' momentum 0.99.
std::vector<double> per_replica_moving_stats(const std::vector<float>& params, const Dataset& data,
                                             std::size_t count, int replicas) {
  constexpr std::size_t kIn = 6, kUnits = 5;
  const double momentum = 0.99;
  std::vector<double> mean_sum(kUnits, 0.0), var_sum(kUnits, 0.0);
  int with_rows = 0;
  for (int r = 0; r < replicas; ++r) {
    const auto [lo, hi] = Loader::replica_slice(count, r, replicas);
    if (hi == lo) continue;
    ++with_rows;
    const double rows = static_cast<double>(hi - lo);
    for (std::size_t u = 0; u < kUnits; ++u) {
      std::vector<double> z;
      for (std::size_t s = lo; s < hi; ++s) {
        double v = params[kIn * kUnits + u];  // bias
        for (std::size_t i = 0; i < kIn; ++i) v += static_cast<double>(data.features(s)[i]) * params[i * kUnits + u];
        z.push_back(v);
      }
      double m = 0;
      for (double v : z) m += v;
      m /= rows;
      double q = 0;
      for (double v : z) q += (v - m) * (v - m);
      mean_sum[u] += m;
      var_sum[u] += q / rows;
    }
  }
  std::vector<double> out(2 * kUnits);
  for (std::size_t u = 0; u < kUnits; ++u) {
    out[u] = momentum * 0.0 + (1 - momentum) * mean_sum[u] / with_rows;
    out[kUnits + u] = momentum * 1.0 + (1 - momentum) * var_sum[u] / with_rows;
  }
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e30;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}
}  // namespace

TEST_CASE("BatchNormalization<> per replica - moving statistics after one step match a hand-computed reference") {
  const LocalBnModel init{7};
  const Sgd opt(0.1);
  SUBCASE("2 replicas, unequal slices of 3 and 4 rows") {
    const Dataset data = testing::argmax_dataset(7, 6, 3, 5);
    const LocalBnModel two = fit_copy(Mirrored{2}, opt, init, data, unshuffled(7, 1));
    const auto expected = per_replica_moving_stats(init.parameters(), data, 7, 2);
    CHECK(max_abs_difference(two.state(), expected) <= 1e-5);
    // The hand reference tells the variants apart: the global batch's statistics differ.
    CHECK(max_abs_difference(two.state(), per_replica_moving_stats(init.parameters(), data, 7, 1)) > 1e-4);

    // The synchronised layer, same parameters, same data: different statistics and weights.
    const SyncBnModel sync = fit_copy(Mirrored{2}, opt, SyncBnModel{7}, data, unshuffled(7, 1));
    REQUIRE(SyncBnModel{7}.parameters() == init.parameters());
    CHECK(max_abs_difference(sync.state(), per_replica_moving_stats(init.parameters(), data, 7, 1)) <= 1e-5);
    CHECK(testing::max_abs_difference(sync.state(), two.state()) > 1e-4);
    CHECK(testing::max_abs_difference(sync.parameters(), two.parameters()) > 1e-5);

    // One replica of BatchNormalization<> is the global batch: the same as the synchronised one.
    const LocalBnModel one = fit_copy(Mirrored{1}, opt, init, data, unshuffled(7, 1));
    CHECK(testing::max_abs_difference(one.state(), sync.state()) <= 1e-5);
    CHECK(testing::max_abs_difference(one.parameters(), sync.parameters()) <= 1e-5);
  }
  SUBCASE("3 replicas on a batch of 2: the empty replica does not count in the mean") {
    const Dataset data = testing::argmax_dataset(2, 6, 3, 6);
    const LocalBnModel three = fit_copy(Mirrored{3}, opt, init, data, unshuffled(2, 1));
    const auto expected = per_replica_moving_stats(init.parameters(), data, 2, 3);
    CHECK(max_abs_difference(three.state(), expected) <= 1e-5);
  }
}

TEST_CASE("BatchNormalization<> per replica - one Sgd step equals the sum of each slice's own step") {
  // With plain Sgd, one step moves the weights by -lr * sum over replicas of
  // grad(sum of the slice's losses) / count, and each slice's gradient is the
  // gradient one replica computes on that slice alone (rows_r / count times
  // its mean-loss gradient): a reference built from one-replica fits.
  const Dataset data = testing::argmax_dataset(7, 6, 3, 5);
  const LocalBnModel init{7};
  const Sgd opt(0.1);
  const std::size_t count = 7;
  for (int n : {2, 3}) {
    CAPTURE(n);
    const LocalBnModel many = fit_copy(Mirrored{n}, opt, init, data, unshuffled(count, 1));
    std::vector<double> expected(init.parameters().begin(), init.parameters().end());
    for (int r = 0; r < n; ++r) {
      const auto [lo, hi] = Loader::replica_slice(count, r, n);
      const Dataset slice = data.slice(lo, hi - lo);
      const LocalBnModel own = fit_copy(Mirrored{1}, opt, init, slice, unshuffled(hi - lo, 1));
      const double weight = static_cast<double>(hi - lo) / static_cast<double>(count);
      for (std::size_t i = 0; i < expected.size(); ++i)
        expected[i] += weight * (static_cast<double>(own.parameters()[i]) - init.parameters()[i]);
    }
    CHECK(max_abs_difference(many.parameters(), expected) <= 1e-5);
    CHECK(max_abs_difference(many.state(), per_replica_moving_stats(init.parameters(), data, count, n)) <= 1e-5);
  }
}

// ---------------------------------------------------------------------------
// 3. Dropout.

namespace {
using DropoutModel = Sequential<Input<6>, Dense<8, Relu>, Dropout<30>, Dense<3>>;
using PlainModel = Sequential<Input<6>, Dense<8, Relu>, Dense<3>>;
static_assert(DropoutModel::kParams == PlainModel::kParams && DropoutModel::kState == 0);
}  // namespace

TEST_CASE("Dropout - 1 - 2 and 3 replicas give the same weights after 3 steps; it changes training") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const DropoutModel init{11};
  const FitOptions options = testing::quiet_fit(8, 1);  // steps of 8, 8 and 2
  const DropoutModel one = fit_copy(Mirrored{1}, Adam{0.01}, init, data, options);
  CHECK(one.parameters() != init.parameters());
  for (int n : {2, 3}) {
    CAPTURE(n);
    const DropoutModel many = fit_copy(Mirrored{n}, Adam{0.01}, init, data, options);
    CHECK(testing::max_abs_difference(one.parameters(), many.parameters()) <= 1e-5);
  }
  const DropoutModel central = fit_copy(CentralStoragePolicy{3}, Adam{0.01}, init, data, options);
  CHECK(testing::max_abs_difference(one.parameters(), central.parameters()) <= 1e-5);

  // The same parameters without the Dropout layer train differently.
  const PlainModel plain = fit_copy(Mirrored{1}, Adam{0.01}, PlainModel{init.parameters()}, data, options);
  CHECK(testing::max_abs_difference(one.parameters(), plain.parameters()) > 1e-4);

  // Another seed gives other masks (the same batches: no shuffle).
  FitOptions reseeded = unshuffled(8, 1);
  const DropoutModel seed0 = fit_copy(Mirrored{1}, Adam{0.01}, init, data, reseeded);
  reseeded.seed = 99;
  const DropoutModel seed99 = fit_copy(Mirrored{1}, Adam{0.01}, init, data, reseeded);
  CHECK(testing::max_abs_difference(seed0.parameters(), seed99.parameters()) > 1e-5);
}

TEST_CASE("Dropout is the identity at inference - predict and evaluate equal the model without it") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const Dataset test = testing::argmax_dataset(23, 6, 3, 2);
  const DropoutModel trained = fit_copy(Mirrored{2}, Adam{0.01}, DropoutModel{3}, data, testing::quiet_fit(8, 2));
  const PlainModel plain{trained.parameters()};
  Trainer<Mirrored, Adam> a{Mirrored{2}}, b{Mirrored{2}};
  CHECK(a.predict(trained, test, 5) == b.predict(plain, test, 5));
  const Logs la = a.evaluate(trained, test, 5), lb = b.evaluate(plain, test, 5);
  CHECK(la["loss"] == lb["loss"]);
  CHECK(la["accuracy"] == lb["accuracy"]);
  // Repeated inference is deterministic (no mask at inference).
  CHECK(a.predict(trained, test, 5) == a.predict(trained, test, 5));
  CHECK(testing::max_abs_difference(a.predict(trained, test, 5), b.predict(plain, test, 7)) <= 1e-5);
}

// ---------------------------------------------------------------------------
// 4. A learning rate changed by a callback is used from the next step on.

namespace {
using SmallModel = Sequential<Input<6>, Dense<5, Relu>, Dense<3>>;

struct LowerRateAtEpoch {
  int epoch;
  float rate;
  template <class View>
  void on_epoch_begin(int e, const TrainInfo&, View& view) {
    if (e == epoch) view.optimizer().learning_rate = rate;
  }
};

template <class Strategy, class Model>
void check_rate_change(const Strategy& strategy, const Model& init) {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  // With the callback: epoch 2 of a 3-epoch fit runs at 0.001.
  Model with_callback(init);
  Trainer<Strategy, Adam> a{strategy, Adam{0.01}};
  LowerRateAtEpoch lower{2, 0.001f};
  a.fit(with_callback, data, unshuffled(8, 3), lower);
  CHECK(a.optimizer().learning_rate == 0.001f);  // the trainer's own optimizer was changed

  // By hand: 2 epochs, then the rate, then 1 more epoch on the same model object.
  Model by_hand(init);
  Trainer<Strategy, Adam> b{strategy, Adam{0.01}};
  b.fit(by_hand, data, unshuffled(8, 2));
  b.optimizer().learning_rate = 0.001f;
  b.fit(by_hand, data, unshuffled(8, 1));
  CHECK(with_callback.parameters() == by_hand.parameters());
  CHECK(with_callback.state() == by_hand.state());

  // Without the change the weights differ.
  Model unchanged(init);
  Trainer<Strategy, Adam> c{strategy, Adam{0.01}};
  c.fit(unchanged, data, unshuffled(8, 3));
  CHECK(testing::max_abs_difference(unchanged.parameters(), with_callback.parameters()) > 1e-5);
}
}  // namespace

TEST_CASE("a learning rate set by a callback at on_epoch_begin is used from the next step on - bit for bit") {
  SUBCASE("MirroredPolicy 1") { check_rate_change(Mirrored{1}, SmallModel{4}); }
  SUBCASE("MirroredPolicy 2 (sharded update)") { check_rate_change(Mirrored{2}, SmallModel{4}); }
  SUBCASE("MirroredPolicy 3") { check_rate_change(Mirrored{3}, SmallModel{4}); }
  SUBCASE("CentralStoragePolicy 2") { check_rate_change(CentralStoragePolicy{2}, SmallModel{4}); }
  SUBCASE("MirroredPolicy 2 with SyncBatchNormalization") { check_rate_change(Mirrored{2}, SyncBnModel{4}); }
}

namespace {
// A rate changed after a batch is used by the next step of the same epoch.
struct LowerRateAfterStep {
  std::size_t step;
  float rate;
  template <class View>
  void on_batch_end(std::size_t s, const Logs&, View& view) {
    if (s == step) view.optimizer().learning_rate = rate;
  }
};
}  // namespace

TEST_CASE("a learning rate set by a callback at on_batch_end is used from the next step - not the step before") {
  // Batch 6 over 18 samples: 3 steps per epoch. Changing the rate after step 0
  // of a 1-epoch fit equals a 6-sample first fit, then the rest with the new rate:
  // compared with a fit whose rate changes after step 1, it must differ.
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  SmallModel after0{4}, after1{4}, never{4};
  Trainer<Mirrored, Adam> a{Mirrored{2}, Adam{0.01}}, b{Mirrored{2}, Adam{0.01}}, c{Mirrored{2}, Adam{0.01}};
  LowerRateAfterStep at0{0, 0.001f}, at1{1, 0.001f}, at2{2, 0.001f};
  a.fit(after0, data, unshuffled(6, 1), at0);
  b.fit(after1, data, unshuffled(6, 1), at1);
  c.fit(never, data, unshuffled(6, 1), at2);  // after the last step: no effect on this fit
  SmallModel plain{4};
  Trainer<Mirrored, Adam> d{Mirrored{2}, Adam{0.01}};
  d.fit(plain, data, unshuffled(6, 1));
  CHECK(never.parameters() == plain.parameters());
  CHECK(after0.parameters() != after1.parameters());
  CHECK(after1.parameters() != plain.parameters());
}

// ---------------------------------------------------------------------------
// 5. What a callback sees at on_epoch_end.

namespace {
template <class Model>
struct RecordAtEpochEnd {
  const Model* model;  // the object passed to fit
  std::vector<std::vector<float>> by_reference, by_view, state_by_reference, state_by_view;
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    // Read the model object first: the trainer must have copied the epoch's weights already.
    by_reference.push_back(model->parameters());
    state_by_reference.push_back(model->state());
    by_view.push_back(view.model().parameters());
    state_by_view.push_back(view.model().state());
    CHECK(&view.model() == model);
  }
};

template <class Strategy, class Model>
void check_epoch_end_view(const Strategy& strategy, const Model& init) {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const FitOptions two = testing::quiet_fit(8, 2), one = testing::quiet_fit(8, 1);
  Model model(init);
  Trainer<Strategy, Adam> trainer{strategy, Adam{0.01}};
  RecordAtEpochEnd<Model> record{&model, {}, {}, {}, {}};
  trainer.fit(model, data, two, record);
  REQUIRE(record.by_view.size() == 2);
  REQUIRE(record.by_reference.size() == 2);

  const Model after_one = fit_copy(strategy, Adam{0.01}, init, data, one);
  CHECK(after_one.parameters() != init.parameters());
  CHECK(record.by_view[0] == after_one.parameters());
  CHECK(record.by_reference[0] == after_one.parameters());
  CHECK(record.state_by_view[0] == after_one.state());
  CHECK(record.state_by_reference[0] == after_one.state());
  // At the last epoch's end: the final weights.
  CHECK(record.by_view[1] == model.parameters());
  CHECK(record.by_reference[1] == model.parameters());
  CHECK(record.state_by_view[1] == model.state());
}
}  // namespace

TEST_CASE("on_epoch_end sees the epoch's weights through the view and in the model object - bit for bit") {
  SUBCASE("MirroredPolicy 2 (sharded update)") { check_epoch_end_view(Mirrored{2}, SyncBnModel{9}); }
  SUBCASE("MirroredPolicy 1") { check_epoch_end_view(Mirrored{1}, SyncBnModel{9}); }
  SUBCASE("CentralStoragePolicy 2") { check_epoch_end_view(CentralStoragePolicy{2}, SyncBnModel{9}); }
  SUBCASE("MirroredPolicy 3 - model without state") { check_epoch_end_view(Mirrored{3}, SmallModel{9}); }
}

namespace {
struct StopAfterFirstEpoch {
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    view.stop_training();
  }
};
}  // namespace

TEST_CASE("view.stop_training() ends fit after the epoch - the model holds that epoch's weights") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  SyncBnModel stopped{9};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}, Adam{0.01}};
  StopAfterFirstEpoch stop;
  const History h = trainer.fit(stopped, data, testing::quiet_fit(8, 5), stop);
  CHECK(h["loss"].size() == 1);
  const SyncBnModel one = fit_copy(Mirrored{2}, Adam{0.01}, SyncBnModel{9}, data, testing::quiet_fit(8, 1));
  CHECK(stopped.parameters() == one.parameters());
  CHECK(stopped.state() == one.state());
  CHECK(trainer.run_state().epoch == 1);  // one epoch ran
  CHECK(trainer.run_state().steps_done == 3);
}

TEST_CASE("the run state counts epochs and steps across fits and keeps the fit's seed") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);  // 3 steps per epoch at batch 8
  SyncBnModel model{9};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}, Adam{0.01}};
  FitOptions options = testing::quiet_fit(8, 2);
  options.seed = 42;
  trainer.fit(model, data, options);
  CHECK(trainer.run_state().epoch == 2);
  CHECK(trainer.run_state().steps_done == 6);
  CHECK(trainer.run_state().seed == 42);
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  CHECK(trainer.run_state().epoch == 1);
  CHECK(trainer.run_state().steps_done == 9);
}

// ---------------------------------------------------------------------------
// 6. snapshot / restore.

namespace {
template <class Strategy, class Model>
void check_snapshot_resume(const Strategy& strategy, const Model& init) {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);  // 3 steps per epoch at batch 8

  Model straight(init);
  Trainer<Strategy, Adam> a{strategy, Adam{0.01}};
  a.fit(straight, data, unshuffled(8, 2));

  Model first(init);
  Trainer<Strategy, Adam> b{strategy, Adam{0.01}};
  b.fit(first, data, unshuffled(8, 1));
  const Snapshot snap = b.snapshot(first);
  CHECK(snap.params == first.parameters());
  CHECK(snap.state == first.state());
  CHECK(snap.iterations == 3);
  REQUIRE(snap.slots.size() == 2);
  CHECK(snap.slots[0].name == std::string("m"));
  CHECK(snap.slots[1].name == std::string("v"));
  CHECK(snap.slots[0].values.size() == Model::kParams);
  CHECK(snap.slots[1].values.size() == Model::kParams);
  // Every part of v holds a squared gradient: a shard left out would be zero.
  std::size_t zero_v = 0;
  for (float v : snap.slots[1].values) zero_v += v == 0.0f;
  CHECK(zero_v < Model::kParams / 8);

  // A fresh trainer and a fresh model object resume from the snapshot.
  Model resumed{12345};
  Trainer<Strategy, Adam> c{strategy, Adam{0.01}};
  c.restore(resumed, snap);
  CHECK(resumed.parameters() == snap.params);
  CHECK(resumed.state() == snap.state);
  c.fit(resumed, data, unshuffled(8, 1));
  CHECK(resumed.parameters() == straight.parameters());
  CHECK(resumed.state() == straight.state());
  const Snapshot end = c.snapshot(resumed), reference = a.snapshot(straight);
  CHECK(end.iterations == 6);
  CHECK(reference.iterations == 6);
  REQUIRE(end.slots.size() == reference.slots.size());
  for (std::size_t i = 0; i < end.slots.size(); ++i) CHECK(end.slots[i].values == reference.slots[i].values);

  // Without the optimizer state the resumed run differs: restore is what made it equal.
  Model cold{12345};
  cold.parameters() = snap.params;
  cold.state() = snap.state;
  Trainer<Strategy, Adam> d{strategy, Adam{0.01}};
  d.fit(cold, data, unshuffled(8, 1));
  CHECK(cold.parameters() != straight.parameters());
}
}  // namespace

TEST_CASE("snapshot after 1 epoch - restore into a fresh trainer and model - 1 more epoch equals 2 epochs") {
  SUBCASE("MirroredPolicy 1") { check_snapshot_resume(Mirrored{1}, SyncBnModel{21}); }
  SUBCASE("MirroredPolicy 2") { check_snapshot_resume(Mirrored{2}, SyncBnModel{21}); }
  SUBCASE("MirroredPolicy 3") { check_snapshot_resume(Mirrored{3}, SyncBnModel{21}); }
  SUBCASE("CentralStoragePolicy 2") { check_snapshot_resume(CentralStoragePolicy{2}, SyncBnModel{21}); }
  SUBCASE("MirroredPolicy 2 - per-replica BatchNormalization") {
    check_snapshot_resume(Mirrored{2}, LocalBnModel{21});
  }
}

namespace {
struct TakeSnapshot {
  std::vector<Snapshot> taken;
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    taken.push_back(view.snapshot());
    CHECK(view.run().steps_done == 3 * taken.size());
  }
};
}  // namespace

TEST_CASE("a snapshot taken through the view at on_epoch_end equals the trainer's after a 1-epoch fit") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  for (int n : {1, 2, 3}) {
    CAPTURE(n);
    SyncBnModel model{5}, one{5};
    Trainer<Mirrored, Adam> a{Mirrored{n}, Adam{0.01}}, b{Mirrored{n}, Adam{0.01}};
    TakeSnapshot take;
    a.fit(model, data, unshuffled(8, 2), take);
    b.fit(one, data, unshuffled(8, 1));
    const Snapshot expected = b.snapshot(one);
    REQUIRE(take.taken.size() == 2);
    CHECK(take.taken[0].params == expected.params);
    CHECK(take.taken[0].state == expected.state);
    CHECK(take.taken[0].iterations == expected.iterations);
    REQUIRE(take.taken[0].slots.size() == expected.slots.size());
    for (std::size_t i = 0; i < expected.slots.size(); ++i)
      CHECK(take.taken[0].slots[i].values == expected.slots[i].values);
  }
}

TEST_CASE("snapshot of a model this trainer has not trained is an Error") {
  SmallModel model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  CHECK_THROWS_AS(trainer.snapshot(model), Error);
}

TEST_CASE("a snapshot is the same whatever the strategy - restored under another strategy it resumes the run") {
  // The sharded update's slots are gathered from every replica's shard: a
  // snapshot of MirroredPolicy 2 resumes under CentralStoragePolicy 2 (the
  // same bits per step), and one of MirroredPolicy 3 under one replica.
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  SUBCASE("MirroredPolicy 2 -> CentralStoragePolicy 2 - bit for bit") {
    SmallModel straight{8}, first{8}, resumed{1};
    Trainer<CentralStoragePolicy, Adam> a{CentralStoragePolicy{2}, Adam{0.01}}, c{CentralStoragePolicy{2}, Adam{0.01}};
    Trainer<Mirrored, Adam> b{Mirrored{2}, Adam{0.01}};
    a.fit(straight, data, unshuffled(8, 2));
    b.fit(first, data, unshuffled(8, 1));
    c.restore(resumed, b.snapshot(first));
    c.fit(resumed, data, unshuffled(8, 1));
    CHECK(resumed.parameters() == straight.parameters());
  }
  SUBCASE("MirroredPolicy 3 -> MirroredPolicy 1") {
    SmallModel straight{8}, first{8}, resumed{1};
    Trainer<Mirrored, Adam> a{Mirrored{1}, Adam{0.01}}, b{Mirrored{3}, Adam{0.01}}, c{Mirrored{1}, Adam{0.01}};
    a.fit(straight, data, unshuffled(8, 2));
    b.fit(first, data, unshuffled(8, 1));
    c.restore(resumed, b.snapshot(first));
    c.fit(resumed, data, unshuffled(8, 1));
    CHECK(testing::max_abs_difference(resumed.parameters(), straight.parameters()) <= 1e-5);
  }
}

TEST_CASE("restore of a snapshot of another model's size is an Error") {
  SmallModel small{1};
  SyncBnModel other{1};
  Trainer<Mirrored, Adam> a{Mirrored{1}}, b{Mirrored{1}};
  a.fit(small, testing::argmax_dataset(8, 6, 3, 1), unshuffled(8, 1));
  const Snapshot snap = a.snapshot(small);
  CHECK_THROWS_AS(b.restore(other, snap), Error);
}
