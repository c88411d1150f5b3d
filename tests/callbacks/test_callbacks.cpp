// Keras' built-in callbacks on host replicas: EarlyStopping (patience,
// baseline, restore_best_weights), ReduceLROnPlateau, LearningRateScheduler,
// TerminateOnNaN, CSVLogger and ModelCheckpoint, plus validation_split,
// validation_freq and summary().
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<8, Relu>, Dense<3>>;
using Mirrored = MirroredPolicy<HostAllReduce>;

const Dataset& data() {
  static const Dataset d = testing::argmax_dataset(60, 6, 3, 1);
  return d;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Each epoch's weights, as a callback sees them.
struct RecordWeights {
  std::vector<std::vector<float>>* weights;
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    weights->push_back(view.model().parameters());
  }
};

// Feeds EarlyStopping / ReduceLROnPlateau a given sequence of monitored values.
struct ScriptedLoss {
  std::vector<double> values;
  template <class Callback, class View>
  void run(Callback& cb, View& view) {
    Logs logs;
    logs.add("val_loss");
    for (std::size_t e = 0; e < values.size(); ++e) {
      logs.set(0, values[e]);
      cb.on_epoch_end(static_cast<int>(e), logs, view);
      if (view.stop_requested()) break;
    }
  }
};
}  // namespace

TEST_CASE("EarlyStopping stops after patience epochs without improvement and restores the best weights") {
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}, Adam{0.05}};
  FitOptions options = testing::quiet_fit(20, 30);
  options.validation_data = &data();
  EarlyStoppingOptions es;
  es.monitor = "val_loss";
  es.patience = 2;
  es.min_delta = 1.0;  // nothing improves by a whole nat after the first epoch: stops at epoch 2
  es.restore_best_weights = true;
  EarlyStopping stop(es);
  std::vector<std::vector<float>> weights;
  RecordWeights record{&weights};
  const History h = trainer.fit(model, data(), options, record, stop);
  CHECK(stop.stopped_epoch() == 2);
  CHECK(h["loss"].size() == 3);
  CHECK(stop.best_epoch() == 0);
  CHECK(model.parameters() == weights[0]);  // the best (first) epoch's weights, on the model...
  const Snapshot s = trainer.snapshot(model);
  CHECK(s.params == weights[0]);  // ...and on the replicas
}

TEST_CASE("EarlyStopping: mode, baseline and start_from_epoch as in Keras") {
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{1}};
  trainer.fit(model, data(), testing::quiet_fit(20, 1));  // a run to take a view of
  RunState run;
  auto& exec = trainer.executor();
  FitView<std::decay_t<decltype(exec)>, Adam, Model> view(exec, trainer.optimizer(), model, run, 20, 1);
  {
    EarlyStoppingOptions o;
    o.patience = 1;
    EarlyStopping es(o);
    es.on_train_begin(TrainInfo{});
    ScriptedLoss{{1.0, 0.9, 0.95, 0.8}}.run(es, view);
    CHECK(es.stopped_epoch() == 2);  // 0.95 does not improve on 0.9
  }
  {
    FitView<std::decay_t<decltype(exec)>, Adam, Model> v2(exec, trainer.optimizer(), model, run, 20, 1);
    EarlyStoppingOptions o;
    o.patience = 2;
    o.baseline = 0.5;  // improvements that do not beat the baseline do not reset the wait
    EarlyStopping es(o);
    es.on_train_begin(TrainInfo{});
    ScriptedLoss{{1.0, 0.9, 0.8, 0.7}}.run(es, v2);
    CHECK(es.stopped_epoch() == 1);  // the wait reached 2 at epoch 1 (tf.keras' rule)
  }
  {
    FitView<std::decay_t<decltype(exec)>, Adam, Model> v3(exec, trainer.optimizer(), model, run, 20, 1);
    EarlyStoppingOptions o;
    o.monitor = "val_accuracy";  // auto: maximised
    EarlyStopping es(o);
    es.on_train_begin(TrainInfo{});
    Logs logs;
    logs.add("val_accuracy");
    logs.set(0, 0.5);
    es.on_epoch_end(0, logs, v3);
    logs.set(0, 0.6);
    es.on_epoch_end(1, logs, v3);
    CHECK(!v3.stop_requested());
    logs.set(0, 0.4);
    es.on_epoch_end(2, logs, v3);
    CHECK(v3.stop_requested());
  }
  {
    FitView<std::decay_t<decltype(exec)>, Adam, Model> v4(exec, trainer.optimizer(), model, run, 20, 1);
    EarlyStoppingOptions o;
    o.start_from_epoch = 3;
    EarlyStopping es(o);
    es.on_train_begin(TrainInfo{});
    ScriptedLoss{{1.0, 2.0, 3.0, 4.0, 5.0, 6.0}}.run(es, v4);
    CHECK(es.stopped_epoch() == 4);  // epochs 0-2 are not watched; 3 is the first best
  }
  EarlyStoppingOptions negative;
  negative.patience = -1;
  CHECK_THROWS_WITH_AS(EarlyStopping{negative}, doctest::Contains("patience -1"), Error);
  // NaN compares false with everything: no epoch would ever improve.
  EarlyStoppingOptions nan_delta;
  nan_delta.min_delta = std::nan("");
  CHECK_THROWS_WITH_AS(EarlyStopping{nan_delta},
                       doctest::Contains("Monitor 'val_loss': min_delta nan, expected a finite number"), Error);
  EarlyStoppingOptions nan_baseline;
  nan_baseline.baseline = std::nan("");
  CHECK_THROWS_WITH_AS(EarlyStopping{nan_baseline},
                       doctest::Contains("EarlyStopping: baseline nan for monitor 'val_loss', expected a number"), Error);
  ReduceLROnPlateauOptions infinite_delta;
  infinite_delta.min_delta = INFINITY;
  CHECK_THROWS_WITH_AS(ReduceLROnPlateau{infinite_delta}, doctest::Contains("min_delta inf"), Error);
  ReduceLROnPlateauOptions infinite_floor;  // no rate is above it: the callback could never act
  infinite_floor.min_lr = INFINITY;
  CHECK_THROWS_WITH_AS(ReduceLROnPlateau{infinite_floor}, doctest::Contains("min_lr inf, expected a finite number >= 0"),
                       Error);
  ModelCheckpointOptions nan_threshold;
  nan_threshold.initial_value_threshold = std::nan("");
  CHECK_THROWS_WITH_AS(ModelCheckpoint("w.safetensors", nan_threshold),
                       doctest::Contains("ModelCheckpoint: initial_value_threshold nan for monitor"), Error);
  EarlyStoppingOptions typo;
  typo.monitor = "val_los";
  EarlyStopping es(typo);
  Logs logs;
  logs.add("val_loss");
  FitView<std::decay_t<decltype(exec)>, Adam, Model> v5(exec, trainer.optimizer(), model, run, 20, 1);
  CHECK_THROWS_WITH_AS(es.on_epoch_end(0, logs, v5), doctest::Contains("no value named 'val_los'; these logs have: val_loss"),
                       Error);
}

TEST_CASE("ReduceLROnPlateau multiplies the learning rate by factor after patience epochs, then cools down") {
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{1}, Adam{0.1}};
  trainer.fit(model, data(), testing::quiet_fit(20, 1));
  RunState run;
  auto& exec = trainer.executor();
  FitView<std::decay_t<decltype(exec)>, Adam, Model> view(exec, trainer.optimizer(), model, run, 20, 1);
  ReduceLROnPlateauOptions o;
  o.patience = 2;
  o.factor = 0.5;
  o.cooldown = 1;
  o.min_lr = 0.03;
  ReduceLROnPlateau plateau(o);
  ScriptedLoss{{1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}}.run(plateau, view);
  // epochs 1-2 wait -> 0.05; cooldown at 3; 4-5 wait -> 0.03 (min_lr); no lower.
  CHECK(trainer.optimizer().learning_rate == doctest::Approx(0.03));
  CHECK(plateau.reductions() == 2);
  ReduceLROnPlateauOptions too_big;
  too_big.factor = 1.5;
  CHECK_THROWS_WITH_AS(ReduceLROnPlateau{too_big}, doctest::Contains("factor 1.5"), Error);
}

TEST_CASE("LearningRateScheduler sets the rate each epoch - the same run as setting it by hand between fits") {
  FitOptions options = testing::quiet_fit(20, 3);
  options.shuffle = false;
  Model scheduled{2}, by_hand{2};
  Trainer<Mirrored, Sgd> a{Mirrored{2}, Sgd{0.1}}, b{Mirrored{2}, Sgd{0.1}};
  LearningRateScheduler schedule([](int epoch, double lr) { return epoch == 0 ? lr : lr * 0.5; });
  a.fit(scheduled, data(), options, schedule);
  options.epochs = 1;
  for (float lr : {0.1f, 0.05f, 0.025f}) {
    b.optimizer().learning_rate = lr;
    b.fit(by_hand, data(), options);
  }
  CHECK(scheduled.parameters() == by_hand.parameters());
  CHECK(a.optimizer().learning_rate == doctest::Approx(0.025));
  LearningRateScheduler bad([](int, double) { return -1.0; });
  Model m{2};
  CHECK_THROWS_WITH_AS(a.fit(m, data(), options, bad), doctest::Contains("learning rate -1"), Error);
}

TEST_CASE("TerminateOnNaN stops at the batch whose loss is not finite") {
  std::vector<float> x(60 * 6, 1.0f);
  // Sample 5's features are finite (a data set refuses NaN and infinity) but
  // so large that its logits, and so the loss of the first batch, are not.
  for (std::size_t j = 0; j < 6; ++j) x[5 * 6 + j] = std::numeric_limits<float>::max();
  std::vector<std::int32_t> y(60, 0);
  const Dataset bad(std::move(x), 6, std::move(y));
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  FitOptions options = testing::quiet_fit(10, 3);
  options.shuffle = false;
  TerminateOnNaN nan;
  trainer.fit(model, bad, options, nan);
  CHECK(nan.nan_epoch() == 0);
  CHECK(nan.nan_batch() == 0);
  CHECK(trainer.run_state().steps_done == 1);
}

TEST_CASE("CSVLogger writes Keras' columns, one flushed row per epoch, and appends") {
  testing::TempDir dir;
  const std::string path = dir.file("log.csv");
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  FitOptions options = testing::quiet_fit(20, 2);
  options.validation_data = &data();
  CSVLogger log(path);
  const History h = trainer.fit(model, data(), options, log);
  auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "epoch,accuracy,loss,val_accuracy,val_loss");
  CHECK(lines[2].rfind("1,", 0) == 0);
  CHECK(std::stod(lines[2].substr(lines[2].find(',', 2) + 1)) == h["loss"][1]);  // the exact value
  CSVLogger more(path, ";", true);
  trainer.fit(model, data(), options, more);
  lines = lines_of(path);
  REQUIRE(lines.size() == 5);  // no second header
  CHECK(lines[3].find(';') != std::string::npos);
  CSVLogger nowhere(dir.file("no/such/dir/log.csv"));
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options, nowhere), doctest::Contains("cannot create"), Error);
  // Written atomically: a fit that fails before its first row leaves the old file whole, not emptied.
  struct FailAtBatch1 {
    void on_batch_end(std::size_t step, const Logs&) { require(step != 1, "stop here"); }
  };
  const std::string before = read_regular_file(path, "the log");
  CSVLogger fresh(path);
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options, fresh, FailAtBatch1{}), doctest::Contains("stop here"),
                       Error);
  CHECK(read_regular_file(path, "the log") == before);
}

TEST_CASE("ModelCheckpoint fills Keras' fields, saves the best only where asked, and its checkpoint resumes") {
  testing::TempDir dir;
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  FitOptions options = testing::quiet_fit(20, 3);
  options.validation_data = &data();
  ModelCheckpointOptions weights_only;
  weights_only.save_weights_only = true;
  ModelCheckpoint every(dir.file("w-{epoch:02d}-{val_loss:.2f}.safetensors"), weights_only);
  const History h = trainer.fit(model, data(), options, every);
  char expected[64];
  std::snprintf(expected, sizeof expected, "w-03-%.2f.safetensors", h["val_loss"][2]);
  CHECK(every.last_path() == dir.file(expected));
  CHECK(every.saves() == 3);
  Model loaded{9};
  load_weights(loaded, every.last_path());
  CHECK(loaded.parameters() == model.parameters());

  ModelCheckpointOptions best;
  best.save_best_only = true;
  best.monitor = "loss";
  best.initial_value_threshold = 0.0;  // nothing beats a loss of 0
  ModelCheckpoint never(dir.file("best.safetensors"), best);
  trainer.fit(model, data(), options, never);
  CHECK(never.saves() == 0);

  ModelCheckpointOptions every_two;
  every_two.save_freq = 2;
  ModelCheckpoint batches(dir.file("b{batch}.safetensors"), every_two);
  trainer.fit(model, data(), testing::quiet_fit(20, 1), batches);  // 3 batches: saves after batch 2
  CHECK(batches.saves() == 1);
  CHECK(batches.last_path() == dir.file("b2.safetensors"));

  ModelCheckpoint broken(dir.file("w-{epoch.safetensors"));
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options, broken), doctest::Contains("without its '}'"), Error);
}

TEST_CASE("ModelCheckpoint into a folder that cannot be written is an Error when fit begins, before any batch") {
  testing::TempDir dir;
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  struct CountBatches {
    int* batches;
    void on_batch_end(std::size_t, const Logs&) { ++*batches; }
  };
  int batches = 0;
  ModelCheckpoint missing(dir.file("no/such/w-{epoch}.safetensors"));
  const std::string message = "its folder '" + dir.file("no/such") + "' does not exist";
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), testing::quiet_fit(20, 2), missing, CountBatches{&batches}),
                       doctest::Contains(message.c_str()), Error);
  CHECK(batches == 0);
  // A field in the folder's part: the folder is known only when saving, so the first save fails.
  ModelCheckpoint per_epoch(dir.file("e{epoch}/w.safetensors"));
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), testing::quiet_fit(20, 2), per_epoch, CountBatches{&batches}),
                       doctest::Contains("cannot create"), Error);
  CHECK(batches == 3);  // the first epoch's 3 batches, then the save at its end
}

TEST_CASE("validation_split holds out the last samples before shuffling - validation_freq validates every N epochs") {
  Model a{3}, b{3};
  Trainer<Mirrored, Adam> ta{Mirrored{2}}, tb{Mirrored{2}};
  FitOptions split = testing::quiet_fit(10, 4);
  split.validation_split = 0.25;
  split.validation_freq = 2;
  const History ha = ta.fit(a, data(), split);
  const Dataset train = data().slice(0, 45), held = data().slice(45, 15);
  FitOptions explicit_data = testing::quiet_fit(10, 4);
  explicit_data.validation_data = &held;
  explicit_data.validation_freq = 2;
  const History hb = tb.fit(b, train, explicit_data);
  CHECK(a.parameters() == b.parameters());
  REQUIRE(ha["val_loss"].size() == 4);
  CHECK(std::isnan(ha["val_loss"][0]));  // epoch 1: not validated
  CHECK(ha["val_loss"][1] == hb["val_loss"][1]);
  CHECK(std::isnan(ha["val_loss"][2]));
  CHECK(!std::isnan(ha["val_loss"][3]));
  split.validation_split = 1.0;
  CHECK_THROWS_WITH_AS(ta.fit(a, data(), split), doctest::Contains("validation_split 1, expected in [0, 1)"), Error);
  split.validation_split = 0.001;
  CHECK_THROWS_WITH_AS(ta.fit(a, data(), split), doctest::Contains("holds out 0"), Error);
  split.validation_split = 0.2;
  split.validation_freq = 0;
  CHECK_THROWS_WITH_AS(ta.fit(a, data(), split), doctest::Contains("validation_freq 0"), Error);
}

TEST_CASE("summary prints Keras' table") {
  std::ostringstream out;
  summary(Sequential<Input<784>, Dense<256>, BatchNormalization<>, Relu, Dropout<20>, Dense<10>>{}, out);
  const std::string s = out.str();
  CHECK(s.find(" dense (Dense)               (None, 256)               200960\n") != std::string::npos);
  CHECK(s.find(" batch_normalization (BatchN (None, 256)               1024\n") != std::string::npos);
  CHECK(s.find(" dense_1 (Dense)             (None, 10)                2570\n") != std::string::npos);
  CHECK(s.find("Total params: 204554 (799.04 KB)\n") != std::string::npos);
  CHECK(s.find("Trainable params: 204042 (797.04 KB)\n") != std::string::npos);
  CHECK(s.find("Non-trainable params: 512 (2.00 KB)\n") != std::string::npos);
  std::ostringstream image;
  summary(Sequential<Input<28, 28, 1>, Flatten, Dense<10>>{}, image);
  CHECK(image.str().find(" flatten (Flatten)           (None, 784)               0\n") != std::string::npos);
}

TEST_CASE("AdamW and scheduled optimizers train under every strategy - a constant schedule changes nothing") {
  const FitOptions options = testing::quiet_fit(16, 2);
  Model plain{4}, scheduled{4}, sharded{4};
  Trainer<Mirrored, Sgd> a{Mirrored{2}, Sgd{0.1}};
  using Constant = Scheduled<Sgd, PiecewiseConstantDecay>;
  const Constant constant{Sgd{0.5}, PiecewiseConstantDecay({}, {0.1})};
  Trainer<Mirrored, Constant> b{Mirrored{2}, constant};
  Trainer<CentralStoragePolicy, Constant> c{CentralStoragePolicy{3}, constant};
  a.fit(plain, data(), options);
  b.fit(scheduled, data(), options);
  c.fit(sharded, data(), options);
  CHECK(plain.parameters() == scheduled.parameters());  // bit for bit: 0.1 every step, whatever Sgd's own rate
  CHECK(testing::max_abs_difference(plain.parameters(), sharded.parameters()) <= 1e-5);

  Model w1{4}, w2{4}, adam{4};
  Trainer<Mirrored, AdamW> one{Mirrored{1}, AdamW{0.01, 0.1}}, two{Mirrored{2}, AdamW{0.01, 0.1}};
  Trainer<Mirrored, Adam> plain_adam{Mirrored{1}, Adam{0.01}};
  one.fit(w1, data(), options);
  two.fit(w2, data(), options);
  plain_adam.fit(adam, data(), options);
  CHECK(testing::max_abs_difference(w1.parameters(), w2.parameters()) <= 1e-5);
  CHECK(testing::max_abs_difference(w1.parameters(), adam.parameters()) > 1e-4);  // the decay acted
  CHECK(two.snapshot(w2).slots.size() == 2);
}

namespace {
// Keras' names for the batch hooks, and lockstep's, each called once per step.
struct CountsBatches {
  int begin = 0, end = 0, train_begin = 0, train_end = 0;
  void on_batch_begin(std::size_t) { ++begin; }
  void on_batch_end(std::size_t, const Logs&) { ++end; }
  void on_train_batch_begin(std::size_t) { ++train_begin; }
  template <class View>
  void on_train_batch_end(std::size_t step, const Logs&, View& view) {
    ++train_end;
    CHECK(view.run().step == step);
  }
};
}  // namespace

TEST_CASE("batch hooks under lockstep's and Keras' names are each called once per step") {
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  CountsBatches counts;
  trainer.fit(model, data(), testing::quiet_fit(20, 2), counts);
  CHECK(counts.begin == 6);
  CHECK(counts.end == 6);
  CHECK(counts.train_begin == 6);
  CHECK(counts.train_end == 6);
}

TEST_CASE("a parameters() or state() vector resized by the user is an Error at fit, evaluate and predict") {
  Model model{1};
  model.parameters().pop_back();
  Trainer<Mirrored, Adam> trainer{Mirrored{1}};
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), testing::quiet_fit(20, 1)),
                       doctest::Contains("the model holds 82 parameters and 0 state values, its layers have 83 and 0"),
                       Error);
  CHECK_THROWS_WITH_AS(trainer.evaluate(model, data()), doctest::Contains("evaluate: the model holds 82"), Error);
  CHECK_THROWS_WITH_AS(trainer.predict(model, data()), doctest::Contains("predict: the model holds 82"), Error);
}

TEST_CASE("GlobalClipNorm clips the all-reduced gradient alike on every replica, whatever the strategy") {
  const FitOptions options = testing::quiet_fit(16, 2);
  const GlobalClipNorm<Sgd> clipped{Sgd{0.5}, 0.05};
  const auto fit = [&](auto strategy) {
    Model model{6};
    Trainer<decltype(strategy), GlobalClipNorm<Sgd>> trainer{strategy, clipped};
    trainer.fit(model, data(), options);
    return model.parameters();
  };
  using Sharded = Trainer<Mirrored, GlobalClipNorm<Sgd>>::executor_type;
  static_assert(!Sharded::kShardedUpdate, "the whole gradient is needed: the mirrored step runs instead");
  const auto one = fit(Mirrored{1});
  CHECK(testing::max_abs_difference(one, fit(Mirrored{2})) <= 1e-5);
  CHECK(testing::max_abs_difference(one, fit(Mirrored{3})) <= 1e-5);
  CHECK(testing::max_abs_difference(one, fit(CentralStoragePolicy{2})) <= 1e-5);
  Model unclipped{6};
  Trainer<Mirrored, Sgd> plain{Mirrored{1}, Sgd{0.5}};
  plain.fit(unclipped, data(), options);
  CHECK(testing::max_abs_difference(one, unclipped.parameters()) > 1e-3);
}

TEST_CASE("ClipNorm clips each variable's gradient by its own norm, alike under every strategy") {
  const FitOptions options = testing::quiet_fit(16, 2);
  const ClipNorm<Sgd> clipped{Sgd{0.5}, 0.02};
  const auto fit = [&](auto strategy, auto opt) {
    Model model{6};
    Trainer<decltype(strategy), decltype(opt)> trainer{strategy, opt};
    trainer.fit(model, data(), options);
    return model.parameters();
  };
  const auto one = fit(Mirrored{1}, clipped);
  CHECK(testing::max_abs_difference(one, fit(Mirrored{2}, clipped)) <= 1e-5);
  CHECK(testing::max_abs_difference(one, fit(CentralStoragePolicy{3}, clipped)) <= 1e-5);
  // Per variable is not global: the same clip over the whole gradient trains otherwise.
  CHECK(testing::max_abs_difference(one, fit(Mirrored{1}, GlobalClipNorm<Sgd>{Sgd{0.5}, 0.02})) > 1e-4);
  // One Sgd step by hand: every variable's gradient has norm <= clip, so no parameter moves by more than lr * clip.
  Model start{6}, stepped{6};
  Trainer<Mirrored, ClipNorm<Sgd>> trainer{Mirrored{1}, clipped};
  trainer.fit(stepped, data(), testing::quiet_fit(60, 1));
  for (const VariableInfo& v : Model::variables()) {
    double moved = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double d = stepped.parameters()[v.offset + i] - start.parameters()[v.offset + i];
      moved += d * d;
    }
    CAPTURE(v.name);
    CHECK(std::sqrt(moved) <= 0.5 * 0.02 * (1 + 1e-5));
  }
}
