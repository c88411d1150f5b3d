// Keras' TensorBoard callback on host replicas: a 2-epoch fit writes
// <log_dir>/train and <log_dir>/validation event files with Keras 2's tags,
// steps and values (read back by tests/observe/event_reader.hpp, every CRC
// checked), batch scalars every update_freq batches, weight histograms every
// histogram_freq epochs; only rank 0 writes; wrong options are Errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/callbacks/tensorboard.hpp"
#include "lockstep/lockstep.hpp"
#include "observe/event_reader.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<8>, BatchNormalization<>, Relu, Dense<3>>;
using Mirrored = MirroredPolicy<HostAllReduce>;

const Dataset& data() {
  static const Dataset d = testing::argmax_dataset(60, 6, 3, 1);
  return d;
}

// Every (step, value) of each scalar tag, and each histogram by tag and step, of one run's directory.
struct Run {
  std::size_t files = 0;
  std::map<std::string, std::vector<std::pair<std::int64_t, float>>> scalars;
  std::map<std::string, std::map<std::int64_t, observe::Histogram>> histograms;
};
Run read_run(const std::string& dir) {
  Run run;
  for (const std::string& path : testing::event_files(dir)) {
    ++run.files;
    const auto events = testing::read_events(path);
    REQUIRE(!events.empty());
    CHECK(events[0].file_version == "brain.Event:2");
    for (std::size_t i = 1; i < events.size(); ++i)
      for (const testing::ReadValue& v : events[i].values) {
        if (v.has_simple_value) run.scalars[v.tag].push_back({events[i].step, v.simple_value});
        if (v.has_histo) run.histograms[v.tag][events[i].step] = v.histo;
      }
  }
  return run;
}

// The model's parameters and state at each epoch's end, as the callback sees them.
struct RecordModel {
  std::vector<Model>* models;
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    models->push_back(view.model());
  }
};

// A view of a process other than rank 0.
struct OtherRankView {
  using model_type = Model;
  // Rank 1 of a job whose rank 0 wrote without failing.
  struct Group {
    int process_rank() const { return 1; }
    void broadcast_from_root(void* data, std::size_t bytes) { std::memset(data, 0, bytes); }
  };
  Model model_{1};
  RunState run_;
  Group group_;
  Group& group() { return group_; }
  int process_rank() const { return 1; }
  const RunState& run() const { return run_; }
  Model& model() { return model_; }
};
}  // namespace

TEST_CASE("TensorBoard writes Keras' epoch scalars to train/ and validation/, batch scalars and weight histograms") {
  testing::TempDir dir;
  const std::string log_dir = dir.file("logs");
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  FitOptions options = testing::quiet_fit(20, 2);  // 3 batches an epoch
  options.validation_data = &data();
  TensorBoardOptions o;
  o.log_dir = log_dir;
  o.histogram_freq = 1;
  o.update_freq = 2;
  TensorBoard tensorboard(o);
  std::vector<Model> models;
  RecordModel record{&models};
  const History h = trainer.fit(model, data(), options, tensorboard, record);

  const Run train = read_run(log_dir + "/train");
  CHECK(train.files == 1);
  REQUIRE(train.scalars.count("epoch_loss") == 1);
  const auto& loss = train.scalars.at("epoch_loss");
  REQUIRE(loss.size() == 2);
  for (std::size_t e = 0; e < 2; ++e) {
    CHECK(loss[e].first == static_cast<std::int64_t>(e));
    CHECK(loss[e].second == static_cast<float>(h["loss"][e]));
    CHECK(train.scalars.at("epoch_accuracy")[e].second == static_cast<float>(h["accuracy"][e]));
  }
  CHECK(train.scalars.count("epoch_val_loss") == 0);  // validation values go to validation/

  // update_freq 2: after batches 2, 4, 6 of the 6, stepped by the global batch count.
  REQUIRE(train.scalars.count("batch_loss") == 1);
  std::vector<std::int64_t> batch_steps;
  for (const auto& [step, value] : train.scalars.at("batch_loss")) {
    batch_steps.push_back(step);
    CHECK(std::isfinite(value));
  }
  CHECK(batch_steps == std::vector<std::int64_t>{2, 4, 6});
  CHECK(train.scalars.at("batch_accuracy").size() == 3);
  // The running loss after an epoch's last batch is that epoch's loss.
  CHECK(train.scalars.at("batch_loss")[2].second == static_cast<float>(h["loss"][1]));

  // Each variable, trainable or not, every epoch, with Keras 2's tags.
  const std::vector<std::string> tags = {
      "batch_normalization/beta_0/histogram",        "batch_normalization/gamma_0/histogram",
      "batch_normalization/moving_mean_0/histogram", "batch_normalization/moving_variance_0/histogram",
      "dense/bias_0/histogram",                      "dense/kernel_0/histogram",
      "dense_1/bias_0/histogram",                    "dense_1/kernel_0/histogram"};
  std::vector<std::string> found;
  for (const auto& [tag, by_step] : train.histograms) found.push_back(tag);
  CHECK(found == tags);
  REQUIRE(models.size() == 2);
  for (const VariableInfo& v : Model::variables()) {
    const auto& by_step = train.histograms.at(v.name + "_0/histogram");
    REQUIRE(by_step.size() == 2);
    for (std::int64_t e = 0; e < 2; ++e) {
      const observe::Histogram& got = by_step.at(e);
      const std::vector<float>& all =
          v.trainable ? models[static_cast<std::size_t>(e)].parameters() : models[static_cast<std::size_t>(e)].state();
      const observe::Histogram want = observe::make_histogram(all.data() + v.offset, v.size());
      CHECK(got.num == static_cast<double>(v.size()));
      CHECK(got.min == want.min);
      CHECK(got.max == want.max);
      CHECK(got.sum == want.sum);
      CHECK(got.bucket == want.bucket);
    }
  }

  const Run validation = read_run(log_dir + "/validation");
  CHECK(validation.files == 1);
  REQUIRE(validation.scalars.count("epoch_loss") == 1);
  REQUIRE(validation.scalars.at("epoch_loss").size() == 2);
  CHECK(validation.scalars.at("epoch_loss")[1].first == 1);
  CHECK(validation.scalars.at("epoch_loss")[1].second == static_cast<float>(h["val_loss"][1]));
  CHECK(validation.scalars.at("epoch_accuracy")[0].second == static_cast<float>(h["val_accuracy"][0]));
  CHECK(validation.scalars.size() == 2);
  CHECK(validation.histograms.empty());

  // A second fit starts new files beside the first ones; the batch count goes on.
  trainer.fit(model, data(), testing::quiet_fit(20, 1), tensorboard);
  const Run again = read_run(log_dir + "/train");
  CHECK(again.files == 2);
  CHECK(again.scalars.at("batch_loss").back().first == 8);  // batches 7-9: written after 8
  CHECK(again.scalars.at("epoch_loss").size() == 3);
}

TEST_CASE("TensorBoard by default: epoch scalars only, no validation/ without validation, histograms every N epochs") {
  testing::TempDir dir;
  Model model{2};
  Trainer<Mirrored, Adam> trainer{Mirrored{2}};
  TensorBoard plain(dir.file("plain"));
  trainer.fit(model, data(), testing::quiet_fit(20, 2), plain);
  const Run run = read_run(dir.file("plain/train"));
  std::vector<std::string> tags;
  for (const auto& [tag, values] : run.scalars) tags.push_back(tag);
  CHECK(tags == std::vector<std::string>{"epoch_accuracy", "epoch_loss"});
  CHECK(run.histograms.empty());
  CHECK(!std::filesystem::exists(dir.file("plain/validation")));

  // validation_freq 2 over 3 epochs: one validated epoch, one validation value a tag.
  TensorBoardOptions o;
  o.log_dir = dir.file("sparse");
  o.histogram_freq = 2;
  o.update_freq = "batch";
  TensorBoard sparse(o);
  FitOptions options = testing::quiet_fit(20, 3);
  options.validation_data = &data();
  options.validation_freq = 2;
  Trainer<Mirrored, Adam> fresh{Mirrored{1}};
  fresh.fit(model, data(), options, sparse);
  const Run validation = read_run(dir.file("sparse/validation"));
  REQUIRE(validation.scalars.at("epoch_loss").size() == 1);
  CHECK(validation.scalars.at("epoch_loss")[0].first == 1);
  const Run train = read_run(dir.file("sparse/train"));
  CHECK(train.scalars.at("batch_loss").size() == 9);  // "batch": every batch
  std::vector<std::int64_t> steps;
  for (const auto& [step, h] : train.histograms.at("dense/kernel_0/histogram")) steps.push_back(step);
  CHECK(steps == std::vector<std::int64_t>{0, 2});  // epochs 0 and 2, as Keras' epoch % histogram_freq == 0
}

TEST_CASE("TensorBoard writes on rank 0 only") {
  testing::TempDir dir;
  TensorBoard tensorboard(dir.file("logs"));
  OtherRankView view;
  tensorboard.on_train_begin(TrainInfo{}, view);
  Logs logs;
  logs.add("loss", 0.5);
  logs.add("val_loss", 0.25);
  tensorboard.on_batch_end(0, logs, view);
  tensorboard.on_epoch_end(0, logs, view);
  tensorboard.on_train_end(logs);
  CHECK(!std::filesystem::exists(dir.file("logs")));
  CHECK(tensorboard.train_file().empty());
}

TEST_CASE("TensorBoard's wrong options are Errors that say what to write") {
  TensorBoardOptions graph;
  graph.write_graph = true;
  CHECK_THROWS_WITH_AS(TensorBoard{graph}, doctest::Contains("write_graph = true, but lockstep writes no graphs"),
                       Error);
  TensorBoardOptions often;
  often.update_freq = "often";
  CHECK_THROWS_WITH_AS(TensorBoard{often}, doctest::Contains("update_freq 'often', expected \"epoch\", \"batch\""),
                       Error);
  TensorBoardOptions zero;
  zero.update_freq = 0;
  CHECK_THROWS_WITH_AS(TensorBoard{zero}, doctest::Contains("update_freq 0, expected"), Error);
  TensorBoardOptions negative;
  negative.histogram_freq = -1;
  CHECK_THROWS_WITH_AS(TensorBoard{negative}, doctest::Contains("histogram_freq -1"), Error);
  CHECK_THROWS_WITH_AS(TensorBoard{std::string()}, doctest::Contains("an empty log_dir"), Error);

  testing::TempDir dir;
  testing::write_file(dir.file("file"), std::string("x"));
  TensorBoard blocked(dir.file("file/logs"));
  Model model{1};
  Trainer<Mirrored, Adam> trainer{Mirrored{1}};
  const std::string expected = "cannot create the directory '" + dir.file("file/logs/train") + "': Not a directory";
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), testing::quiet_fit(20, 1), blocked),
                       doctest::Contains(expected.c_str()), Error);
}
