// Executor<Host, ...>: runs a Trainer's replicas as threads of this process
// (replica 0 is the calling thread). It supplies what the step skeleton
// (train/step.hpp) needs on the host: the threads, each replica's buffers
// (allocated on its own thread), a host::Context, and the collective's group.
// How a step combines gradients is the strategy's StepRule; where the rule's
// variables are shared (the sharded update, central storage) every replica
// computes with replica 0's copy, since threads share memory. In the
// deterministic mode (core/determinism.hpp) by units, each unit of the batch
// is a logical replica, a thread of its own, and as many of them compute at
// once as the default mode would keep cores busy (host::Permits); in row
// order, the replicas compute with the chain GEMM and take every sum over
// rows together (host::RowOrderSums).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/context.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/determinism.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/layers/pass.hpp"
#include "lockstep/observe/placement.hpp"
#include "lockstep/observe/profiler.hpp"
#include "lockstep/observe/tracer.hpp"
#include "lockstep/strategy/all_reduce_update.hpp"
#include "lockstep/strategy/profiled.hpp"
#include "lockstep/strategy/sharded_update.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"
#include "lockstep/train/executor.hpp"
#include "lockstep/train/row_order.hpp"
#include "lockstep/train/step.hpp"

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

template <class Strategy, class Optimizer, class Loss, class... Metric>
class Executor<Host, Strategy, Optimizer, Loss, Metrics<Metric...>> {
 public:
  using collective = typename Strategy::collective;
  using group_type = typename group_of<Strategy>::type;
  using context_type = host::Context;
  using state_type = typename Optimizer::template State<context_type>;
  // The strategy's step, except that an optimizer needing the whole gradient
  // in one update (GlobalClipNorm) takes the mirrored step instead of the sharded one.
  using rule = std::conditional_t<needs_whole_gradient<state_type>::value &&
                                      std::is_base_of_v<ShardedUpdate, StepRule<Strategy>>,
                                  AllReduceUpdate, StepRule<Strategy>>;
  using skeleton = StepSkeleton<Loss, Metrics<Metric...>>;
  using label_type = typename Loss::label_type;
  using data_type = BasicDataset<label_type>;
  static_assert(check_group<group_type, host::Queue>());
  static_assert(sizeof(rule) > 0);  // a strategy without a StepRule gets its sentence here
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  // Each step's loss sum and metric sums ride at the end of the gradient
  // buffer, so one collective call combines them across replicas and processes.
  static constexpr std::size_t kStats = skeleton::kStats;
  // Every replica computes with replica 0's variables: threads share memory.
  static constexpr bool kSharedVariables = rule::kVariables != Variables::kMirrored;
  // What the tests ask of the rule: the sharded update, and whether it sums as it reads.
  static constexpr bool kShardedUpdate = std::is_same_v<rule, ShardedUpdate> || std::is_base_of_v<ShardedUpdate, rule>;
  static constexpr bool kSumAsItReads = kShardedUpdate && ShardedUpdate::sums_as_it_reads<state_type, context_type>;
  // Profiled<Strategy> gives each replica's pass a track (strategy/profiled.hpp);
  // any other strategy's step has no tracer at all.
  static constexpr bool kProfiled = is_profiled_v<Strategy>;
  using tracer = std::conditional_t<kProfiled, observe::Traced, observe::NoTrace>;

  Executor(const Strategy& strategy, const Optimizer& optimizer)
      : optimizer_(optimizer),
        communication_(communication_of(strategy)),
        deterministic_(determinism_of(strategy)) {
    pool_.emplace(strategy.replicas(), host::Denormals::kFlushToZero);
    make_group();
    if (deterministic_.row_order) make_row_order();
    if (deterministic_.by_units()) {
      // The units of this process become its logical replicas; the group
      // sums them in unit order. As many run at once as the default mode
      // would keep cores busy (its replicas, or its GEMM threads: every core
      // of this process's share of the machine), and at least the replicas.
      const int units = units_per_process(deterministic_, strategy.replicas(), group_->process_count());
      const int cores = std::max(1, Host::hardware_threads() / group_->processes_on_this_node());
      if (units != strategy.replicas()) {
        group_.reset();
        pool_.reset();
        pool_.emplace(units, host::Denormals::kFlushToZero, std::max(strategy.replicas(), cores));
        make_group();
      }
    }
    pool_->set_timeout(communication_.timeout_seconds);
    if constexpr (kProfiled) observe::session().set_process(process_rank(), group_->process_count(), global_replicas());
    // Replicas are threads already: each GEMM gets the cores left per replica
    // (counting the replicas of other processes on this machine). The
    // deterministic mode gives each one thread: a library may split a
    // product's sums over its threads differently for another count.
    // The pool's threads hold that count for every job, whatever another
    // trainer of the process sets later (host::ScopedGemmThreads).
    if (deterministic_.by_units()) pool_->set_gemm_threads(1);
    host::set_blas_threads(deterministic_.by_units()
                               ? 1
                               : std::max(1, Host::hardware_threads() /
                                                 (strategy.replicas() * group_->processes_on_this_node())));
  }

  // The deterministic mode the executor runs in (units 0: off).
  const Deterministic& deterministic() const { return deterministic_; }

  int replicas() const { return pool_->size(); }
  int global_replicas() const { return pool_->size() * group_->process_count(); }
  int process_rank() const { return group_->process_rank(); }
  group_type& group() { return *group_; }
  template <class Model>
  bool holds(const Model& model) const {
    return states_.holds(model);
  }
  // Where each replica runs, for the placement log: asked on each replica's
  // own thread (its id, its core, its affinity).
  std::vector<observe::ReplicaPlacement> placement_records() {
    std::vector<observe::ReplicaPlacement> out(static_cast<std::size_t>(replicas()));
    const std::string host = observe::host_name();
    const int rank = process_rank();
    pool_->run([&](int r) { out[static_cast<std::size_t>(r)] = observe::this_thread_placement(rank, r, host); });
    return out;
  }

  // Makes (or keeps, for the same model object) the replicas' state and
  // mirrors the model's parameters and state to the replicas.
  template <class Model>
  void begin_fit(Model& model, const Optimizer& optimizer, std::size_t capacity, std::size_t label_width) {
    if constexpr (kProfiled) Model::layer_name(0);  // the span names, made outside any step
    check_row_order<Model>();
    optimizer_ = optimizer;
    check_batch_buffers<Model>("fit", capacity, label_width, true);
    RunState<Model>& run = run_state(model, capacity, label_width);
    pool_->run([&](int r) { load(run, r, model.parameters().data(), model.state().data()); });
    job_ = [this, &run](int r) { replica_step(run, r); };
    steps_in_fit_ = 0;
  }

  // One synchronous step over the global batch; returns the reduced sums.
  // The host gathers each slice on the replica's own thread, so it has no use
  // for the next batch.
  template <class Model>
  const float* train_step(const Optimizer& optimizer, const data_type& data, StepBatch batch, StepBatch,
                          std::uint64_t key) {
    optimizer_ = optimizer;
    step_data_ = &data;
    step_batch_ = batch;
    step_key_ = key;
    set_group_step(*group_, steps_in_fit_);  // for a timeout's message
    run_replicas(job_, abort_);
    set_group_step(*group_, -1);
    ++steps_in_fit_;
    if constexpr (kProfiled) mark_waits();
    ++steps_;
    return current<Model>().replicas[0]->grads.data() + Model::kParams;
  }

  // The live parameters and state into `model` (replica 0's: all agree).
  template <class Model>
  void copy_out(Model& model) {
    copy_out_to<Model>(model.parameters().data(), model.state().data());
  }
  template <class Model>
  void copy_out_to(float* params, float* state) {
    RunState<Model>& run = current<Model>();
    const float* p = variables_of(run, 0);
    std::copy(p, p + Model::kParams, params);
    const float* s = run.replicas[0]->state.data();
    std::copy(s, s + Model::kState, state);
  }
  // f(r, state, ctx) for each replica r that holds optimizer state.
  template <class Model, class F>
  void for_each_optimizer_state(F&& f) {
    host::Context ctx;
    for (int r = 0; r < replicas(); ++r) {
      Replica<Model>& rep = *current<Model>().replicas[static_cast<std::size_t>(r)];
      if (rep.opt_state) f(r, *rep.opt_state, ctx);
    }
  }
  template <class Model>
  void restore(Model& model, const Snapshot& from, std::size_t capacity, std::size_t label_width) {
    check_snapshot<Model>(from);
    RunState<Model>& run = run_state(model, capacity, label_width);
    pool_->run([&](int r) {
      load(run, r, from.params.data(), from.state.data());
      Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
      host::Context ctx;
      if (rep.opt_state) scatter_slots(*rep.opt_state, ctx, from);
    });
  }

  // Loss and metric sums over `data` (summed across processes), computed with
  // `params` and `state`, or with the trained ones of the current fit when null.
  template <class Model>
  std::vector<double> evaluate(const float* params, const float* state, const data_type& data,
                               std::size_t batch_size) {
    require(batch_size >= 1, "evaluate: batch size 0, expected at least 1");
    check_row_order<Model>();
    const int n = replicas(), total = global_replicas(), base = process_rank() * n;
    const std::size_t capacity = Loader::slice_capacity(batch_size, data.size(), total);
    check_batch_buffers<Model>("evaluate", capacity, 0, false);
    std::vector<double> sums(static_cast<std::size_t>(n) * kStats, 0.0);
    // The row-order scheme keeps each sample's values (0 for another
    // process's samples), summed in sample order below.
    std::vector<double> per_sample(row_order_ ? data.size() * kStats : 0);
    const std::function<void(int)> job = [&](int r) {
      host::Context ctx(gemm_path());
      typename Model::Workspace ws(static_cast<int>(capacity));
      host::AlignedBuffer<float> row_stats(capacity * kStats), own_state(Model::kState);
      const float* p = params ? params : variables_of(current<Model>(), r);
      const std::size_t ri = static_cast<std::size_t>(r);
      float* s = inference_state<Model>(own_state, params ? state : current<Model>().replicas[ri]->state.data());
      double* mine = sums.data() + ri * kStats;
      Loader::for_each_slice(data.size(), batch_size, base + r, total, [&](std::size_t first, int rows) {
        const float* out = Model::forward(ctx, Pass{}, p, s, data.features(first), rows, ws);
        float stats[kStats] = {};
        skeleton::template loss_and_metrics<Model::kOutputs>(ctx, out, data.labels(first), rows, 1.0f,
                                                             row_stats.data(), capacity, static_cast<float*>(nullptr),
                                                             stats);
        for (std::size_t i = 0; i < kStats; ++i) mine[i] += stats[i];
        if (row_order_)
          for (std::size_t i = 0; i < kStats; ++i)
            std::copy(row_stats.data() + i * capacity, row_stats.data() + i * capacity + static_cast<std::size_t>(rows),
                      per_sample.begin() + static_cast<std::ptrdiff_t>(i * data.size() + first));
      });
    };
    pool_->run(job);
    if (row_order_) {
      // Every process's values, exactly: each sample's is nonzero on one process at most.
      group_->sum_across_processes(per_sample.data(), per_sample.size());
      std::vector<double> out(kStats, 0.0);
      for (std::size_t i = 0; i < kStats; ++i)
        for (std::size_t k = 0; k < data.size(); ++k) out[i] += per_sample[i * data.size() + k];
      return out;
    }
    return sum_over_replicas(sums, kStats, *group_);
  }

  template <class Model>
  std::vector<float> predict(const float* params, const float* state, const float* features, std::size_t samples,
                             std::size_t batch_size) {
    std::vector<float> out(samples * Model::kOutputs);
    const int n = replicas();
    const std::size_t capacity = Loader::slice_capacity(batch_size, samples, n);
    check_batch_buffers<Model>("predict", capacity, 0, false);
    check_row_order<Model>();
    const std::function<void(int)> job = [&](int r) {
      host::Context ctx(gemm_path());
      typename Model::Workspace ws(static_cast<int>(capacity));
      host::AlignedBuffer<float> own_state(Model::kState);
      float* s = inference_state<Model>(own_state, state);
      Loader::for_each_slice(samples, batch_size, r, n, [&](std::size_t first, int rows) {
        const float* y = Model::forward(ctx, Pass{}, params, s, features + first * Model::kInputs, rows, ws);
        std::copy(y, y + static_cast<std::size_t>(rows) * Model::kOutputs,
                  out.begin() + static_cast<std::ptrdiff_t>(first * Model::kOutputs));
      });
    };
    pool_->run(job);
    return out;
  }

 private:
  template <class Model>
  struct Replica {
    // Where the replicas share variables, replica 0 holds them; optimizer
    // state is where the rule says (every replica, its shard, or replica 0).
    Replica(const Optimizer& opt, bool holds_variables, bool holds_optimizer_state)
        : grads(Model::kParams + kStats), state(Model::kState) {
      if (holds_variables) params.resize(Model::kParams);
      if (holds_optimizer_state) {
        opt_state.emplace(opt, Model::kParams);
        give_variables<Model>(*opt_state);
      }
    }
    // Step buffers follow the batch size; parameters and optimizer slots stay.
    void resize(std::size_t capacity, std::size_t label_width) {
      ws = typename Model::Workspace(static_cast<int>(capacity));
      x.resize(capacity * Model::kInputs);
      labels.assign(capacity * label_width, label_type{});
      row_stats.resize(capacity * kStats);
    }
    host::AlignedBuffer<float> params, grads;
    host::AlignedBuffer<float> state;  // non-trainable: every replica its own, kept equal by the layers
    std::optional<state_type> opt_state;
    typename Model::Workspace ws;
    host::AlignedBuffer<float> x;
    std::vector<label_type> labels;
    host::AlignedBuffer<float> row_stats;
  };
  template <class Model>
  using RunState = ModelStates::Of<Replica<Model>>;

  // A pass's sum over replicas: this group's all-reduce of a small buffer.
  struct ReplicaSum {
    group_type* group;
    int replica;
    template <class T>
    void operator()(T* data, std::size_t count) const {
      static_assert(std::is_same_v<T, float>, "The sum over replicas of a training pass is in float.");
      group->all_reduce(replica, data, count, host::Queue{});
    }
  };

 public:
  // What a replica's step tells its layers: the sum over replicas, the
  // tracer, and the sums over rows (the row-order scheme's, or its own rows').
  using pass_type = BasicPass<ReplicaSum, tracer, host::RowOrderSums>;

 private:

  // The view of one replica's step that the skeleton and the rule use.
  template <class Model>
  class ReplicaStep : public ReplicaBuffers<Model, Replica<Model>, kStats> {
   public:
    using group_type = typename Executor::group_type;
    using state_type = typename Executor::state_type;
    using context_type = host::Context;
    static constexpr bool kSharedMemory = true;
    static constexpr bool kCanOverlap = false;

    static constexpr const char* kCollectiveName = collective::kName;

    ReplicaStep(Executor& ex, RunState<Model>& run, int r, pass_type pass)
        : ReplicaBuffers<Model, Replica<Model>, kStats>(*run.replicas[static_cast<std::size_t>(r)]), ex_(ex), r_(r),
          pass_(pass), variables_(variables_of(run, r)), ctx_(ex.gemm_path()) {}
    group_type& group() { return *ex_.group_; }
    int replica() const { return r_; }
    host::Queue queue() const { return {}; }
    host::Context& context() { return ctx_; }
    const pass_type& pass() const { return pass_; }
    float* variables() { return variables_; }
    template <class Grads>
    void update(std::size_t first, std::size_t last, Grads grads) {
      const auto span = observe::scope(pass_, observe::Phase::kUpdate, "update");
      this->rep_.opt_state->step(ctx_, variables_, grads, first, last);
    }

   private:
    Executor& ex_;
    int r_;
    pass_type pass_;
    float* variables_;
    host::Context ctx_;
  };

  template <class Model>
  RunState<Model>& current() {
    return states_.current<Replica<Model>>();
  }
  template <class Model>
  RunState<Model>& run_state(const Model& model, std::size_t capacity, std::size_t label_width) {
    try {
      return states_.get<Replica<Model>>(
          model, replicas(), capacity, label_width, [&](auto&& f) { pool_->run(f); },
          [&](int r) {
            return std::make_unique<Replica<Model>>(optimizer_, !kSharedVariables || r == 0,
                                                    rule::holds_optimizer_state(r));
          });
    } catch (const std::exception& e) {  // std::bad_alloc, std::length_error, a host buffer's Error
      fail("could not allocate the buffers of ", replicas(), " replicas for ", capacity,
           " rows each (the batch size, or the data set's samples if fewer, over the replicas): ", e.what(),
           "; use a smaller batch size");
    }
  }

  // The buffers a replica makes for `rows` rows of a batch, checked before
  // they are allocated: their bytes (all replicas together) against this
  // machine's physical memory, and the rows against the int the layers take.
  // Training adds the batch's inputs and labels to the workspace.
  template <class Model>
  void check_batch_buffers(const char* where, std::size_t rows, std::size_t label_width, bool training) const {
    const double r = static_cast<double>(rows);
    double floats = Model::Workspace::values(r) + r * static_cast<double>(kStats);
    if (training) floats += r * Model::kInputs;
    const double bytes = static_cast<double>(replicas()) *
                         (floats * static_cast<double>(sizeof(float)) + r * static_cast<double>(label_width * sizeof(label_type)));
    const double memory = host::physical_memory_bytes();
    if (memory > 0 && bytes > memory)
      fail(where, ": a batch of ", rows, " rows per replica (the batch size, or the data set's samples if fewer, over ",
           global_replicas(), " replicas) needs ", host::byte_count(bytes), " of buffers on the ", replicas(),
           " replicas of this process, more than this machine's ", host::byte_count(memory),
           " of memory; use a smaller batch size");
    require(rows <= static_cast<std::size_t>(std::numeric_limits<int>::max()), where, ": a batch of ", rows,
            " rows per replica (the batch size, or the data set's samples if fewer, over ", global_replicas(),
            " replicas), expected at most ", std::numeric_limits<int>::max(), "; use a smaller batch size");
  }

  void make_group() {
    std::vector<int> slots(static_cast<std::size_t>(pool_->size()));
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int>(i);
    group_.emplace(slots);
    configure_group(*group_, communication_);
    if (deterministic_.by_units()) in_unit_order(*group_);
  }

  // The row-order scheme's table: this process's replicas, and across
  // processes the group's exchange of rows (a group that has none cannot).
  void make_row_order() {
    row_order_.emplace(pool_->size(), communication_.timeout_seconds);
    if (group_->process_count() == 1) return;
    if constexpr (is_detected<group_all_gather_bytes, group_type>) {
      row_order_->across_processes(group_->process_rank(), group_->process_count(),
                                   [this](const std::vector<char>& mine, std::vector<char>& all,
                                          std::vector<int>& sizes) { group_->all_gather_bytes(mine, all, sizes); });
    } else {
      fail("Deterministic::in_row_order(): ", collective::kName, " cannot exchange the rows of its ",
           group_->process_count(), " processes; use MultiWorkerMirroredPolicy<MpiAllReduce>, or Deterministic{units}");
    }
  }
  template <class G>
  using group_all_gather_bytes = decltype(std::declval<G&>().all_gather_bytes(
      std::declval<const std::vector<char>&>(), std::declval<std::vector<char>&>(), std::declval<std::vector<int>&>()));

  // The row-order scheme computes every GEMM with the chain GEMM.
  host::Context::GemmPath gemm_path() const {
    return row_order_ ? host::Context::GemmPath::kChain : host::Context::GemmPath::kBuild;
  }
  // An Error naming the first layer the row-order scheme cannot run.
  template <class Model>
  void check_row_order() const {
    if constexpr (Model::kFirstWithoutRowOrder < Model::kLayers) {
      if (row_order_)
        fail("Deterministic::in_row_order(): layer ", Model::kFirstWithoutRowOrder, " (",
             Model::layer_name(Model::kFirstWithoutRowOrder), ") takes sums over rows that the row-order scheme "
             "does not run (it runs Dense, SyncBatchNormalization, activations, Dropout, Flatten, Reshape, pooling "
             "and Softmax; a per-replica BatchNormalization's statistics depend on the replica count); use "
             "Deterministic{units} (for example 24) for this model");
    }
  }

  // Runs a step on every replica. After a failure the collective is made anew,
  // so the trainer stays usable once the caller has handled the error.
  void run_replicas(const std::function<void(int)>& job, const std::function<void()>& on_failure) {
    try {
      pool_->run(job, on_failure);
    } catch (...) {
      group_->end_job_after_failure(detail::describe(std::current_exception()).c_str());
      make_group();
      if (row_order_) make_row_order();
      throw;
    }
  }

  // The parameters replica r computes with: its own mirror, or the shared copy.
  template <class Model>
  static float* variables_of(RunState<Model>& run, int r) {
    return run.replicas[kSharedVariables ? 0 : static_cast<std::size_t>(r)]->params.data();
  }

  // Parameters (where replica r holds them) and state from host memory.
  template <class Model>
  static void load(RunState<Model>& run, int r, const float* params, const float* state) {
    Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
    if (rep.params.size()) std::copy(params, params + Model::kParams, rep.params.data());
    if (Model::kState) std::copy(state, state + Model::kState, rep.state.data());
  }
  // Inference's state: the given one, copied so a pass may not change it.
  template <class Model>
  static float* inference_state(host::AlignedBuffer<float>& own, const float* state) {
    if (Model::kState) std::copy(state, state + Model::kState, own.data());
    return own.data();
  }

  // One synchronous step on local replica r, whose global index is
  // rank * replicas() + r: its slice of the global batch is fixed by that.
  template <class Model>
  void replica_step(RunState<Model>& run, int r) {
    Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
    pass_type pass;
    if constexpr (kProfiled) pass.track_ = observe::session().track(r);  // null unless the profiler records
    const auto span = observe::scope(pass, observe::Phase::kStep, "step", steps_);
    const auto [lo, hi] = Loader::replica_slice(step_batch_.count, process_rank() * replicas() + r, global_replicas());
    {
      const auto data_span = observe::scope(pass, observe::Phase::kData, "gather batch");
      gather(*step_data_, step_batch_.indices + lo, hi - lo, rep.x.data(), rep.labels.data());
    }
    if (rep.opt_state) prepare_step(*rep.opt_state, optimizer_);
    pass.mode = Mode::kTraining;
    pass.first_row = lo;
    pass.key = step_key_;
    pass.sum = ReplicaSum{&*group_, r};
    pass.rows = host::RowOrderSums(row_order_ ? &*row_order_ : nullptr, r);
    ReplicaStep<Model> step(*this, run, r, pass);
    skeleton::template train<Model, rule>(step, static_cast<int>(hi - lo), step_batch_.count);
  }

  // The profiler's waits of the step just run: how long each replica stood
  // in the collective before the last one arrived (observe/tracer.hpp).
  void mark_waits() {
    observe::Session& session = observe::session();
    if (!session.recording()) return;
    std::vector<observe::Track*> tracks;
    for (int r = 0; r < replicas(); ++r) tracks.push_back(session.track(r));
    observe::mark_collective_waits(tracks);
  }

  Optimizer optimizer_;
  CommunicationOptions communication_;  // the strategy's: every wait's timeout
  Deterministic deterministic_;         // the strategy's: units as logical replicas, summed in unit order
  std::optional<host::ReplicaPool> pool_;
  std::optional<group_type> group_;
  std::optional<host::RowOrderTable> row_order_;  // the row-order scheme's: where each replica's rows are
  ModelStates states_;
  // The step job, built once per fit so that no step allocates, and what it reads.
  std::function<void(int)> job_;
  const std::function<void()> abort_ = [this] {
    group_->abort();
    if (row_order_) row_order_->abort();
  };
  const data_type* step_data_ = nullptr;
  StepBatch step_batch_;
  std::uint64_t step_key_ = 0;
  std::uint64_t steps_ = 0;  // steps run by this executor: the profiler's step index
  std::int64_t steps_in_fit_ = 0;  // the step of the current fit, counted over its epochs: for timeouts
};

}  // namespace lockstep::detail
