// Trainer<Strategy, Optimizer, Loss, Metrics>: Keras' fit / evaluate / predict
// for a model type, run synchronously on the strategy's replicas. Every step,
// each replica takes its slice of the global batch, runs forward and backward
// into its own flat gradient buffer, the collective combines the buffers, and
// each replica applies the same update to its own mirror of the parameters.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "lockstep/backend/backends.hpp"
#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/losses/sparse_categorical_crossentropy.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/model/sequential.hpp"
#include "lockstep/optim/optimizer.hpp"
#include "lockstep/strategy/central_storage.hpp"
#include "lockstep/strategy/strategy.hpp"
#include "lockstep/train/callbacks.hpp"
#include "lockstep/train/logs.hpp"
#include "lockstep/train/progress_bar.hpp"

namespace lockstep {

// Options of fit, Keras' names. batch_size is the global batch, split over replicas.
template <class Label>
struct BasicFitOptions {
  int epochs = 1;
  std::size_t batch_size = 32;
  bool shuffle = true;
  bool drop_remainder = false;
  std::uint64_t seed = 0;  // the shuffle's seed
  bool verbose = true;     // show a ProgressBar on stdout
  const BasicDataset<Label>* validation_data = nullptr;
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
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  // Each step's loss sum and metric sums ride at the end of the gradient
  // buffer, so one collective call combines them across replicas and processes.
  static constexpr std::size_t kStats = 1 + kMetrics;
  static constexpr bool kCentral = detail::central_variables_v<Strategy>;

  static_assert(std::is_same_v<backend, Host>,
                "This strategy's collective runs on the CUDA backend, which lockstep does not provide yet: train on "
                "CPU replicas with MirroredPolicy<HostAllReduce>.");
  static_assert((std::is_same_v<typename Metric::label_type, label_type> && ...),
                "Trainer<Strategy, Optimizer, Loss, Metrics<...>>: a metric needs other labels than the loss gives "
                "(Accuracy needs class indices); with MeanSquaredError write Metrics<>.");

  explicit Trainer(Strategy strategy = Strategy{}, Optimizer optimizer = Optimizer{})
      : strategy_(strategy), optimizer_(optimizer), pool_(strategy.replicas()) {
    group_.emplace(strategy.replicas());
    // Replicas are threads already: each GEMM gets the cores left per replica
    // (counting the replicas of other processes on this machine).
    host::set_blas_threads(
        std::max(1, Host::hardware_threads() / (strategy.replicas() * group_->processes_on_this_node())));
  }

  // Replicas in this process; global_replicas() counts those of every process.
  int replicas() const { return pool_.size(); }
  int global_replicas() const { return pool_.size() * group_->process_count(); }
  int process_rank() const { return group_->process_rank(); }
  const Strategy& strategy() const { return strategy_; }
  const Optimizer& optimizer() const { return optimizer_; }
  Optimizer& optimizer() { return optimizer_; }

  // Trains `model` in place; its parameters are mirrored to every replica at
  // the start and hold the trained values at the end. Optimizer state carries
  // over between fit calls on the same model object.
  template <class Model, class... Callbacks>
  History fit(Model& model, const data_type& train, const fit_options& options, Callbacks&&... callbacks) {
    static_assert(detail::is_model<Model>::value, "fit: the first argument must be a model such as Sequential<...>.");
    check_data(model, train, "fit");
    require(options.epochs >= 0, "fit: epochs ", options.epochs, ", expected at least 0");
    if (options.validation_data) check_data(model, *options.validation_data, "fit (validation_data)");
    check_same_layout(model, train, options);
    // Rank 0's weights and shuffle seed everywhere: a job starts consistent
    // even if the processes were given different seeds.
    std::uint64_t seed = options.seed;
    group_->broadcast_from_root(&seed, sizeof seed);
    group_->broadcast_from_root(model.parameters().data(), Model::kParams * sizeof(float));
    Loader loader(train.size(), options.batch_size, options.shuffle, options.drop_remainder, seed);

    RunState<Model>& run =
        run_state(model, Loader::slice_capacity(options.batch_size, global_replicas()), train.label_width());
    pool_.run([&](int r) {
      if (run.replicas[r]->owns_variables())
        std::copy(model.parameters().begin(), model.parameters().end(), run.replicas[r]->params.data());
    });

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
    with_bar([&](auto&... cb) { detail::train_begin(info, cb...); });

    const std::function<void()> abort = [this] { group_->abort(); };
    // One job for the whole fit, reading the current batch from these two, so
    // that no step allocates.
    const std::uint32_t* step_indices = nullptr;
    std::size_t step_count = 0;
    const std::function<void(int)> job = [&](int r) { train_step(run, r, train, step_indices, step_count); };
    for (int epoch = 0; epoch < options.epochs; ++epoch) {
      loader.begin_epoch(static_cast<std::uint64_t>(epoch));
      with_bar([&](auto&... cb) { detail::epoch_begin(epoch, info, cb...); });
      double loss_sum = 0, metric_sums[kStats] = {}, seen = 0;
      for (std::size_t step = 0; step < loader.steps(); ++step) {
        std::tie(step_indices, step_count) = loader.batch(step);
        run_replicas(job, abort);
        const float* stats = run.replicas[0]->grads.data() + Model::kParams;  // reduced with the gradients
        loss_sum += stats[0];
        for (std::size_t m = 0; m < kMetrics; ++m) metric_sums[m] += stats[1 + m];
        seen += static_cast<double>(step_count);
        logs.set(0, loss_sum / seen);
        for (std::size_t m = 0; m < kMetrics; ++m) logs.set(1 + m, metric_sums[m] / seen);
        with_bar([&](auto&... cb) { detail::batch_end(step, logs, cb...); });
      }
      for (std::size_t i = 0; i < logs.size(); ++i) epoch_logs.set(i, logs.value(i));
      if (options.validation_data) {
        const auto val = evaluate_on<Model>(*options.validation_data, options.batch_size,
                                            [&](int r) -> const float* { return variables_of(run, r); });
        for (std::size_t i = 0; i < val.size(); ++i) epoch_logs.set(1 + kMetrics + i, val[i]);
      }
      history.record(epoch_logs);
      bool stop = false;
      with_bar([&](auto&... cb) { stop = detail::epoch_end(epoch, epoch_logs, cb...); });
      if (stop) break;
    }
    std::copy(variables_of(run, 0), variables_of(run, 0) + Model::kParams, model.parameters().begin());
    with_bar([&](auto&... cb) { detail::train_end(epoch_logs, cb...); });
    return history;
  }

  // Loss and metrics of `model` on `data`: {"loss": ..., "accuracy": ...}.
  template <class Model>
  Logs evaluate(const Model& model, const data_type& data, std::size_t batch_size = 128) {
    check_data(model, data, "evaluate");
    const auto values = evaluate_on<Model>(data, batch_size, [&](int) { return model.parameters().data(); });
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
    require(features.size() % Model::kInputs == 0, "predict: ", features.size(),
            " feature values are not a whole number of samples of ", Model::kInputs);
    require(batch_size >= 1, "predict: batch size 0, expected at least 1");
    const std::size_t samples = features.size() / Model::kInputs;
    std::vector<float> out(samples * Model::kOutputs);
    const int n = replicas();
    const std::size_t capacity = Loader::slice_capacity(batch_size, n);
    const std::function<void(int)> job = [&](int r) {
      typename Model::Workspace ws(static_cast<int>(capacity));
      for_each_slice(samples, batch_size, r, n, [&](std::size_t first, int rows) {
        const float* y = Model::forward(model.parameters().data(), features.data() + first * Model::kInputs, rows, ws);
        std::copy(y, y + static_cast<std::size_t>(rows) * Model::kOutputs,
                  out.begin() + static_cast<std::ptrdiff_t>(first * Model::kOutputs));
      });
    };
    pool_.run(job);
    return out;
  }

 private:
  // For inference over `samples` in batches of `batch`: calls f(first, rows)
  // with replica `index` of `total`'s rows of each batch (unshuffled).
  template <class F>
  static void for_each_slice(std::size_t samples, std::size_t batch, int index, int total, F&& f) {
    for (std::size_t start = 0; start < samples; start += batch) {
      const auto [lo, hi] = Loader::replica_slice(std::min(batch, samples - start), index, total);
      f(start + lo, static_cast<int>(hi - lo));
    }
  }

  template <class Model>
  struct Replica {
    // Under CentralStoragePolicy only replica 0 owns variables and optimizer
    // state: it is the central device.
    Replica(const Optimizer& opt, bool owns_variables) : grads(Model::kParams + kStats) {
      if (owns_variables) {
        params.resize(Model::kParams);
        opt_state.emplace(opt, Model::kParams);
      }
    }
    bool owns_variables() const { return opt_state.has_value(); }
    // Step buffers follow the batch size; parameters and optimizer slots stay.
    void resize(std::size_t capacity, std::size_t label_width) {
      ws = typename Model::Workspace(static_cast<int>(capacity));
      x.resize(capacity * Model::kInputs);
      labels.assign(capacity * label_width, label_type{});
      row_loss.resize(capacity);
    }
    host::AlignedBuffer<float> params, grads;
    std::optional<typename Optimizer::template State<Host>> opt_state;
    typename Model::Workspace ws;
    host::AlignedBuffer<float> x;
    std::vector<label_type> labels;
    host::AlignedBuffer<float> row_loss;
  };
  template <class Model>
  struct RunState {
    std::uint64_t model = 0;  // Model::identity()
    std::size_t capacity = 0, label_width = 0;
    std::vector<std::unique_ptr<Replica<Model>>> replicas;
  };
  template <class Model>
  static const void* run_state_tag() {
    static const char tag = 0;
    return &tag;
  }

  // The replicas' state for `model`, kept across fit calls on the same model
  // object (Adam's moments carry over, as in Keras); a new model starts fresh.
  template <class Model>
  RunState<Model>& run_state(const Model& model, std::size_t capacity, std::size_t label_width) {
    if (run_state_type_ != run_state_tag<Model>() ||
        static_cast<RunState<Model>*>(run_state_.get())->model != model.identity()) {
      auto fresh = std::make_shared<RunState<Model>>();
      fresh->model = model.identity();
      fresh->replicas.resize(static_cast<std::size_t>(replicas()));
      // Each replica allocates its own memory on its own thread (first touch).
      pool_.run([&](int r) { fresh->replicas[r] = std::make_unique<Replica<Model>>(optimizer_, !kCentral || r == 0); });
      run_state_ = std::move(fresh);
      run_state_type_ = run_state_tag<Model>();
    }
    auto& run = *static_cast<RunState<Model>*>(run_state_.get());
    if (run.capacity != capacity || run.label_width != label_width) {
      pool_.run([&](int r) { run.replicas[r]->resize(capacity, label_width); });
      run.capacity = capacity;
      run.label_width = label_width;
    }
    return run;
  }

  // Runs a step on every replica. After a failure the collective is made anew,
  // so the trainer stays usable once the caller has handled the error.
  void run_replicas(const std::function<void(int)>& job, const std::function<void()>& on_failure) {
    try {
      pool_.run(job, on_failure);
    } catch (...) {
      group_->end_job_after_failure(describe(std::current_exception()).c_str());
      group_.emplace(replicas());
      throw;
    }
  }

  static std::string describe(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "an exception that is not a std::exception";
    }
  }

  // The parameters replica r computes with: its own mirror, or the central copy.
  template <class Model>
  static float* variables_of(RunState<Model>& run, int r) {
    return run.replicas[kCentral ? 0 : r]->params.data();
  }

  // Every process must train the same model on the same layout (a no-op in one process).
  template <class Model>
  void check_same_layout(const Model&, const data_type& train, const fit_options& options) {
    static const char* const names[] = {"model layout hash", "model parameters", "model inputs",
                                        "model outputs",     "global batch size", "local replicas",
                                        "training samples",  "epochs",            "drop_remainder",
                                        "shuffle"};
    const std::uint64_t values[] = {Model::kLayoutHash,
                                    Model::kParams,
                                    static_cast<std::uint64_t>(Model::kInputs),
                                    static_cast<std::uint64_t>(Model::kOutputs),
                                    options.batch_size,
                                    static_cast<std::uint64_t>(replicas()),
                                    train.size(),
                                    static_cast<std::uint64_t>(options.epochs),
                                    options.drop_remainder,
                                    options.shuffle};
    group_->check_same_across_processes(names, values, sizeof values / sizeof values[0]);
  }

  template <class Model>
  void check_data(const Model&, const data_type& data, const char* where) const {
    require(!data.empty(), where, ": the data set is empty, expected at least 1 sample");
    require(static_cast<int>(data.feature_count()) == Model::kInputs, where, ": the data has ", data.feature_count(),
            " features per sample, the model's Input expects ", Model::kInputs);
    Loss::check_labels(data.label_data().data(), data.size() * data.label_width(), data.label_width(),
                       Model::kOutputs);
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

  // Loss and metric sums of one replica's rows into stats[0..kStats), with
  // the output gradient (scaled by `scale`) when `grad` is not null.
  template <class Model, class Stat>
  static void loss_and_metrics(const float* out, const label_type* labels, int rows, float scale, float* row_loss,
                               float* grad, Stat* stats) {
    Loss::template forward_backward<Model::kOutputs>(out, labels, rows, scale, row_loss, grad);
    double s = 0;
    for (int i = 0; i < rows; ++i) s += row_loss[i];
    stats[0] = static_cast<Stat>(s);
    [[maybe_unused]] std::size_t m = 1;
    ((stats[m++] = static_cast<Stat>(Metric::template sum<Model::kOutputs>(out, labels, rows))), ...);
  }

  // One synchronous step on local replica r, whose global index is
  // rank * replicas() + r: its slice of the global batch is fixed by that.
  template <class Model>
  void train_step(RunState<Model>& run, int r, const data_type& data, const std::uint32_t* indices,
                  std::size_t count) {
    Replica<Model>& rep = *run.replicas[r];
    const auto [lo, hi] = Loader::replica_slice(count, process_rank() * replicas() + r, global_replicas());
    const int rows = static_cast<int>(hi - lo);
    const float* params = variables_of(run, r);
    gather(data, indices + lo, hi - lo, rep.x.data(), rep.labels.data());
    const float* out = Model::forward(params, rep.x.data(), rows, rep.ws);
    // Weighting by the global count makes the summed gradients the mean over
    // the real samples of the batch, whatever the slices' sizes.
    loss_and_metrics<Model>(out, rep.labels.data(), rows, 1.0f / static_cast<float>(count), rep.row_loss.data(),
                            rep.ws.output_grad(), rep.grads.data() + Model::kParams);
    Model::backward(params, rep.x.data(), rows, rep.ws, rep.grads.data());
    if constexpr (kCentral) {
      group_->reduce_to_root(r, rep.grads.data(), Model::kParams + kStats, ReduceOp::kSum);
      if (r == 0) rep.opt_state->step(optimizer_, rep.params.data(), rep.grads.data());
    } else {
      group_->all_reduce(r, rep.grads.data(), Model::kParams + kStats, ReduceOp::kSum);
      rep.opt_state->step(optimizer_, rep.params.data(), rep.grads.data());
    }
  }

  // Mean loss and metrics over `data`, each replica using params_of(r).
  template <class Model, class ParamsOf>
  std::vector<double> evaluate_on(const data_type& data, std::size_t batch_size, ParamsOf params_of) {
    require(batch_size >= 1, "evaluate: batch size 0, expected at least 1");
    const int n = replicas(), total = global_replicas(), base = process_rank() * n;
    const std::size_t capacity = Loader::slice_capacity(batch_size, total);
    std::vector<double> sums(static_cast<std::size_t>(n) * kStats, 0.0);
    const std::function<void(int)> job = [&](int r) {
      typename Model::Workspace ws(static_cast<int>(capacity));
      host::AlignedBuffer<float> row_loss(capacity);
      const float* params = params_of(r);
      double* mine = sums.data() + static_cast<std::size_t>(r) * kStats;
      for_each_slice(data.size(), batch_size, base + r, total, [&](std::size_t first, int rows) {
        const float* out = Model::forward(params, data.features(first), rows, ws);
        double stats[kStats] = {};
        loss_and_metrics<Model>(out, data.labels(first), rows, 1.0f, row_loss.data(), nullptr, stats);
        for (std::size_t i = 0; i < kStats; ++i) mine[i] += stats[i];
      });
    };
    pool_.run(job);
    std::vector<double> out(kStats, 0.0);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += sums[static_cast<std::size_t>(r) * kStats + i];
    group_->sum_across_processes(out.data(), out.size());
    for (auto& v : out) v /= static_cast<double>(data.size());
    return out;
  }

  Strategy strategy_;
  Optimizer optimizer_;
  host::ReplicaPool pool_;
  std::optional<typename collective::Group> group_;
  std::shared_ptr<void> run_state_;
  const void* run_state_type_ = nullptr;
};

}  // namespace lockstep
