// Trainer<Strategy, Optimizer, Loss, Metrics>: Keras' fit / evaluate / predict
// for a model type, run synchronously on the strategy's replicas. Every step,
// each replica takes its slice of the global batch, runs forward and backward
// into its own flat gradient buffer, the collective combines the buffers, and
// each replica applies the same update to its own mirror of the parameters.
// The loop is written once here; the backend's Executor (train/executor.hpp)
// runs the replicas.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/losses/sparse_categorical_crossentropy.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/model/sequential.hpp"
#include "lockstep/optim/optimizer.hpp"
#include "lockstep/strategy/strategy.hpp"
#include "lockstep/train/callbacks.hpp"
#include "lockstep/train/executor.hpp"
#include "lockstep/train/fit_view.hpp"
#include "lockstep/train/host_executor.hpp"
#include "lockstep/train/logs.hpp"
#include "lockstep/train/placement_log.hpp"
#include "lockstep/train/progress_bar.hpp"

namespace lockstep {

// Options of fit, Keras' names. batch_size is the global batch, split over replicas.
template <class Label>
struct BasicFitOptions {
  int epochs = 1;
  std::size_t batch_size = 32;
  bool shuffle = true;
  bool drop_remainder = false;
  std::uint64_t seed = 0;  // the shuffle's and Dropout's seed
  bool verbose = true;     // show a ProgressBar on stdout
  const BasicDataset<Label>* validation_data = nullptr;
  // Keras' validation_split: the last fraction of the training samples (taken
  // before shuffling) is held out and evaluated instead of validation_data.
  double validation_split = 0.0;
  // Keras' validation_freq: validate after every N-th epoch (N >= 1).
  int validation_freq = 1;
  // Keras' initial_epoch: the first epoch to run, so that a fit resumed from
  // a checkpoint continues the shuffle and the random keys of an unbroken run.
  int initial_epoch = 0;
  // Keras' TerminateOnNaN, on by default and as an Error: a step whose loss
  // is NaN or infinite ends fit with an Error naming the epoch and the step
  // (after the step's callbacks, so that one that stops training, such as
  // TerminateOnNaN, still stops it quietly). false trains on, NaN and all.
  bool terminate_on_nan = true;
};
using FitOptions = BasicFitOptions<std::int32_t>;

template <class Strategy, class Optimizer, class Loss = SparseCategoricalCrossentropy,
          class MetricList = Metrics<Accuracy>>
class Trainer;

template <class Strategy, class Optimizer, class Loss, class... Metric>
class Trainer<Strategy, Optimizer, Loss, Metrics<Metric...>> {
  static_assert(detail::is_strategy<Strategy>,
                "Trainer<Strategy, Optimizer>: the first argument must be a strategy, such as "
                "MirroredPolicy<HostAllReduce> or OneDevicePolicy.");
  static_assert(detail::is_optimizer<Optimizer>,
                "Trainer<Strategy, Optimizer>: the second argument must be an optimizer, such as Adam or Sgd.");

 public:
  using strategy_type = Strategy;
  using optimizer_type = Optimizer;
  using backend = typename Strategy::backend;
  using collective = typename Strategy::collective;
  using label_type = typename Loss::label_type;
  using data_type = BasicDataset<label_type>;
  using fit_options = BasicFitOptions<label_type>;
  using executor_type = detail::Executor<backend, Strategy, Optimizer, Loss, Metrics<Metric...>>;
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  static constexpr std::size_t kStats = 1 + kMetrics;

  static_assert(detail::is_complete<executor_type>::value,
                "This strategy runs on the CUDA backend: include <lockstep/cuda.hpp> and compile this file with nvcc "
                "(CMake: link lockstep::cuda), or train on CPU replicas with MirroredPolicy<HostAllReduce>.");
  static_assert((std::is_same_v<typename Metric::label_type, label_type> && ...),
                "Trainer<Strategy, Optimizer, Loss, Metrics<...>>: a metric needs other labels than the loss gives "
                "(Accuracy needs class indices); with MeanSquaredError write Metrics<>.");

  explicit Trainer(Strategy strategy = Strategy{}, Optimizer optimizer = Optimizer{})
      : strategy_(strategy), optimizer_(optimizer), exec_(strategy_, optimizer_) {}

  // Replicas in this process; global_replicas() counts those of every process.
  int replicas() const { return exec_.replicas(); }
  int global_replicas() const { return exec_.global_replicas(); }
  int process_rank() const { return exec_.process_rank(); }
  const Strategy& strategy() const { return strategy_; }
  const Optimizer& optimizer() const { return optimizer_; }
  Optimizer& optimizer() { return optimizer_; }
  // The backend's executor: its devices, streams and options (CUDA graphs, TF32).
  executor_type& executor() { return exec_; }
  // Where the loop is: epoch, step, seed, steps done (also during fit, from a callback).
  const RunState& run_state() const { return run_; }

  // Every variable, the model's state and the optimizer state of the last
  // fit of `model` (or of a restore), gathered whatever the strategy.
  template <class Model>
  Snapshot snapshot(const Model& model) {
    require(exec_.holds(model), "snapshot: this trainer has not trained this model object (fit or restore it first)");
    Snapshot out = detail::take_snapshot<Model>(exec_);
    out.run = run_;
    return out;
  }
  // Puts a snapshot back: into `model`, and as the optimizer state the next
  // fit of `model` continues from.
  template <class Model>
  void restore(Model& model, const Snapshot& from) {
    exec_.restore(model, from, 0, 0);
    model.parameters() = from.params;
    model.state() = from.state;
    run_ = from.run;
  }

  // Trains `model` in place; its parameters are mirrored to every replica at
  // the start and hold the trained values at the end. Optimizer state carries
  // over between fit calls on the same model object.
  template <class Model, class... Callbacks>
  History fit(Model& model, const data_type& data, const fit_options& options, Callbacks&&... callbacks) {
    static_assert(detail::is_model<Model>::value, "fit: the first argument must be a model such as Sequential<...>.");
    static_assert(!(std::is_same_v<Loss, SparseCategoricalCrossentropy> && detail::ends_with_softmax<Model>::value),
                  "This model ends in Softmax, but SparseCategoricalCrossentropy takes logits (Keras' "
                  "from_logits=True) and applies the softmax itself: drop the Softmax layer, and predict "
                  "probabilities with Model::with_softmax.");
    static_assert((detail::check_callback<std::decay_t<Callbacks>, FitView<executor_type, Optimizer, Model>>() && ...));
    require(options.validation_split >= 0.0 && options.validation_split < 1.0, "fit: validation_split ",
            options.validation_split, ", expected in [0, 1)");
    require(options.validation_freq >= 1, "fit: validation_freq ", options.validation_freq, ", expected at least 1");
    if (options.validation_split > 0.0) {
      // Keras' rule: the last samples, before any shuffling.
      const std::size_t held = static_cast<std::size_t>(static_cast<double>(data.size()) * options.validation_split);
      require(held >= 1 && held < data.size(), "fit: validation_split ", options.validation_split, " of ",
              data.size(), " samples holds out ", held, ", expected at least 1 and fewer than all of them");
      const data_type train = data.slice(0, data.size() - held);
      const data_type held_out = data.slice(data.size() - held, held);
      fit_options rest = options;
      rest.validation_split = 0.0;
      rest.validation_data = &held_out;
      return fit(model, train, rest, std::forward<Callbacks>(callbacks)...);
    }
    const data_type& train = data;
    check_data(model, train, "fit");
    require(options.epochs >= 0, "fit: epochs ", options.epochs, ", expected at least 0");
    require(options.initial_epoch >= 0 && options.initial_epoch <= options.epochs, "fit: initial_epoch ",
            options.initial_epoch, ", expected in [0, epochs = ", options.epochs, "]");
    if (options.validation_data) check_data(model, *options.validation_data, "fit (validation_data)");
    // The placement log (observe/placement.hpp): one load of the switch, which
    // every process must have set alike (the layout check says so), as the
    // log gathers every process's replicas.
    const bool log_placement = logging_device_placement();
    check_same_layout(model, train, options, log_placement);
    if (log_placement) detail::log_placement<Strategy, Model>(exec_);
    // Rank 0's weights and shuffle seed everywhere: a job starts consistent
    // even if the processes were given different seeds.
    run_.seed = options.seed;
    exec_.group().broadcast_from_root(&run_.seed, sizeof run_.seed);
    exec_.group().broadcast_from_root(model.parameters().data(), Model::kParams * sizeof(float));
    if (Model::kState) exec_.group().broadcast_from_root(model.state().data(), Model::kState * sizeof(float));
    Loader loader(train.size(), options.batch_size, options.shuffle, options.drop_remainder, run_.seed);
    const std::size_t capacity = Loader::slice_capacity(options.batch_size, train.size(), global_replicas());
    exec_.begin_fit(model, optimizer_, capacity, train.label_width());
    FitView<executor_type, Optimizer, Model> view(exec_, optimizer_, model, run_, capacity, train.label_width());

    TrainInfo info{options.epochs, loader.steps(), options.batch_size, train.size(), global_replicas()};
    Logs logs = make_logs(false);  // what each step reports
    Logs epoch_logs = make_logs(options.validation_data != nullptr);
    History history;
    ProgressBar bar;
    const bool show_bar = options.verbose && process_rank() == 0;  // one progress bar per job
    auto with_bar = [&](auto&& f) {
      if (show_bar)
        f(bar, callbacks...);
      else
        f(callbacks...);
    };
    with_bar([&](auto&... cb) { detail::train_begin(view, info, cb...); });
    // A callback that resumed the run (FitView::resume, BackupAndRestore) set
    // run_ to where it was: that epoch, from that step on; the shuffle and the
    // random keys, made from (seed, epoch, step), are the unbroken run's.
    require(!view.resumed() || (run_.epoch >= 0 && run_.epoch <= options.epochs && run_.step <= loader.steps()),
            "fit: resumed at epoch ", run_.epoch, " step ", run_.step, ", expected at most epoch ", options.epochs,
            " and step ", loader.steps(), " (a run of other options?)");
    std::size_t first_step = view.resumed() ? run_.step : 0;

    for (run_.epoch = view.resumed() ? run_.epoch : options.initial_epoch; run_.epoch < options.epochs; ++run_.epoch) {
      const int epoch = run_.epoch;
      loader.begin_epoch(static_cast<std::uint64_t>(epoch));
      with_bar([&](auto&... cb) { detail::epoch_begin(view, epoch, info, cb...); });
      double sums[kStats] = {}, seen = 0;  // the loss, then each metric, summed over the epoch's samples
      for (run_.step = std::exchange(first_step, 0); run_.step < loader.steps(); ++run_.step) {
        const std::size_t step = run_.step;
        with_bar([&](auto&... cb) { detail::batch_begin(view, step, cb...); });
        const auto [indices, count] = loader.batch(step);
        // The next batch of this epoch, which a device backend copies while this step runs.
        StepBatch next;
        if (step + 1 < loader.steps()) std::tie(next.indices, next.count) = loader.batch(step + 1);
        const float* stats =
            exec_.template train_step<Model>(optimizer_, train, StepBatch{indices, count}, next,
                                             step_key(run_.seed, static_cast<std::uint64_t>(epoch), step));
        const float step_loss = stats[0];  // the step's loss sum, on the host already
        ++run_.steps_done;
        seen += static_cast<double>(count);
        for (std::size_t i = 0; i < kStats; ++i) {
          sums[i] += stats[i];
          logs.set(i, finish(i, sums[i] / seen));
        }
        with_bar([&](auto&... cb) { detail::batch_end(view, step, logs, cb...); });
        if (view.stop_requested()) break;  // Keras stops at the batch that asked
        if (options.terminate_on_nan && !std::isfinite(step_loss)) {  // one test per step
          if (show_bar && isatty(1)) std::cout << std::endl;  // end the bar's redrawn line before the message
          fail("fit: the loss is ", detail::non_finite_text(step_loss), " at epoch ", epoch + 1, "/", options.epochs,
               ", step ", step + 1, "/", loader.steps(),
               " (1-based, as the progress bar counts); lower the learning rate or check the data, or set "
               "FitOptions::terminate_on_nan = false to train on");
        }
      }
      for (std::size_t i = 0; i < logs.size(); ++i) epoch_logs.set(i, logs.value(i));
      const bool validate = options.validation_data && (epoch + 1) % options.validation_freq == 0;
      // An epoch without validation reports its val_ entries as NaN (Keras leaves them out).
      for (std::size_t i = 1 + kMetrics; options.validation_data && i < epoch_logs.size(); ++i)
        epoch_logs.set(i, std::numeric_limits<double>::quiet_NaN());
      if (validate) {
        const auto val = means(
            exec_.template evaluate<Model>(nullptr, nullptr, *options.validation_data, options.batch_size),
            *options.validation_data);
        for (std::size_t i = 0; i < val.size(); ++i) epoch_logs.set(1 + kMetrics + i, val[i]);
      }
      history.record(epoch_logs);
      exec_.copy_out(model);  // the epoch's weights, for callbacks that read or save the model
      bool stop = false;
      with_bar([&](auto&... cb) { stop = detail::epoch_end(view, epoch, epoch_logs, cb...); });
      if (stop || view.stop_requested()) {
        ++run_.epoch;
        break;
      }
    }
    // Every epoch's end copied its weights into `model` already.
    with_bar([&](auto&... cb) { detail::train_end(view, epoch_logs, cb...); });
    return history;
  }

  // Options of another label type (FitOptions for a regression trainer): a sentence, not a conversion error.
  template <class Model, class OtherLabel, class... Callbacks,
            class = std::enable_if_t<!std::is_same_v<OtherLabel, label_type>>>
  History fit(Model&, const data_type&, const BasicFitOptions<OtherLabel>&, Callbacks&&...) {
    static_assert(dependent_false<OtherLabel>,
                  "fit: these options are for another kind of labels than this trainer's loss takes: write "
                  "Trainer::fit_options (BasicFitOptions<float> for MeanSquaredError) instead of FitOptions.");
    return {};
  }

  // Loss and metrics of `model` on `data`: {"loss": ..., "accuracy": ...}.
  template <class Model>
  Logs evaluate(const Model& model, const data_type& data, std::size_t batch_size = 128) {
    check_data(model, data, "evaluate");
    const auto values = means(
        exec_.template evaluate<Model>(model.parameters().data(), model.state().data(), data, batch_size), data);
    Logs logs = make_logs(false);
    for (std::size_t i = 0; i < values.size(); ++i) logs.set(i, values[i]);
    return logs;
  }

  // The model's outputs (samples, Model::kOutputs) for every sample of `data`.
  template <class Model>
  std::vector<float> predict(const Model& model, const data_type& data, std::size_t batch_size = 128) {
    require(static_cast<int>(data.feature_count()) == Model::kInputs, "predict: the data has ", data.feature_count(),
            " features per sample, the model's Input expects ", Model::kInputs);
    return predict(model, data.feature_data(), batch_size);
  }

  // The same for features alone: (samples, Model::kInputs) values, row-major.
  template <class Model>
  std::vector<float> predict(const Model& model, const std::vector<float>& features, std::size_t batch_size = 128) {
    check_model(model, "predict");
    require(features.size() % Model::kInputs == 0, "predict: ", features.size(),
            " feature values are not a whole number of samples of ", Model::kInputs);
    require(batch_size >= 1, "predict: batch size 0, expected at least 1");
    return exec_.template predict<Model>(model.parameters().data(), model.state().data(), features.data(),
                                         features.size() / Model::kInputs, batch_size);
  }

 private:
  static std::vector<double> means(std::vector<double> sums, const data_type& data) {
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i] = finish(i, sums[i] / static_cast<double>(data.size()));
    return sums;
  }
  // Statistic i (0 the loss, then the metrics) from the mean of its rows.
  static double finish(std::size_t i, double mean) {
    double out = mean;
    [[maybe_unused]] std::size_t m = 1;
    ((out = i == m++ ? detail::finish_metric<Metric>(mean) : out), ...);
    return out;
  }

  // Every process must train the same model on the same layout (a no-op in one process).
  template <class Model>
  void check_same_layout(const Model&, const data_type& train, const fit_options& options, bool log_placement) {
    static const char* const names[] = {"model layout hash", "model parameters", "model inputs",
                                        "model outputs",     "global batch size", "local replicas",
                                        "training samples",  "epochs",            "drop_remainder",
                                        "shuffle",           "initial_epoch",     "log_device_placement"};
    const std::uint64_t values[] = {Model::kLayoutHash,
                                    Model::kParams,
                                    static_cast<std::uint64_t>(Model::kInputs),
                                    static_cast<std::uint64_t>(Model::kOutputs),
                                    options.batch_size,
                                    static_cast<std::uint64_t>(replicas()),
                                    train.size(),
                                    static_cast<std::uint64_t>(options.epochs),
                                    options.drop_remainder,
                                    options.shuffle,
                                    static_cast<std::uint64_t>(options.initial_epoch),
                                    log_placement};
    exec_.group().check_same_across_processes(names, values, sizeof values / sizeof values[0]);
  }

  template <class Model>
  void check_data(const Model& model, const data_type& data, const char* where) const {
    check_model(model, where);
    require(!data.empty(), where, ": the data set is empty, expected at least 1 sample");
    require(static_cast<int>(data.feature_count()) == Model::kInputs, where, ": the data has ", data.feature_count(),
            " features per sample, the model's Input expects ", Model::kInputs);
    Loss::check_labels(data.label_data().data(), data.size() * data.label_width(), data.label_width(),
                       Model::kOutputs);
  }

  // A model whose parameter or state vector was resized would be read out of bounds.
  template <class Model>
  static void check_model(const Model& model, const char* where) {
    require(model.parameters().size() == Model::kParams && model.state().size() == Model::kState, where,
            ": the model holds ", model.parameters().size(), " parameters and ", model.state().size(),
            " state values, its layers have ", Model::kParams, " and ", Model::kState,
            " (were parameters() or state() resized?)");
  }

  Logs make_logs(bool with_validation) const {
    Logs logs;
    logs.add("loss");
    (logs.add(Metric::kName), ...);
    if (with_validation) {
      logs.add("val_loss");
      (logs.add(std::string("val_") + Metric::kName), ...);
    }
    return logs;
  }

  Strategy strategy_;
  Optimizer optimizer_;
  executor_type exec_;
  RunState run_;
};

}  // namespace lockstep
