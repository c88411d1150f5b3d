// Executor<Host, ...>: runs a Trainer's replicas as threads of this process
// (replica 0 is the calling thread). Each replica owns its gradient buffer and
// its workspace, allocated on its own thread; the collective's Group combines
// the gradient buffers every step. Parameters are a mirror per replica, except
// where the replicas can share one copy: under CentralStoragePolicy, and under
// HostAllReduce's sharded update, all compute with replica 0's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/backend/backends.hpp"
#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/context.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/backend/host/sum_of_two.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/strategy/central_storage.hpp"
#include "lockstep/train/executor.hpp"

namespace lockstep::detail {

// The message of an exception in flight, for the other processes of a job.
inline std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// State<Host>::step(opt, params, grads, first, last): one update of a range,
// with grads a `const float*` or, where the state takes it, host::SumOfTwo.
template <class O, class Grads>
using ranged_step = decltype(std::declval<typename O::template State<Host>&>().step(
    std::declval<const O&>(), std::declval<float*>(), std::declval<Grads>(), std::size_t{}, std::size_t{}));

template <class Strategy, class Optimizer, class Loss, class... Metric>
class Executor<Host, Strategy, Optimizer, Loss, Metrics<Metric...>> {
 public:
  using collective = typename Strategy::collective;
  using group_type = typename group_of<Strategy>::type;
  using label_type = typename Loss::label_type;
  using data_type = BasicDataset<label_type>;
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  // Each step's loss sum and metric sums ride at the end of the gradient
  // buffer, so one collective call combines them across replicas and processes.
  static constexpr std::size_t kStats = 1 + kMetrics;
  static constexpr bool kCentral = central_variables_v<Strategy>;
  // Collectives in shared memory fuse the optimizer into the all-reduce: the
  // replicas share one parameter buffer and each updates the chunk it reduced.
  // (An optimizer state without a ranged step falls back to the full update.)
  static constexpr bool kShardedUpdate =
      !kCentral && std::is_same_v<group_type, HostAllReduce::Group> && is_detected<ranged_step, Optimizer, const float*>;
  // The sharded update reads both replicas' gradients and sums as it goes.
  static constexpr bool kSumAsItReads = kShardedUpdate && is_detected<ranged_step, Optimizer, host::SumOfTwo>;
  // Every replica computes with replica 0's parameters.
  static constexpr bool kSharedVariables = kCentral || kShardedUpdate;

  Executor(const Strategy& strategy, const Optimizer& optimizer)
      : optimizer_(optimizer), pool_(strategy.replicas(), host::Denormals::kFlushToZero) {
    group_.emplace(strategy.replicas());
    // Replicas are threads already: each GEMM gets the cores left per replica
    // (counting the replicas of other processes on this machine).
    host::set_blas_threads(
        std::max(1, Host::hardware_threads() / (strategy.replicas() * group_->processes_on_this_node())));
  }

  int replicas() const { return pool_.size(); }
  int global_replicas() const { return pool_.size() * group_->process_count(); }
  int process_rank() const { return group_->process_rank(); }
  group_type& group() { return *group_; }

  // Makes (or keeps, for the same model object) the replicas' state and
  // mirrors the model's parameters to every replica that owns variables.
  template <class Model>
  void begin_fit(Model& model, const Optimizer& optimizer, std::size_t capacity, std::size_t label_width) {
    optimizer_ = optimizer;
    RunState<Model>& run = run_state(model, capacity, label_width);
    pool_.run([&](int r) {
      if (run.replicas[r]->params.size())
        std::copy(model.parameters().begin(), model.parameters().end(), run.replicas[r]->params.data());
    });
    job_ = [this, &run](int r) { replica_step(run, r, *step_data_, step_batch_); };
  }

  // One synchronous step over the global batch; returns the reduced sums.
  // The host gathers each slice on the replica's own thread, so it has no use
  // for the next batch.
  template <class Model>
  const float* train_step(const Optimizer& optimizer, const data_type& data, StepBatch batch, StepBatch) {
    optimizer_ = optimizer;
    step_data_ = &data;
    step_batch_ = batch;
    run_replicas(job_, abort_);
    return current<Model>().replicas[0]->grads.data() + Model::kParams;
  }

  template <class Model>
  void end_fit(Model& model) {
    const float* p = variables_of(current<Model>(), 0);
    std::copy(p, p + Model::kParams, model.parameters().begin());
  }

  // Loss and metric sums over `data` (summed across processes), computed with
  // `params`, or with the trained variables of the current fit when null.
  template <class Model>
  std::vector<double> evaluate(const float* params, const data_type& data, std::size_t batch_size) {
    require(batch_size >= 1, "evaluate: batch size 0, expected at least 1");
    const int n = replicas(), total = global_replicas(), base = process_rank() * n;
    const std::size_t capacity = Loader::slice_capacity(batch_size, total);
    std::vector<double> sums(static_cast<std::size_t>(n) * kStats, 0.0);
    const std::function<void(int)> job = [&](int r) {
      typename Model::Workspace ws(static_cast<int>(capacity));
      host::AlignedBuffer<float> row_loss(capacity);
      const float* p = params ? params : variables_of(current<Model>(), r);
      double* mine = sums.data() + static_cast<std::size_t>(r) * kStats;
      Loader::for_each_slice(data.size(), batch_size, base + r, total, [&](std::size_t first, int rows) {
        const float* out = Model::forward(p, data.features(first), rows, ws);
        double stats[kStats] = {};
        loss_and_metrics<Model>(out, data.labels(first), rows, 1.0f, row_loss.data(), nullptr, stats);
        for (std::size_t i = 0; i < kStats; ++i) mine[i] += stats[i];
      });
    };
    pool_.run(job);
    return sum_over_replicas(sums, kStats, *group_);
  }

  template <class Model>
  std::vector<float> predict(const float* params, const float* features, std::size_t samples, std::size_t batch_size) {
    std::vector<float> out(samples * Model::kOutputs);
    const int n = replicas();
    const std::size_t capacity = Loader::slice_capacity(batch_size, n);
    const std::function<void(int)> job = [&](int r) {
      typename Model::Workspace ws(static_cast<int>(capacity));
      Loader::for_each_slice(samples, batch_size, r, n, [&](std::size_t first, int rows) {
        const float* y = Model::forward(params, features + first * Model::kInputs, rows, ws);
        std::copy(y, y + static_cast<std::size_t>(rows) * Model::kOutputs,
                  out.begin() + static_cast<std::ptrdiff_t>(first * Model::kOutputs));
      });
    };
    pool_.run(job);
    return out;
  }

 private:
  template <class Model>
  struct Replica {
    // Where the replicas share variables, replica 0 holds them; under
    // CentralStoragePolicy it also holds the only optimizer state (it is the
    // central device), while under the sharded update every replica keeps the
    // state of the chunk it updates.
    Replica(const Optimizer& opt, bool holds_variables, bool holds_optimizer_state)
        : grads(Model::kParams + kStats) {
      if (holds_variables) params.resize(Model::kParams);
      if (holds_optimizer_state) opt_state.emplace(opt, Model::kParams);
    }
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
  using RunState = ModelStates::Of<Replica<Model>>;
  template <class Model>
  RunState<Model>& current() {
    return states_.current<Replica<Model>>();
  }
  template <class Model>
  RunState<Model>& run_state(const Model& model, std::size_t capacity, std::size_t label_width) {
    return states_.get<Replica<Model>>(
        model, replicas(), capacity, label_width, [&](auto&& f) { pool_.run(f); },
        [&](int r) {
          return std::make_unique<Replica<Model>>(optimizer_, !kSharedVariables || r == 0, !kCentral || r == 0);
        });
  }

  // Runs a step on every replica. After a failure the collective is made anew,
  // so the trainer stays usable once the caller has handled the error.
  void run_replicas(const std::function<void(int)>& job, const std::function<void()>& on_failure) {
    try {
      pool_.run(job, on_failure);
    } catch (...) {
      group_->end_job_after_failure(detail::describe(std::current_exception()).c_str());
      group_.emplace(replicas());
      throw;
    }
  }

  // The parameters replica r computes with: its own mirror, or the shared copy.
  template <class Model>
  static float* variables_of(RunState<Model>& run, int r) {
    return run.replicas[kSharedVariables ? 0 : r]->params.data();
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
  void replica_step(RunState<Model>& run, int r, const data_type& data, StepBatch batch) {
    const std::uint32_t* indices = batch.indices;
    const std::size_t count = batch.count;
    Replica<Model>& rep = *run.replicas[r];
    const auto [lo, hi] = Loader::replica_slice(count, process_rank() * replicas() + r, global_replicas());
    const int rows = static_cast<int>(hi - lo);
    float* params = variables_of(run, r);
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
      if constexpr (kShardedUpdate) {
        auto& state = *rep.opt_state;
        const auto update = [&](std::size_t first, std::size_t last, auto summed) {
          state.step(optimizer_, params, summed, first, last);
        };
        if constexpr (kSumAsItReads)
          group_->reduce_update(r, rep.grads.data(), Model::kParams + kStats, Model::kParams, update);
        else  // a state that takes only pointers: the collective sums into a buffer first
          group_->reduce_update(r, rep.grads.data(), Model::kParams + kStats, Model::kParams,
                                [&](std::size_t first, std::size_t last, const float* summed) {
                                  update(first, last, summed);
                                });
      } else {
        group_->all_reduce(r, rep.grads.data(), Model::kParams + kStats, ReduceOp::kSum);
        rep.opt_state->step(optimizer_, rep.params.data(), rep.grads.data());
      }
    }
  }

  Optimizer optimizer_;
  host::ReplicaPool pool_;
  std::optional<group_type> group_;
  ModelStates states_;
  // The step job, built once per fit so that no step allocates, and what it reads.
  std::function<void(int)> job_;
  const std::function<void()> abort_ = [this] { group_->abort(); };
  const data_type* step_data_ = nullptr;
  StepBatch step_batch_;
};

}  // namespace lockstep::detail
