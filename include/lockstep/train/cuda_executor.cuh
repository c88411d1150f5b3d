// Executor<Cuda, ...>: runs a Trainer's replicas on GPUs, one host thread per
// replica (replica 0 is the calling thread), each with its device current,
// its own compute stream, communication stream, copy stream, cuBLAS handles
// and memory.
// It supplies what the step skeleton (train/step.hpp) needs on GPUs; how a
// step combines gradients is the strategy's StepRule. Per step a replica
//   1. takes its slice of the batch, which was gathered into pinned memory and
//      copied to a device staging buffer on the copy stream while the
//      previous step computed, into the buffers the step reads (a
//      device-to-device copy on the compute stream, after the copy's event:
//      the step, and a graph captured from it, always read the same pointers),
//   2. writes the step's scalars (the optimizer's, the random key) into
//      pinned memory that the kernels read when they run,
//   3. runs the skeleton on its stream: from a CUDA graph captured once when
//      shapes repeat, or enqueued directly for the first step and a short
//      last batch; with a collective that takes parts of the buffer
//      (NcclAllReduce) the mirrored rule reduces each layer's gradient on the
//      communication stream as soon as backward has produced it,
//   4. gathers the next batch's slice into the other pinned buffer while the
//      GPU works and enqueues its copy to the staging buffer on the copy
//      stream (after this step's read of it), so that it overlaps this step's
//      compute, then waits for its stream: with a deadline
//      (CudaOptions::collective_timeout_seconds), polling the collective's
//      asynchronous errors (NCCL), and stopping when another replica failed.
//      A timeout or an asynchronous error is a lockstep::Error naming the
//      collective, the step and the replicas that had not finished; the
//      communicators are then aborted and made anew.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/context.cuh"
#include "lockstep/backend/cuda/device.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/backend/cuda/stream_trace.cuh"
#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/determinism.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/layers/pass.hpp"
#include "lockstep/observe/placement.hpp"
#include "lockstep/observe/profiler.hpp"
#include "lockstep/observe/tracer.hpp"
#include "lockstep/strategy/profiled.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"
#include "lockstep/train/executor.hpp"
#include "lockstep/train/host_executor.hpp"
#include "lockstep/train/step.hpp"

namespace lockstep {

// What a CUDA trainer does beyond the strategy: trainer.executor().options().
struct CudaOptions {
  bool graphs = true;            // capture the step as a CUDA graph when shapes repeat
  bool tf32 = false;             // TF32 tensor cores for the GEMMs (10-bit mantissa)
  bool log_placement = false;    // print which GPU each replica runs on (tf.debugging.set_log_device_placement)
  // How long a replica waits for its step to finish on the GPU before the step
  // is an Error and the collective's communicators are aborted (as PyTorch's
  // and TensorFlow's collective timeouts). The executor sets it from the
  // strategy's CommunicationOptions::timeout_seconds, the one option of every
  // wait (the group's barriers and MPI calls, the replica pool, this); set
  // here afterwards it changes this GPU wait only. 0 or less: no deadline.
  double collective_timeout_seconds = CommunicationOptions{}.timeout_seconds;
};

namespace detail {

// group.async_error(replica): a collective that reports asynchronous errors
// (NcclCommunicators; "" while healthy). Others have none to poll.
template <class G>
using group_async_error = decltype(std::declval<const G&>().async_error(0));

template <class Strategy, class Optimizer, class Loss, class... Metric>
class Executor<Cuda, Strategy, Optimizer, Loss, Metrics<Metric...>> {
 public:
  using collective = typename Strategy::collective;
  using group_type = typename group_of<Strategy>::type;
  using context_type = gpu::Context;
  using rule = StepRule<Strategy>;
  using state_type = typename Optimizer::template State<context_type>;
  using skeleton = StepSkeleton<Loss, Metrics<Metric...>>;
  using label_type = typename Loss::label_type;
  using data_type = BasicDataset<label_type>;
  // Profiled<Strategy> times each replica's step on its compute stream
  // (backend/cuda/stream_trace.cuh); any other strategy's step has no tracer.
  static constexpr bool kProfiled = is_profiled_v<Strategy>;
  using tracer = std::conditional_t<kProfiled, gpu::StreamTraced, observe::NoTrace>;
  static_assert(check_group<group_type, cudaStream_t>());
  static_assert(sizeof(rule) > 0);  // a strategy without a StepRule gets its sentence here
  static_assert(rule::kVariables != Variables::kShared,
                "This strategy's step shares one copy of the variables between replicas, which needs shared "
                "memory: GPU replicas mirror them (MirroredPolicy<NcclAllReduce>) or keep them centrally "
                "(CudaCentralStoragePolicy).");
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  static constexpr std::size_t kStats = skeleton::kStats;

  Executor(const Strategy& strategy, const Optimizer& optimizer)
      : optimizer_(optimizer), deterministic_(determinism_of(strategy)),
        devices_(unit_devices(resolve_devices(strategy))),
        infos_(gpu::check_devices(devices_, strategy.heterogeneous(), nullptr, shared_devices<group_type>::value)),
        pool_(static_cast<int>(devices_.size())), progress_(new std::atomic<int>[devices_.size()]) {
    for (std::size_t r = 0; r < devices_.size(); ++r) progress_[r].store(kFinished, std::memory_order_relaxed);
    communication_ = communication_of(strategy);
    options_.collective_timeout_seconds = communication_.timeout_seconds;
    pool_.set_timeout(communication_.timeout_seconds);
    group_.emplace(devices_);
    configure_group(*group_, communication_);
    contexts_.resize(devices_.size());
    pool_.run([&](int r) {
      gpu::DeviceGuard on(devices_[static_cast<std::size_t>(r)]);
      contexts_[static_cast<std::size_t>(r)] = std::make_unique<ReplicaContext>(devices_[static_cast<std::size_t>(r)]);
      if (deterministic_.enabled()) {
        // cuDNN's deterministic algorithms only, chosen by its heuristic
        // (timing them could pick another one on another run).
        gpu::ConvOptions& conv = ctx(r).compute.conv_options();
        conv.deterministic = true;
        conv.search = gpu::ConvSearch::kHeuristic;
      }
    });
    if constexpr (kProfiled) observe::session().set_process(process_rank(), group_->process_count(), global_replicas());
  }

  int replicas() const { return pool_.size(); }
  int global_replicas() const { return pool_.size() * group_->process_count(); }
  // The deterministic mode the executor runs in (units 0: off).
  const Deterministic& deterministic() const { return deterministic_; }
  int process_rank() const { return group_->process_rank(); }
  group_type& group() { return *group_; }
  template <class Model>
  bool holds(const Model& model) const {
    return states_.holds(model);
  }
  CudaOptions& options() { return options_; }
  const std::vector<gpu::DeviceInfo>& devices() const { return infos_; }
  // One line per replica of this process, as the placement log writes them
  // (observe/placement.hpp): its TensorFlow device, GPU and driving thread.
  std::string placement() {
    std::string out;
    for (const std::string& line : placement_lines()) out += line + '\n';
    return out;
  }
  // Where each replica runs, for the placement log: its GPU (name, compute
  // capability, memory, PCI bus) and the host thread that drives it, asked on that thread.
  std::vector<observe::ReplicaPlacement> placement_records() {
    std::vector<observe::ReplicaPlacement> out(devices_.size());
    const std::string host = observe::host_name();
    const int rank = process_rank();
    pool_.run([&](int r) {
      const std::size_t i = static_cast<std::size_t>(r);
      const gpu::DeviceInfo& d = infos_[i];
      observe::ReplicaPlacement& p = out[i];
      p = observe::this_thread_placement(rank, r, host);
      p.gpu = true;
      p.device_index = d.index;
      p.gpu_name = d.name;
      p.compute_capability = d.compute_capability();
      p.memory_bytes = d.memory_bytes;
      char bus[32] = {};
      if (cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus), d.index) == cudaSuccess)
        p.pci_bus_id = bus;
      else
        (void)cudaGetLastError();  // the bus id is optional: clear the error for later checks
    });
    return out;
  }

  template <class Model>
  void begin_fit(Model& model, const Optimizer& optimizer, std::size_t capacity, std::size_t label_width) {
    if constexpr (kProfiled) Model::layer_name(0);  // the span names, made outside any step
    optimizer_ = optimizer;
    // options().log_placement: this process's replica lines at every fit,
    // unless the process-wide log (lockstep::log_device_placement) writes the job's.
    if (options_.log_placement && !logging_device_placement()) observe::write_placement(placement_lines());
    RunState<Model>& run = run_state(model, capacity, label_width);
    on_replicas([&](int r) {
      Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
      load(rep, ctx(r).compute, model.parameters().data(), model.state().data());
      ctx(r).compute.set_tf32(options_.tf32);
      rep.graph.reset();  // the options may have changed
      rep.graph_key = {};
      // Also forget the last fit's shapes: the first step of a fit runs
      // eagerly, as it may plan a cuBLASLt shape for buffers that moved,
      // which a capture does not allow.
      rep.last_key = {};
      rep.prefetched = false;
    });
    steps_in_fit_ = 0;
    // Built once, so that no step allocates.
    job_ = [this, &run](int r) {
      gpu::DeviceGuard on(devices_[static_cast<std::size_t>(r)]);
      replica_step(run, r);
    };
  }

  template <class Model>
  const float* train_step(const Optimizer& optimizer, const data_type& data, StepBatch batch, StepBatch next,
                          std::uint64_t key) {
    optimizer_ = optimizer;
    step_data_ = &data;
    step_batch_ = batch;
    next_batch_ = next;
    step_key_ = key;
    step_index_ = steps_in_fit_++;
    for (int r = 0; r < replicas(); ++r)
      progress_[static_cast<std::size_t>(r)].store(kEnqueuing, std::memory_order_relaxed);
    set_group_step(*group_, static_cast<std::int64_t>(step_index_));  // for a timeout's message
    run_on_replicas(job_);  // the pool's start publishes progress_ to the replica threads
    set_group_step(*group_, -1);
    return current<Model>().replicas[0]->stats.data();
  }

  // The live parameters and state into `model` (replica 0's: all agree).
  template <class Model>
  void copy_out(Model& model) {
    copy_out_to<Model>(model.parameters().data(), model.state().data());
  }
  template <class Model>
  void copy_out_to(float* params, float* state) {
    Replica<Model>& rep = *current<Model>().replicas[0];
    gpu::DeviceGuard on(devices_[0]);
    ctx(0).compute.to_host(params, rep.params.data(), Model::kParams);
    ctx(0).compute.to_host(state, rep.state.data(), Model::kState);
  }
  // f(r, state, ctx) for each replica r that holds optimizer state, its device current.
  template <class Model, class F>
  void for_each_optimizer_state(F&& f) {
    for (int r = 0; r < replicas(); ++r) {
      Replica<Model>& rep = *current<Model>().replicas[static_cast<std::size_t>(r)];
      gpu::DeviceGuard on(devices_[static_cast<std::size_t>(r)]);
      if (rep.opt_state) f(r, *rep.opt_state, ctx(r).compute);
    }
  }
  template <class Model>
  void restore(Model& model, const Snapshot& from, std::size_t capacity, std::size_t label_width) {
    check_snapshot<Model>(from);
    RunState<Model>& run = run_state(model, capacity, label_width);
    on_replicas([&](int r) {
      Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
      load(rep, ctx(r).compute, from.params.data(), from.state.data());
      if (rep.opt_state) scatter_slots(*rep.opt_state, ctx(r).compute, from);
    });
  }

  // Loss and metric sums over `data`, with `params` and `state` (host
  // memory) or, when null, the trained ones of the current fit.
  template <class Model>
  std::vector<double> evaluate(const float* params, const float* state, const data_type& data,
                               std::size_t batch_size) {
    require(batch_size >= 1, "evaluate: batch size 0, expected at least 1");
    const int n = replicas(), total = global_replicas(), base = process_rank() * n;
    const std::size_t capacity = Loader::slice_capacity(batch_size, data.size(), total);
    std::vector<double> sums(static_cast<std::size_t>(n) * kStats, 0.0);
    on_replicas([&](int r) {
      gpu::Context& c = ctx(r).compute;
      Inference<Model> inf(capacity, params != nullptr);
      const std::size_t ri = static_cast<std::size_t>(r);
      const float* p = params ? inf.upload(c, params, state) : current<Model>().replicas[ri]->params.data();
      float* s = params ? inf.state.data() : current<Model>().replicas[ri]->state.data();
      gpu::DeviceBuffer<label_type> labels(capacity * data.label_width());
      gpu::DeviceBuffer<float> row_stats(capacity * kStats), stats(kStats);
      gpu::PinnedBuffer<float> host_stats(kStats);
      double* mine = sums.data() + ri * kStats;
      Loader::for_each_slice(data.size(), batch_size, base + r, total, [&](std::size_t first, int rows) {
        if (rows == 0) return;
        const std::size_t count = static_cast<std::size_t>(rows);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(inf.x.data(), data.features(first), count * Model::kInputs * sizeof(float),
                                            cudaMemcpyHostToDevice, c.stream()));
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(labels.data(), data.labels(first),
                                            count * data.label_width() * sizeof(label_type), cudaMemcpyHostToDevice,
                                            c.stream()));
        const float* out = Model::forward(c, Pass{}, p, s, inf.x.data(), rows, inf.ws);
        skeleton::template loss_and_metrics<Model::kOutputs>(c, out, labels.data(), rows, 1.0f, row_stats.data(),
                                                             capacity, static_cast<float*>(nullptr), stats.data());
        c.to_host(host_stats.data(), stats.data(), kStats);
        for (std::size_t i = 0; i < kStats; ++i) mine[i] += host_stats.data()[i];
      });
      c.synchronize();
    });
    return sum_over_replicas(sums, kStats, *group_);
  }

  template <class Model>
  std::vector<float> predict(const float* params, const float* state, const float* features, std::size_t samples,
                             std::size_t batch_size) {
    std::vector<float> out(samples * Model::kOutputs);
    const int n = replicas();
    const std::size_t capacity = Loader::slice_capacity(batch_size, samples, n);
    on_replicas([&](int r) {
      gpu::Context& c = ctx(r).compute;
      Inference<Model> inf(capacity, true);
      const float* p = inf.upload(c, params, state);
      Loader::for_each_slice(samples, batch_size, r, n, [&](std::size_t first, int rows) {
        if (rows == 0) return;
        const std::size_t count = static_cast<std::size_t>(rows);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(inf.x.data(), features + first * Model::kInputs,
                                            count * Model::kInputs * sizeof(float), cudaMemcpyHostToDevice,
                                            c.stream()));
        const float* y = Model::forward(c, Pass{}, p, inf.state.data(), inf.x.data(), rows, inf.ws);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(out.data() + first * Model::kOutputs, y,
                                            count * Model::kOutputs * sizeof(float), cudaMemcpyDeviceToHost,
                                            c.stream()));
      });
      c.synchronize();
    });
    return out;
  }

 private:
  std::vector<std::string> placement_lines() {
    std::vector<std::string> lines;
    for (const observe::ReplicaPlacement& p : placement_records())
      lines.push_back("placement: " + observe::replica_line(p));
    return lines;
  }

  static std::vector<int> resolve_devices(const Strategy& strategy) {
    if (!strategy.devices().empty()) return strategy.devices();
    if (strategy.replicas() == 0) {
      const std::vector<int> all = gpu::all_visible_devices();
      require(!all.empty(), Strategy::kName, "<", collective::kName,
              ">: no CUDA device is visible (is CUDA_VISIBLE_DEVICES set, is the driver loaded?); train on CPU "
              "replicas with MirroredPolicy<HostAllReduce>");
      return all;
    }
    // GPUs first..first+R-1; first is 0 but for processes that share a machine.
    const int first = first_local_device<group_type>::get(strategy.replicas());
    std::vector<int> devices(static_cast<std::size_t>(strategy.replicas()));
    for (std::size_t i = 0; i < devices.size(); ++i) devices[i] = first + static_cast<int>(i);
    return devices;
  }

  // The deterministic mode (core/determinism.hpp) on GPUs: each unit of the
  // batch is a logical replica with its own stream, cuBLAS handle and
  // buffers, units u*R/U.. of the R GPUs on GPU u*R/U's place, and the
  // collective sums them in replica (unit) order on one device per element.
  // That needs a collective whose replicas may share a GPU and whose sum
  // follows the replica order (ReductionToOneDevice, HierarchicalCopy);
  // NCCL's order follows its own algorithm and topology.
  std::vector<int> unit_devices(std::vector<int> devices) const {
    require(!deterministic_.row_order, "Deterministic::in_row_order(): the row-order scheme runs on host replicas "
            "only so far (lockstep's chain GEMM has no GPU kernel yet); use Deterministic{units} (for example 24) "
            "with MirroredPolicy<ReductionToOneDevice<>> or MirroredPolicy<HierarchicalCopyAllReduce> on GPUs");
    if (!deterministic_.by_units()) return devices;
    if constexpr (!shared_devices<group_type>::value) {
      fail("Deterministic{", deterministic_.units, "}: ", Strategy::kName, "<", collective::kName,
           "> cannot run the deterministic mode: its sums follow the library's own order and its replicas cannot "
           "share a GPU; use MirroredPolicy<ReductionToOneDevice<>> or MirroredPolicy<HierarchicalCopyAllReduce>, "
           "which sum the units in a fixed order");
    } else {
      const int gpus = static_cast<int>(devices.size());
      const int units = units_per_process(deterministic_, gpus, 1);
      std::vector<int> out(static_cast<std::size_t>(units));
      for (int u = 0; u < units; ++u)
        out[static_cast<std::size_t>(u)] = devices[static_cast<std::size_t>(u / (units / gpus))];
      return out;
    }
  }

  // What a replica keeps whatever the model: its streams and cuBLAS handles.
  struct ReplicaContext {
    explicit ReplicaContext(int device) : compute(device) {}
    gpu::Context compute;
    gpu::Stream comm;  // the collective's stream, so reduction overlaps backward
    gpu::Stream copy;  // host-to-device copies of the next step's slice, so they overlap this step
  };
  ReplicaContext& ctx(int r) { return *contexts_[static_cast<std::size_t>(r)]; }

  template <class Model>
  using Workspace = typename Model::template BasicWorkspace<float, gpu::Context>;

  // The memory of one replica for one model, on its device.
  struct Unprofiled {};
  template <class Model>
  struct Replica {
    Replica(const Optimizer& opt, bool holds_optimizer_state)
        : params(Model::kParams), grads(Model::kParams + kStats), state(Model::kState), stats(kStats), key(1) {
      if (holds_optimizer_state) {
        opt_state.emplace(opt, Model::kParams);
        give_variables<Model>(*opt_state);
      }
    }
    void resize(std::size_t capacity, std::size_t label_width) {
      ws = Workspace<Model>(static_cast<int>(capacity));
      x.resize(capacity * Model::kInputs);
      labels.resize(capacity * label_width);
      x_staged.resize(capacity * Model::kInputs);
      labels_staged.resize(capacity * label_width);
      row_stats.resize(capacity * kStats);
      for (auto& p : pinned_x) p.resize(capacity * Model::kInputs);
      for (auto& p : pinned_labels) p.resize(capacity * label_width);
    }
    gpu::DeviceBuffer<float> params, grads;  // grads: kParams gradients, then the step's kStats sums
    gpu::DeviceBuffer<float> state;          // non-trainable: every replica its own, kept equal by the layers
    std::optional<state_type> opt_state;     // where the rule keeps optimizer state
    Workspace<Model> ws;
    gpu::DeviceBuffer<float> x;           // the step's slice: what the step (and its graph) reads
    gpu::DeviceBuffer<label_type> labels;
    gpu::DeviceBuffer<float> x_staged;    // the next slice, written by the copy stream meanwhile
    gpu::DeviceBuffer<label_type> labels_staged;
    gpu::DeviceBuffer<float> row_stats;  // per-row loss, then per-row value of each metric
    std::array<gpu::PinnedBuffer<float>, 2> pinned_x;  // double-buffered host staging of the slices
    std::array<gpu::PinnedBuffer<label_type>, 2> pinned_labels;
    gpu::PinnedBuffer<float> stats;  // the reduced sums, read by the trainer's loop
    gpu::PinnedBuffer<std::uint64_t> key;  // the step's random key, read by kernels when they run
    std::size_t parity = 0;  // which of the two pinned_* buffers is this step's
    bool prefetched = false;  // this step's slice is gathered and its copy to *_staged enqueued
    gpu::Event staged;        // copy stream: the slice is in x_staged / labels_staged
    gpu::Event stage_read;    // compute stream: the step has moved it to x / labels
    std::array<gpu::Event, Model::kLayers + 1> ready;  // backward -> communication, per part
    gpu::Event reduced;                                   // communication -> optimizer
    gpu::Event to_comm, from_comm;                        // a pass's sum over replicas, on the comm stream
    gpu::Graph graph;
    std::pair<std::size_t, std::size_t> graph_key{};      // (rows, count) the graph was captured for
    std::pair<std::size_t, std::size_t> last_key{};       // the previous eager step's
    // The profiler's events (a profiled strategy's only): a graph captured
    // while it records holds them, so recording is part of the graph's key.
    std::conditional_t<kProfiled, gpu::StreamTrace, Unprofiled> trace;
  };
  template <class Model>
  using RunState = ModelStates::Of<Replica<Model>>;
  // Parameters, state and buffers of one evaluate or predict call.
  template <class Model>
  struct Inference {
    Inference(std::size_t capacity, bool own_params)
        : ws(static_cast<int>(capacity)), x(capacity * Model::kInputs), params(own_params ? Model::kParams : 0),
          state(own_params ? Model::kState : 0) {}
    const float* upload(gpu::Context& c, const float* host_params, const float* host_state) {
      c.from_host(params.data(), host_params, Model::kParams);
      c.from_host(state.data(), host_state, Model::kState);
      return params.data();
    }
    Workspace<Model> ws;
    gpu::DeviceBuffer<float> x, params, state;
  };

  // A pass's sum over replicas: on the communication stream, ordered after
  // the compute stream's work so far and before what follows, so that it
  // keeps its place among the step's other collective calls.
  template <class Model>
  struct ReplicaSum {
    group_type* group;
    Replica<Model>* rep;
    int replica;
    cudaStream_t compute, comm;
    template <class T>
    void operator()(T* data, std::size_t count) const {
      static_assert(std::is_same_v<T, float>, "The sum over replicas of a training pass is in float.");
      rep->to_comm.record(compute);
      rep->to_comm.wait_in(comm);
      group->all_reduce(replica, data, count, comm);
      rep->from_comm.record(comm);
      rep->from_comm.wait_in(compute);
    }
  };

  // The view of one replica's step that the skeleton and the rule use.
  template <class Model>
  class ReplicaStep : public ReplicaBuffers<Model, Replica<Model>, kStats> {
   public:
    using group_type = typename Executor::group_type;
    using state_type = typename Executor::state_type;
    using context_type = gpu::Context;
    using pass_type = BasicPass<ReplicaSum<Model>, tracer>;
    static constexpr const char* kCollectiveName = collective::kName;
    static constexpr bool kSharedMemory = false;
    static constexpr bool kCanOverlap = true;

    ReplicaStep(Executor& ex, Replica<Model>& rep, int r, pass_type pass)
        : ReplicaBuffers<Model, Replica<Model>, kStats>(rep), ex_(ex), r_(r), pass_(pass),
          ctx_(ex.ctx(r).compute), comm_(ex.ctx(r).comm.get()) {}
    group_type& group() { return *ex_.group_; }
    int replica() const { return r_; }
    cudaStream_t queue() const { return ctx_.stream(); }
    gpu::Context& context() { return ctx_; }
    const pass_type& pass() const { return pass_; }
    float* variables() { return this->rep_.params.data(); }
    template <class Grads>
    void update(std::size_t first, std::size_t last, Grads grads) {
      const auto span = observe::scope(pass_, observe::Phase::kUpdate, "update");
      this->rep_.opt_state->step(ctx_, this->rep_.params.data(), grads, first, last);
    }
    // The all-reduce of grads [offset, offset + size) on the communication
    // stream, once the compute stream has produced it.
    std::size_t parts_started() const { return parts_; }
    void reduce_part(std::size_t offset, std::size_t size) {
      gpu::Event& ready = this->rep_.ready[parts_++];
      ready.record(ctx_.stream());
      ready.wait_in(comm_);
      ex_.group_->all_reduce(r_, this->rep_.grads.data() + offset, size, comm_);
    }
    void wait_parts() {
      this->rep_.reduced.record(comm_);
      this->rep_.reduced.wait_in(ctx_.stream());
    }

   private:
    Executor& ex_;
    int r_;
    pass_type pass_;
    gpu::Context& ctx_;
    cudaStream_t comm_;
    std::size_t parts_ = 0;
  };

  template <class Model>
  RunState<Model>& current() {
    return states_.current<Replica<Model>>();
  }
  template <class Model>
  RunState<Model>& run_state(const Model& model, std::size_t capacity, std::size_t label_width) {
    bool fresh = false;
    RunState<Model>& run = states_.get<Replica<Model>>(
        model, replicas(), capacity, label_width, [&](auto&& f) { on_replicas(f); },
        [&](int r) { return std::make_unique<Replica<Model>>(optimizer_, rule::holds_optimizer_state(r)); }, &fresh);
    if (fresh)
      forget_graphs_ = [this] {
        for (auto& rep : current<Model>().replicas) {
          rep->graph.reset();
          rep->graph_key = rep->last_key = {};
          rep->prefetched = false;
        }
      };
    return run;
  }

  template <class Model>
  static void load(Replica<Model>& rep, gpu::Context& c, const float* params, const float* state) {
    c.from_host(rep.params.data(), params, Model::kParams);
    c.from_host(rep.state.data(), state, Model::kState);
  }

  // Runs f(r) on every replica's thread with its device current. After a
  // failure the collective is made anew, so the trainer stays usable.
  template <class F>
  void on_replicas(F&& f) {
    run_on_replicas([&](int r) {
      gpu::DeviceGuard on(devices_[static_cast<std::size_t>(r)]);
      f(r);
    });
  }
  void run_on_replicas(const std::function<void(int)>& job) {
    failed_.store(false, std::memory_order_relaxed);
    try {
      pool_.run(job, abort_);
    } catch (...) {
      group_->end_job_after_failure(describe(std::current_exception()).c_str());
      on_replicas_after_failure();
      throw;
    }
  }
  // Every replica thread has returned. With NCCL the others' streams may still
  // wait on the device for the all-reduce the failed replica never enqueued:
  // the graphs go first (NCCL 2.26+ will not abort or destroy a communicator
  // that a live graph captured; an in-flight graph is freed when it ends),
  // then the group aborts its device work, and only then can the devices drain.
  void on_replicas_after_failure() {
    if (forget_graphs_) forget_graphs_();
    release_after_failure(*group_);
    for (std::size_t r = 0; r < devices_.size(); ++r) {
      gpu::DeviceGuard on(devices_[r]);
      cudaDeviceSynchronize();  // let enqueued work drain before the group is rebuilt
      (void)cudaGetLastError();
    }
    // The last CUDA error is per host thread: clear it on every replica's
    // thread too, so that no launch check of the next job reports an error
    // (or a cudaErrorNotReady from polling) left by this failed one.
    pool_.run([](int) { gpu::detail::clear_last_error(); });
    for (std::size_t r = 0; r < devices_.size(); ++r) progress_[r].store(kFinished, std::memory_order_relaxed);
    group_.reset();
    group_.emplace(devices_);
    configure_group(*group_, communication_);
  }

  // Where each replica is in the current step (progress_), for the timeout's message.
  static constexpr int kEnqueuing = 0, kWaiting = 1, kFinished = 2;

  // "replica 1 on GPU 1 (its thread is still enqueuing the step), replica 0 on
  // GPU 0 (its stream is still busy)": the replicas that have not finished the step.
  std::string unfinished_replicas() const {
    std::ostringstream out;
    bool any = false;
    for (std::size_t r = 0; r < devices_.size(); ++r) {
      const int state = progress_[r].load(std::memory_order_acquire);
      if (state == kFinished) continue;
      out << (any ? ", " : "") << "replica " << r << " on GPU " << devices_[r]
          << (state == kEnqueuing ? " (its thread is still enqueuing the step)" : " (its stream is still busy)");
      any = true;
    }
    if (!any) out << "none any more (every stream finished meanwhile)";
    return out.str();
  }

  // "" or the asynchronous error the collective reports for replica r (NCCL's).
  std::string async_error(int r) const {
    if constexpr (is_detected<group_async_error, group_type>) {
      return group_->async_error(r);
    } else {
      (void)r;
      return {};
    }
  }

  // stream.synchronize(), except that a replica stops waiting
  //   - once another has failed (abort_): with NCCL its stream may wait
  //     forever for the failed replica's part of an all-reduce, and the pool
  //     would never return;
  //   - when the collective reports an asynchronous error (NCCL's
  //     ncclCommGetAsyncError, polled every millisecond): the device work
  //     may never finish;
  //   - after options().collective_timeout_seconds: a replica that never
  //     arrives (a hung peer, a lost link) must not stall the job forever.
  // Each is a lockstep::Error naming the collective, the step and the
  // replicas that had not finished; the failure path (run_on_replicas) then
  // aborts the communicators (release_after_failure) and makes them anew.
  void wait_for(int r, cudaStream_t stream) {
    using Clock = std::chrono::steady_clock;
    progress_[static_cast<std::size_t>(r)].store(kWaiting, std::memory_order_release);
    const double limit = options_.collective_timeout_seconds;
    const Clock::time_point start = Clock::now();
    Clock::time_point next_poll = start;
    for (int spins = 0;; ++spins) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) LOCKSTEP_CUDA_CHECK(status);  // clears the thread's last error
      // From here on a cudaErrorNotReady may be the thread's last error:
      // clear it before throwing, so that it does not outlive this step.
      if (failed_.load(std::memory_order_acquire)) {
        gpu::detail::clear_last_error();
        fail("replica ", r, " stopped waiting for GPU ", devices_[static_cast<std::size_t>(r)],
             " because another replica failed");
      }
      const Clock::time_point now = Clock::now();
      if (now >= next_poll) {
        next_poll = now + std::chrono::milliseconds(1);
        const std::string error = async_error(r);
        if (!error.empty()) {
          gpu::detail::clear_last_error();
          fail(Strategy::kName, "<", collective::kName, ">: ", collective::kName,
               " reported an asynchronous error on replica ", r, "'s communicator (GPU ",
               devices_[static_cast<std::size_t>(r)], ") in step ", step_index_,
               " of this fit (counted from 0 over its epochs): ", error, ". Not finished: ", unfinished_replicas(),
               ". The communicators are aborted (ncclCommAbort) and made anew.");
        }
      }
      if (limit > 0 && std::chrono::duration<double>(now - start).count() > limit) {
        gpu::detail::clear_last_error();
        fail(Strategy::kName, "<", collective::kName, ">: step ", step_index_,
             " of this fit (counted from 0 over its epochs) did not finish within ", limit, " s on replica ", r,
             " (GPU ", devices_[static_cast<std::size_t>(r)], "); not finished: ", unfinished_replicas(),
             ". The collective's device work is aborted (NCCL: ncclCommAbort) and the collective made anew, so the "
             "trainer stays usable; if a step really takes this long, raise "
             "CudaOptions::collective_timeout_seconds (trainer.executor().options())");
      }
      if (spins < 4096)
        LOCKSTEP_CPU_RELAX();
      else
        std::this_thread::yield();
    }
    // Clear a cudaErrorNotReady the polling may have left as the last error,
    // so that the next launch check does not report it; keep anything else.
    const cudaError_t last = cudaGetLastError();
    if (last != cudaErrorNotReady) LOCKSTEP_CUDA_CHECK(last);
    progress_[static_cast<std::size_t>(r)].store(kFinished, std::memory_order_release);
  }

  // Enqueues on replica r's copy stream the copy of `rows` rows, gathered in
  // pinned_*[rep.parity], to the staging buffers, once the step before has
  // moved the previous slice out of them; records rep.staged. The pinned
  // buffer is free: the copy that last read it was waited for by the step
  // that used its slice, and that step has finished.
  template <class Model>
  void stage(Replica<Model>& rep, int r, std::size_t rows, std::size_t width) {
    const cudaStream_t copy = ctx(r).copy.get();
    rep.stage_read.wait_in(copy);
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.x_staged.data(), rep.pinned_x[rep.parity].data(),
                                        rows * Model::kInputs * sizeof(float), cudaMemcpyHostToDevice, copy));
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.labels_staged.data(), rep.pinned_labels[rep.parity].data(),
                                        rows * width * sizeof(label_type), cudaMemcpyHostToDevice, copy));
    rep.staged.record(copy);
  }

  // Replica r's part of one synchronous step.
  template <class Model>
  void replica_step(RunState<Model>& run, int r) {
    Replica<Model>& rep = *run.replicas[static_cast<std::size_t>(r)];
    gpu::Context& c = ctx(r).compute;
    const data_type& data = *step_data_;
    const int global = process_rank() * replicas() + r, total = global_replicas();
    const auto [lo, hi] = Loader::replica_slice(step_batch_.count, global, total);
    const std::size_t rows = hi - lo, width = data.label_width();
    if (!rep.prefetched) {
      gather(data, step_batch_.indices + lo, rows, rep.pinned_x[rep.parity].data(), rep.pinned_labels[rep.parity].data());
      stage(rep, r, rows, width);
    }
    // The slice into the buffers the step reads (fixed pointers, which a
    // captured graph keeps), once the copy stream has staged it; the next
    // slice's copy may overwrite the staging buffers after stage_read.
    rep.staged.wait_in(c.stream());
    c.copy(rep.x.data(), rep.x_staged.data(), rows * Model::kInputs);
    c.copy(rep.labels.data(), rep.labels_staged.data(), rows * width);
    rep.stage_read.record(c.stream());

    // The step's scalars, where the kernels (also those of a replayed graph)
    // read them: the previous step has finished, so nothing reads them now.
    if (rep.opt_state) prepare_step(*rep.opt_state, optimizer_);
    *rep.key.data() = step_key_;
    typename ReplicaStep<Model>::pass_type pass;
    [[maybe_unused]] observe::Track* track = nullptr;  // this replica's, while the profiler records
    if constexpr (kProfiled) {
      track = observe::session().track(r);
      pass.track_ = track;
      pass.trace_ = &rep.trace;
      pass.stream_ = c.stream();
    }
    pass.mode = Mode::kTraining;
    pass.first_row = lo;
    pass.key = step_key_;
    pass.key_at = rep.key.data();
    pass.sum = ReplicaSum<Model>{&*group_, &rep, r, c.stream(), ctx(r).comm.get()};
    const auto enqueue = [&] {
      if constexpr (kProfiled) rep.trace.begin_enqueue(c.stream());
      const auto span = observe::scope(pass, observe::Phase::kStep, "step", step_index_);
      ReplicaStep<Model> step(*this, rep, r, pass);
      skeleton::template train<Model, rule>(step, static_cast<int>(rows), step_batch_.count);
    };

    // Eager the first time a shape is seen (cuBLAS and NCCL set themselves up
    // outside any capture), captured the second time, replayed after that.
    // Whether the profiler records is part of the shape: its events are in the graph.
    const std::pair<std::size_t, std::size_t> key{rows, (step_batch_.count << 1) | (track != nullptr ? 1u : 0u)};
    // A group of one that declares it does nothing alone (the copy
    // collectives) is captured too: its step has no host barrier to skip.
    const bool capturable = options_.graphs && (detail::capturable<group_type>::value ||
                                                (detail::capturable_alone<group_type>::value && group_->size() == 1));
    if (capturable && rep.graph.ready() && rep.graph_key == key) {
      rep.graph.launch(c.stream());
    } else if (capturable && rep.last_key == key && !rep.graph.ready()) {
      rep.graph.capture(c.stream(), enqueue);
      rep.graph_key = key;
      rep.graph.launch(c.stream());
    } else {
      enqueue();
      rep.last_key = key;
    }
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.stats.data(), rep.grads.data() + Model::kParams, kStats * sizeof(float),
                                        cudaMemcpyDeviceToHost, c.stream()));

    // While the GPU runs this step, gather the next one's slice and start its
    // copy on the copy stream: it overlaps this step's compute.
    rep.parity ^= 1;
    rep.prefetched = false;
    if (next_batch_.count > 0) {
      const auto [nlo, nhi] = Loader::replica_slice(next_batch_.count, global, total);
      gather(data, next_batch_.indices + nlo, nhi - nlo, rep.pinned_x[rep.parity].data(),
             rep.pinned_labels[rep.parity].data());
      stage(rep, r, nhi - nlo, width);
      rep.prefetched = true;
    }
    wait_for(r, c.stream());
    if constexpr (kProfiled)
      if (track) rep.trace.to_track(*track, observe::now_ns(), step_index_);
  }

  Optimizer optimizer_;
  CudaOptions options_;
  CommunicationOptions communication_;  // the strategy's: every wait's timeout
  Deterministic deterministic_;          // the strategy's: units as logical replicas, summed in unit order
  std::vector<int> devices_;
  std::vector<gpu::DeviceInfo> infos_;
  host::ReplicaPool pool_;
  std::optional<group_type> group_;
  std::vector<std::unique_ptr<ReplicaContext>> contexts_;
  ModelStates states_;
  std::function<void(int)> job_;
  std::function<void()> forget_graphs_;  // drops the current RunState's graphs (set with it)
  std::atomic<bool> failed_{false};      // a replica of the running job failed (see wait_for)
  std::unique_ptr<std::atomic<int>[]> progress_;  // per replica: kEnqueuing, kWaiting or kFinished
  std::size_t steps_in_fit_ = 0;         // train_step calls since begin_fit
  std::size_t step_index_ = 0;           // the running step's, counted from 0 over the fit's epochs
  const std::function<void()> abort_ = [this] {
    failed_.store(true, std::memory_order_release);
    group_->abort();
  };
  const data_type* step_data_ = nullptr;
  StepBatch step_batch_, next_batch_;
  std::uint64_t step_key_ = 0;
};

}  // namespace detail
}  // namespace lockstep
