// fit / evaluate / predict: learning, history, callbacks, optimizer state
// across fit calls, and the errors bad input gets.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<8>, Dense<16, Relu>, Dense<4>>;
using Strategy = MirroredPolicy<HostAllReduce>;

FitOptions quiet(int epochs, std::size_t batch) {
  FitOptions o;
  o.epochs = epochs;
  o.batch_size = batch;
  o.verbose = false;
  return o;
}

struct CountingCallback {
  int train_begin = 0, epoch_begin = 0, batches = 0, epochs = 0, train_end = 0;
  int stop_after = 1000;
  void on_train_begin(const TrainInfo& info) {
    ++train_begin;
    CHECK(info.replicas == 2);
  }
  void on_epoch_begin(int, const TrainInfo&) { ++epoch_begin; }
  void on_batch_end(std::size_t, const Logs& logs) {
    ++batches;
    CHECK(logs.contains("loss"));
  }
  bool on_epoch_end(int epoch, const Logs& logs) {
    ++epochs;
    CHECK(logs.contains("val_accuracy"));
    return epoch + 1 >= stop_after;
  }
  void on_train_end(const Logs&) { ++train_end; }
};
struct OnlyBatches {  // a callback with a single hook compiles too
  int batches = 0;
  void on_batch_end(std::size_t, const Logs&) { ++batches; }
};
}  // namespace

TEST_CASE("fit learns - records History and runs callbacks") {
  const Dataset train = testing::argmax_dataset(2000, 8, 4, 1);
  const Dataset val = testing::argmax_dataset(500, 8, 4, 2);
  Model model{0};
  Trainer<Strategy, Adam> trainer{Strategy{2}, Adam{0.01}};
  FitOptions options = quiet(5, 64);
  options.validation_data = &val;
  CountingCallback counter;
  OnlyBatches batches;
  const History h = trainer.fit(model, train, options, counter, batches);
  CHECK(h.epochs == 5);
  CHECK(h["loss"].back() < h["loss"].front());
  CHECK(h["val_accuracy"].back() > 0.8);
  CHECK(counter.train_begin == 1);
  CHECK(counter.epoch_begin == 5);
  CHECK(counter.batches == 5 * 32);  // ceil(2000 / 64) steps per epoch
  CHECK(counter.epochs == 5);
  CHECK(counter.train_end == 1);
  CHECK(batches.batches == 5 * 32);

  // evaluate on the validation data agrees with the last val_ entries.
  const Logs logs = trainer.evaluate(model, val, 100);
  CHECK(logs["loss"] == doctest::Approx(h["val_loss"].back()).epsilon(1e-5));
  CHECK(logs["accuracy"] == doctest::Approx(h["val_accuracy"].back()));

  // predict gives logits; the softmax model with the same parameters gives probabilities.
  const auto logits = trainer.predict(model, val);
  REQUIRE(logits.size() == val.size() * 4);
  const Model::with_softmax probs_model{model.parameters()};
  const auto probs = trainer.predict(probs_model, val);
  double correct = 0;
  for (std::size_t s = 0; s < val.size(); ++s) {
    const auto* row_logits = logits.data() + s * 4;
    const auto* row_probs = probs.data() + s * 4;
    double sum = 0;
    int best = 0;
    for (int j = 0; j < 4; ++j) {
      sum += row_probs[j];
      if (row_logits[j] > row_logits[best]) best = j;
    }
    CHECK(sum == doctest::Approx(1.0));
    correct += best == val.label(s);
  }
  CHECK(correct / static_cast<double>(val.size()) == doctest::Approx(logs["accuracy"]));
}

TEST_CASE("a callback returning true from on_epoch_end stops training") {
  const Dataset train = testing::argmax_dataset(100, 8, 4, 1);
  Model model{0};
  Trainer<Strategy, Adam> trainer{Strategy{2}};
  FitOptions options = quiet(10, 32);
  options.validation_data = &train;
  CountingCallback counter;
  counter.stop_after = 3;
  CHECK(trainer.fit(model, train, options, counter).epochs == 3);
}

TEST_CASE("optimizer state carries over between fit calls - as in Keras") {
  const Dataset train = testing::argmax_dataset(200, 8, 4, 1);
  FitOptions options = quiet(2, 50);
  options.shuffle = false;
  Model once{0}, twice{0};
  Trainer<Strategy, Adam> a{Strategy{2}}, b{Strategy{2}};
  a.fit(once, train, options);
  options.epochs = 1;
  b.fit(twice, train, options);
  b.fit(twice, train, options);
  CHECK(testing::max_abs_difference(once.parameters(), twice.parameters()) <= 1e-6);
}

TEST_CASE("bad input gets a lockstep::Error that names the value") {
  Model model{0};
  Trainer<Strategy, Adam> trainer{Strategy{2}};
  const Dataset good = testing::argmax_dataset(10, 8, 4, 1);
  CHECK_THROWS_WITH_AS(trainer.fit(model, good, quiet(1, 0)), doctest::Contains("batch size 0"), Error);

  std::vector<std::int32_t> labels(10, 1);
  labels[7] = 4;
  const Dataset bad_label(good.feature_data(), 8, labels);
  CHECK_THROWS_WITH_AS(trainer.fit(model, bad_label, quiet(1, 4)),
                       doctest::Contains("label 4 of sample 7 is outside [0, 4)"), Error);
  labels[7] = -1;
  CHECK_THROWS_AS(trainer.evaluate(model, Dataset(good.feature_data(), 8, labels)), Error);

  const Dataset wide = testing::argmax_dataset(10, 9, 4, 1);
  CHECK_THROWS_WITH_AS(trainer.fit(model, wide, quiet(1, 4)),
                       doctest::Contains("the data has 9 features per sample, the model's Input expects 8"), Error);
  CHECK_THROWS_WITH_AS(trainer.fit(model, Dataset{}, quiet(1, 4)), doctest::Contains("empty"), Error);
  CHECK_THROWS_WITH_AS(Strategy{0}, "lockstep: MirroredPolicy: 0 replicas, expected at least 1", Error);
  CHECK_THROWS_WITH_AS(Dataset(std::vector<float>(16), 8, std::vector<std::int32_t>(3)),
                       doctest::Contains("2 samples but 3 labels"), Error);
  // The trainer still works after the errors.
  CHECK(trainer.fit(model, good, quiet(1, 4)).epochs == 1);
}

TEST_CASE("a batch size beyond the data set is one batch of all of it, as in Keras - bit for bit") {
  const Dataset data = testing::argmax_dataset(10, 8, 4, 1);
  Model exact{3}, huge{3};
  Trainer<Strategy, Adam> a{Strategy{2}}, b{Strategy{2}};
  a.fit(exact, data, quiet(2, 10));
  b.fit(huge, data, quiet(2, std::numeric_limits<std::size_t>::max()));
  CHECK(b.run_state().steps_done == 2);  // one step an epoch
  CHECK(exact.parameters() == huge.parameters());
  CHECK(a.evaluate(exact, data, 10)["loss"] == b.evaluate(huge, data, std::size_t{1} << 40)["loss"]);
  CHECK(a.predict(exact, data, 10) == b.predict(huge, data, std::numeric_limits<std::size_t>::max()));
}

TEST_CASE("MeanSquaredError regression through the same trainer") {
  // y = 0.5 * (x0 - x1): a linear model learns it.
  const RegressionDataset data = testing::half_difference_dataset(256);
  using Linear1 = Sequential<Input<2>, Dense<1>>;
  Linear1 model{0};
  Trainer<Strategy, Adam, MeanSquaredError, Metrics<>> trainer{Strategy{2}, Adam{0.05}};
  BasicFitOptions<float> options;
  options.epochs = 60;
  options.batch_size = 32;
  options.verbose = false;
  const History h = trainer.fit(model, data, options);
  CHECK(h["loss"].back() < 1e-4);
  CHECK(model.parameters()[0] == doctest::Approx(0.5).epsilon(0.05));
  CHECK(model.parameters()[1] == doctest::Approx(-0.5).epsilon(0.05));
}

TEST_CASE("a different model object starts with fresh optimizer state") {
  const Dataset train = testing::argmax_dataset(200, 8, 4, 1);
  FitOptions options = quiet(1, 50);
  options.shuffle = false;
  Trainer<Strategy, Adam> shared{Strategy{2}}, fresh{Strategy{2}};
  Model warm{0};
  shared.fit(warm, train, options);  // gives `shared` Adam moments for `warm`
  Model a{0}, b{0};
  shared.fit(a, train, options);
  fresh.fit(b, train, options);
  CHECK(a.parameters() == b.parameters());
  Model copy = warm;  // a copy is a new model too
  CHECK(copy.identity() != warm.identity());
}
