// Executor<Cuda, ...>: runs a Trainer's replicas on GPUs, one host thread per
// replica (replica 0 is the calling thread), each with its device current,
// its own compute stream, communication stream, cuBLAS handles and memory.
// Per step a replica
//   1. copies its slice of the batch from pinned memory to the device
//      (asynchronously; the slice was gathered while the previous step ran),
//   2. runs forward, loss, backward and the optimizer on its stream: from a
//      CUDA graph captured once when shapes repeat, or enqueued directly for
//      the first step and a short last batch,
//   3. with a collective that takes parts of the buffer (NcclAllReduce),
//      reduces each layer's gradient on the communication stream as soon as
//      backward has produced it, so that the all-reduce of the late layers
//      overlaps the backward of the early ones,
//   4. gathers the next batch's slice into the other pinned buffer while the
//      GPU works, then waits for its stream.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/cuda/buffer.cuh"
#include "lockstep/backend/cuda/context.cuh"
#include "lockstep/backend/cuda/device.cuh"
#include "lockstep/backend/cuda/stream.cuh"
#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/replica_pool.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/loader.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/optim/cuda_states.cuh"
#include "lockstep/strategy/central_storage.hpp"
#include "lockstep/train/executor.hpp"
#include "lockstep/train/host_executor.hpp"

namespace lockstep {

namespace kernels {
// out[0] = the sum of v[0..n): a step's loss or metric sum over at most a
// slice of rows (hundreds), so one thread is enough and keeps the order fixed.
// Accumulated in double and rounded once, as the host executor sums row losses.
struct SumInto {
  const float* v;
  std::size_t n;
  float* out;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t) const {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += v[i];
    *out = static_cast<float>(s);
  }
};
}  // namespace kernels

// What a CUDA trainer does beyond the strategy: trainer.executor().options().
struct CudaOptions {
  bool graphs = true;            // capture the step as a CUDA graph when shapes repeat
  bool tf32 = false;             // TF32 tensor cores for the GEMMs (10-bit mantissa)
  bool log_placement = false;    // print which GPU each replica runs on (tf.debugging.set_log_device_placement)
};

namespace detail {

template <class Strategy, class Optimizer, class Loss, class... Metric>
class Executor<Cuda, Strategy, Optimizer, Loss, Metrics<Metric...>> {
 public:
  using collective = typename Strategy::collective;
  using group_type = typename group_of<Strategy>::type;
  using label_type = typename Loss::label_type;
  using data_type = BasicDataset<label_type>;
  static constexpr std::size_t kMetrics = sizeof...(Metric);
  static constexpr std::size_t kStats = 1 + kMetrics;
  // CudaCentralStoragePolicy: replica 0's GPU holds the variables and the
  // optimizer state; the others hold a compute copy of the variables.
  static constexpr bool kCentral = central_variables_v<Strategy>;

  Executor(const Strategy& strategy, const Optimizer& optimizer)
      : optimizer_(optimizer), devices_(resolve_devices(strategy)),
        infos_(gpu::check_devices(devices_, strategy.heterogeneous(), nullptr, group_type::kSharedDevices)),
        pool_(static_cast<int>(devices_.size())) {
    group_.emplace(devices_);
    contexts_.resize(devices_.size());
    pool_.run([&](int r) {
      gpu::DeviceGuard on(devices_[r]);
      contexts_[r] = std::make_unique<ReplicaContext>(devices_[r]);
    });
  }

  int replicas() const { return pool_.size(); }
  int global_replicas() const { return pool_.size() * group_->process_count(); }
  int process_rank() const { return group_->process_rank(); }
  group_type& group() { return *group_; }
  CudaOptions& options() { return options_; }
  const std::vector<gpu::DeviceInfo>& devices() const { return infos_; }
  // One line per replica: which GPU it runs on.
  std::string placement() const { return gpu::describe_placement(infos_); }

  template <class Model>
  void begin_fit(Model& model, const Optimizer& optimizer, std::size_t capacity, std::size_t label_width) {
    optimizer_ = optimizer;
    if (options_.log_placement) std::cerr << placement();
    RunState<Model>& run = run_state(model, capacity, label_width);
    on_replicas([&](int r) {
      Replica<Model>& rep = *run.replicas[r];
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.params.data(), model.parameters().data(), Model::kParams * sizeof(float),
                                          cudaMemcpyHostToDevice, ctx(r).compute.stream()));
      ctx(r).compute.set_tf32(options_.tf32);
      rep.graph.reset();  // the optimizer's values and the options may have changed
      rep.graph_key = {};
      // Also forget the last fit's shapes: the first step of a fit runs eagerly,
      // as it may allocate (Sgd's velocity when momentum was switched on) or
      // plan a cuBLASLt shape for buffers that moved, neither allowed in a capture.
      rep.last_key = {};
      rep.prefetched = false;
      ctx(r).compute.synchronize();
    });
    // Built once, so that no step allocates.
    job_ = [this, &run](int r) {
      gpu::DeviceGuard on(devices_[static_cast<std::size_t>(r)]);
      replica_step(run, r);
    };
  }

  template <class Model>
  const float* train_step(const Optimizer& optimizer, const data_type& data, StepBatch batch, StepBatch next) {
    optimizer_ = optimizer;
    step_data_ = &data;
    step_batch_ = batch;
    next_batch_ = next;
    run_on_replicas(job_);
    return current<Model>().replicas[0]->stats.data();
  }

  template <class Model>
  void end_fit(Model& model) {
    Replica<Model>& rep = *current<Model>().replicas[0];
    gpu::DeviceGuard on(devices_[0]);
    LOCKSTEP_CUDA_CHECK(cudaMemcpy(model.parameters().data(), rep.params.data(), Model::kParams * sizeof(float),
                                   cudaMemcpyDeviceToHost));
  }

  // Loss and metric sums over `data`, with `params` (host memory) or, when
  // null, the trained parameters of the current fit.
  template <class Model>
  std::vector<double> evaluate(const float* params, const data_type& data, std::size_t batch_size) {
    require(batch_size >= 1, "evaluate: batch size 0, expected at least 1");
    const int n = replicas(), total = global_replicas(), base = process_rank() * n;
    const std::size_t capacity = Loader::slice_capacity(batch_size, total);
    std::vector<double> sums(static_cast<std::size_t>(n) * kStats, 0.0);
    on_replicas([&](int r) {
      gpu::Context& c = ctx(r).compute;
      Inference<Model> inf(capacity, params);
      const float* p = params ? inf.upload(c, params) : current<Model>().replicas[r]->params.data();
      gpu::DeviceBuffer<label_type> labels(capacity * data.label_width());
      gpu::DeviceBuffer<float> rows_out(capacity * kStats);
      double* mine = sums.data() + static_cast<std::size_t>(r) * kStats;
      Loader::for_each_slice(data.size(), batch_size, base + r, total, [&](std::size_t first, int rows) {
        if (rows == 0) return;
        const std::size_t count = static_cast<std::size_t>(rows);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(inf.x.data(), data.features(first), count * Model::kInputs * sizeof(float),
                                            cudaMemcpyHostToDevice, c.stream()));
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(labels.data(), data.labels(first),
                                            count * data.label_width() * sizeof(label_type), cudaMemcpyHostToDevice,
                                            c.stream()));
        const float* out = Model::forward(c, p, inf.x.data(), rows, inf.ws);
        float* row_stats = rows_out.data();
        Loss::template forward_backward<Model::kOutputs>(c, out, labels.data(), rows, 1.0f, row_stats,
                                                         static_cast<float*>(nullptr));
        [[maybe_unused]] std::size_t m = 1;
        (c.for_each_row(count, Metric::template row<Model::kOutputs>(out, labels.data(), row_stats + m++ * capacity)),
         ...);
        for (std::size_t i = 0; i < kStats; ++i)  // Thrust's reduction, on this replica's stream
          mine[i] += thrust::reduce(thrust::cuda::par.on(c.stream()), row_stats + i * capacity,
                                    row_stats + i * capacity + count, 0.0, thrust::plus<double>());
      });
      c.synchronize();
    });
    return sum_over_replicas(sums, kStats, *group_);
  }

  template <class Model>
  std::vector<float> predict(const float* params, const float* features, std::size_t samples, std::size_t batch_size) {
    std::vector<float> out(samples * Model::kOutputs);
    const int n = replicas();
    const std::size_t capacity = Loader::slice_capacity(batch_size, n);
    on_replicas([&](int r) {
      gpu::Context& c = ctx(r).compute;
      Inference<Model> inf(capacity, params);
      const float* p = inf.upload(c, params);
      Loader::for_each_slice(samples, batch_size, r, n, [&](std::size_t first, int rows) {
        if (rows == 0) return;
        const std::size_t count = static_cast<std::size_t>(rows);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(inf.x.data(), features + first * Model::kInputs,
                                            count * Model::kInputs * sizeof(float), cudaMemcpyHostToDevice,
                                            c.stream()));
        const float* y = Model::forward(c, p, inf.x.data(), rows, inf.ws);
        LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(out.data() + first * Model::kOutputs, y,
                                            count * Model::kOutputs * sizeof(float), cudaMemcpyDeviceToHost,
                                            c.stream()));
      });
      c.synchronize();
    });
    return out;
  }

 private:
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

  // What a replica keeps whatever the model: its streams and cuBLAS handles.
  struct ReplicaContext {
    explicit ReplicaContext(int device) : compute(device) {}
    gpu::Context compute;
    gpu::Stream comm;  // the collective's stream, so reduction overlaps backward
  };
  ReplicaContext& ctx(int r) { return *contexts_[static_cast<std::size_t>(r)]; }

  template <class Model>
  using Workspace = typename Model::template BasicWorkspace<float, gpu::Context>;

  // The memory of one replica for one model, on its device.
  template <class Model>
  struct Replica {
    Replica(const Optimizer& opt, bool owns_variables)
        : params(Model::kParams), grads(Model::kParams + kStats), stats(kStats) {
      if (owns_variables) opt_state.emplace(opt, Model::kParams);
    }
    void resize(std::size_t capacity, std::size_t label_width) {
      ws = Workspace<Model>(static_cast<int>(capacity));
      x.resize(capacity * Model::kInputs);
      labels.resize(capacity * label_width);
      row_stats.resize(capacity * kStats);
      for (auto& p : pinned_x) p.resize(capacity * Model::kInputs);
      for (auto& p : pinned_labels) p.resize(capacity * label_width);
    }
    gpu::DeviceBuffer<float> params, grads;  // grads: kParams gradients, then the step's kStats sums
    std::optional<typename Optimizer::template State<Cuda>> opt_state;  // the replicas that own variables
    Workspace<Model> ws;
    gpu::DeviceBuffer<float> x;
    gpu::DeviceBuffer<label_type> labels;
    gpu::DeviceBuffer<float> row_stats;  // per-row loss, then per-row value of each metric
    std::array<gpu::PinnedBuffer<float>, 2> pinned_x;  // double-buffered host staging of the slices
    std::array<gpu::PinnedBuffer<label_type>, 2> pinned_labels;
    gpu::PinnedBuffer<float> stats;  // the reduced sums, read by the trainer's loop
    int parity = 0;
    bool prefetched = false;  // pinned_*[parity] already holds this step's slice
    std::array<gpu::Event, Model::kLayers + 1> ready;  // backward -> communication, per layer
    gpu::Event reduced;                                   // communication -> optimizer
    gpu::Graph graph;
    std::pair<std::size_t, std::size_t> graph_key{};      // (rows, count) the graph was captured for
    std::pair<std::size_t, std::size_t> last_key{};       // the previous eager step's
  };
  template <class Model>
  using RunState = ModelStates::Of<Replica<Model>>;
  // Parameters and buffers of one evaluate or predict call.
  template <class Model>
  struct Inference {
    Inference(std::size_t capacity, const float* host_params)
        : ws(static_cast<int>(capacity)), x(capacity * Model::kInputs), params(host_params ? Model::kParams : 0) {}
    const float* upload(gpu::Context& c, const float* host_params) {
      LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(params.data(), host_params, Model::kParams * sizeof(float),
                                          cudaMemcpyHostToDevice, c.stream()));
      return params.data();
    }
    Workspace<Model> ws;
    gpu::DeviceBuffer<float> x, params;
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
        [&](int r) { return std::make_unique<Replica<Model>>(optimizer_, !kCentral || r == 0); }, &fresh);
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
    group_->release_after_failure();
    for (std::size_t r = 0; r < devices_.size(); ++r) {
      gpu::DeviceGuard on(devices_[r]);
      cudaDeviceSynchronize();  // let enqueued work drain before the group is rebuilt
      (void)cudaGetLastError();
    }
    group_.reset();
    group_.emplace(devices_);
  }

  // stream.synchronize(), except that a replica stops waiting once another
  // has failed (abort_): with NCCL its stream may wait forever for the failed
  // replica's part of an all-reduce, and the pool would never return.
  void wait_for(int r, cudaStream_t stream) {
    for (int spins = 0;; ++spins) {
      const cudaError_t status = cudaStreamQuery(stream);
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) LOCKSTEP_CUDA_CHECK(status);
      if (failed_.load(std::memory_order_acquire))
        fail("replica ", r, " stopped waiting for GPU ", devices_[static_cast<std::size_t>(r)],
             " because another replica failed");
      if (spins < 4096)
        LOCKSTEP_CPU_RELAX();
      else
        std::this_thread::yield();
    }
    // Clear a cudaErrorNotReady the polling may have left as the last error,
    // so that the next launch check does not report it; keep anything else.
    const cudaError_t last = cudaGetLastError();
    if (last != cudaErrorNotReady) LOCKSTEP_CUDA_CHECK(last);
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
    if (!rep.prefetched)
      gather(data, step_batch_.indices + lo, rows, rep.pinned_x[rep.parity].data(), rep.pinned_labels[rep.parity].data());
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.x.data(), rep.pinned_x[rep.parity].data(),
                                        rows * Model::kInputs * sizeof(float), cudaMemcpyHostToDevice, c.stream()));
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.labels.data(), rep.pinned_labels[rep.parity].data(),
                                        rows * width * sizeof(label_type), cudaMemcpyHostToDevice, c.stream()));

    // Eager the first time a shape is seen (cuBLAS and NCCL set themselves up
    // outside any capture), captured the second time, replayed after that.
    const std::pair<std::size_t, std::size_t> key{rows, step_batch_.count};
    const bool capturable = options_.graphs && group_type::kCapturable;
    if (capturable && rep.graph.ready() && rep.graph_key == key) {
      rep.graph.launch(c.stream());
    } else if (capturable && rep.last_key == key && !rep.graph.ready()) {
      rep.graph.capture(c.stream(), [&] { enqueue_step<Model>(rep, r, static_cast<int>(rows), step_batch_.count); });
      rep.graph_key = key;
      rep.graph.launch(c.stream());
    } else {
      enqueue_step<Model>(rep, r, static_cast<int>(rows), step_batch_.count);
      rep.last_key = key;
    }
    LOCKSTEP_CUDA_CHECK(cudaMemcpyAsync(rep.stats.data(), rep.grads.data() + Model::kParams, kStats * sizeof(float),
                                        cudaMemcpyDeviceToHost, c.stream()));

    // While the GPU runs this step, stage the next one's slice.
    rep.parity ^= 1;
    rep.prefetched = next_batch_.count > 0;
    if (rep.prefetched) {
      const auto [nlo, nhi] = Loader::replica_slice(next_batch_.count, global, total);
      gather(data, next_batch_.indices + nlo, nhi - nlo, rep.pinned_x[rep.parity].data(),
             rep.pinned_labels[rep.parity].data());
    }
    wait_for(r, c.stream());
  }

  // Forward, loss, backward, all-reduce and update of one replica, enqueued
  // on its streams (and recorded, when a graph is being captured).
  template <class Model>
  void enqueue_step(Replica<Model>& rep, int r, int rows, std::size_t count) {
    gpu::Context& c = ctx(r).compute;
    cudaStream_t comm = ctx(r).comm.get();
    const std::size_t n = static_cast<std::size_t>(rows), cap = static_cast<std::size_t>(rep.ws.capacity());
    float* grads = rep.grads.data();
    float* stats = grads + Model::kParams;
    const float* out = Model::forward(c, rep.params.data(), rep.x.data(), rows, rep.ws);
    // Weighting by the global count makes the summed gradients the mean over
    // the real samples of the batch, whatever the slices' sizes.
    float* row_stats = rep.row_stats.data();
    Loss::template forward_backward<Model::kOutputs>(c, out, rep.labels.data(), rows, 1.0f / static_cast<float>(count),
                                                     row_stats, rep.ws.output_grad());
    [[maybe_unused]] std::size_t m = 1;
    (c.for_each_row(n, Metric::template row<Model::kOutputs>(out, rep.labels.data(), row_stats + m++ * cap)), ...);
    for (std::size_t i = 0; i < kStats; ++i) c.for_each_index(1, kernels::SumInto{row_stats + i * cap, n, stats + i});

    if constexpr (kCentral) {
      // Gradients to the central GPU, which updates the variables and sends them out.
      Model::backward(c, rep.params.data(), rep.x.data(), rows, rep.ws, grads);
      group_->reduce_to_root(r, grads, Model::kParams + kStats, c.stream());
      if (r == 0) rep.opt_state->step(c, optimizer_, rep.params.data(), grads);
      group_->copy_from_root(r, rep.params.data(), Model::kParams, c.stream());
      return;
    } else if constexpr (group_type::kPartial) {
      // Each layer's gradient goes to the collective as soon as it is ready;
      // the step's sums ride with the first chunk, the last layer's. Only the
      // first: after a parameter-free last layer (an activation, a softmax)
      // the layer before it also ends at kParams, and reducing the sums twice
      // would multiply them by the replica count.
      std::size_t layer = 0;
      Model::backward(c, rep.params.data(), rep.x.data(), rows, rep.ws, grads, [&](std::size_t offset, std::size_t size) {
        if (layer == 0 && offset + size == Model::kParams) size += kStats;
        if (size == 0) return;
        gpu::Event& ready = rep.ready[layer++];
        ready.record(c.stream());
        ready.wait_in(comm);
        group_->all_reduce(r, grads + offset, size, comm);
      });
      rep.reduced.record(comm);
      rep.reduced.wait_in(c.stream());
    } else {
      Model::backward(c, rep.params.data(), rep.x.data(), rows, rep.ws, grads);
      group_->all_reduce(r, grads, Model::kParams + kStats, c.stream());
    }
    rep.opt_state->step(c, optimizer_, rep.params.data(), grads);
  }

  Optimizer optimizer_;
  CudaOptions options_;
  std::vector<int> devices_;
  std::vector<gpu::DeviceInfo> infos_;
  host::ReplicaPool pool_;
  std::optional<group_type> group_;
  std::vector<std::unique_ptr<ReplicaContext>> contexts_;
  ModelStates states_;
  std::function<void(int)> job_;
  std::function<void()> forget_graphs_;  // drops the current RunState's graphs (set with it)
  std::atomic<bool> failed_{false};      // a replica of the running job failed (see wait_for)
  const std::function<void()> abort_ = [this] {
    failed_.store(true, std::memory_order_release);
    group_->abort();
  };
  const data_type* step_data_ = nullptr;
  StepBatch step_batch_, next_batch_;
};

}  // namespace detail
}  // namespace lockstep
