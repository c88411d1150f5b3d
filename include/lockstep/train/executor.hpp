// The contract between the Trainer's loop and a backend. The Trainer (fit /
// evaluate / predict, callbacks, logs, the progress bar, the run state) is
// written once; what runs the replicas of one backend is an
// Executor<Backend, ...>, chosen at compile time from the strategy's backend
// (no runtime dispatch). It supplies threads or devices, queues, buffers and
// the collective's group, and runs the step skeleton (train/step.hpp) with
// the strategy's StepRule:
//   Executor(const Strategy&, const Optimizer&)
//   int replicas(), global_replicas(), process_rank()
//                                              in the deterministic mode the
//                                              replicas are its units
//   deterministic()                            the strategy's Deterministic mode
//   group()                                    the collective's Group: the
//                                              process-level broadcast, sums and checks
//   begin_fit<Model>(model, optimizer, capacity, label_width)
//   train_step<Model>(optimizer, data, batch, next_batch, key) -> const float*
//       one synchronous step with random key `key`; returns the step's
//       reduced loss and metric sums
//   copy_out<Model>(model)                     the live parameters and state into model
//   copy_out_to<Model>(params, state), for_each_optimizer_state<Model>(f(r, state, ctx))
//                                              what take_snapshot gathers
//   restore<Model>(model, snapshot, capacity, label_width)
//   evaluate<Model>(params, state, or nullptr for the trained ones, data, batch) -> sums
//   predict<Model>(params, state, features, samples, batch) -> outputs
// The host's is in train/host_executor.hpp; the CUDA one in
// train/cuda_executor.cuh, included by <lockstep/cuda.hpp>.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/optim/optimizer.hpp"

namespace lockstep {

// The trainer's loop counters, kept as members, not locals, so that a
// callback, a snapshot and a later resume can see where the run is (dlib's
// trainer keeps its loop state the same way).
struct RunState {
  int epoch = 0;                 // the epoch in progress; after fit, the epoch after the last one run
  std::size_t step = 0;          // the step within it
  std::uint64_t seed = 0;        // the shuffle and dropout seed of the fit (rank 0's)
  std::uint64_t steps_done = 0;  // training steps taken by this trainer, all fits together
};

// Everything a run holds, gathered to host memory whatever the strategy:
// the variables, the layers' non-trainable state, and the optimizer's slots
// (Adam's m and v, Sgd's velocity; each whole, from the replicas that hold
// its parts) with its step count. restore() puts it back on every replica.
struct Snapshot {
  struct Slot {
    std::string name;
    std::vector<float> values;
  };
  std::vector<float> params, state;
  std::vector<Slot> slots;
  std::int64_t iterations = 0;
  RunState run;  // the trainer's counters when it was taken (Trainer::snapshot)
};

// The sample indices of one global batch.
struct StepBatch {
  const std::uint32_t* indices = nullptr;
  std::size_t count = 0;
};

namespace detail {
template <class Backend, class Strategy, class Optimizer, class Loss, class MetricList>
class Executor;

template <class G>
using group_gather_doubles = decltype(std::declval<G&>().gather_across_processes(
    static_cast<const double*>(nullptr), std::size_t{}, static_cast<double*>(nullptr)));

// Evaluation's per-replica sums (rows of `width`) added up over the replicas
// of the job in global replica order: a group that gathers the other
// processes' rows (MpiProcesses) makes the sums the same bits whatever the
// process count (the deterministic mode's evaluation); another adds this
// process's, then sums across processes.
template <class Group>
std::vector<double> sum_over_replicas(const std::vector<double>& per_replica, std::size_t width, Group& group) {
  std::vector<double> gathered;
  const std::vector<double>* rows = &per_replica;
  if constexpr (is_detected<group_gather_doubles, Group>) {
    if (group.process_count() > 1) {
      gathered.resize(per_replica.size() * static_cast<std::size_t>(group.process_count()));
      group.gather_across_processes(per_replica.data(), per_replica.size(), gathered.data());
      rows = &gathered;
    }
  }
  std::vector<double> out(width, 0.0);
  for (std::size_t at = 0; at < rows->size(); at += width)
    for (std::size_t i = 0; i < width; ++i) out[i] += (*rows)[at + i];
  if (rows == &per_replica) group.sum_across_processes(out.data(), out.size());
  return out;
}

// The collective Group a strategy's replicas use: the strategy's `group` when
// it names one (MultiWorkerMirroredPolicy), else its collective's Group.
template <class S, class = void>
struct group_of {
  using type = typename S::collective::Group;
};
template <class S>
struct group_of<S, std::void_t<typename S::group>> {
  using type = typename S::group;
};

// The first GPU of this process's replicas when the strategy names none:
// 0, or what a multi-process group says (its share of the machine's GPUs).
template <class G, class = void>
struct first_local_device {
  static int get(int) { return 0; }
};
template <class G>
struct first_local_device<G, std::void_t<decltype(G::first_local_device(1))>> {
  static int get(int local_replicas) { return G::first_local_device(local_replicas); }
};

// The replicas' state for the model object a trainer trains, kept across fit
// calls on that object (Adam's moments carry over, as in Keras); another
// model object, or another model type, starts fresh. Keyed by the model's
// identity, not its address, which can be reused. `Replica` is an executor's
// per-replica state for one model type, with resize(capacity, label_width).
class ModelStates {
 public:
  template <class Replica>
  struct Of {
    std::size_t capacity = 0, label_width = 0;
    std::vector<std::unique_ptr<Replica>> replicas;
  };

  // The state of `model`, made by make(r) for each replica and resized when
  // the rows per replica or the label width change, both through on_each(f),
  // which runs f(r) on every replica's own thread (first touch, current
  // device). Sets *fresh when the state was made anew.
  template <class Replica, class Model, class OnEach, class Make>
  Of<Replica>& get(const Model& model, int replicas, std::size_t capacity, std::size_t label_width, OnEach&& on_each,
                   Make&& make, bool* fresh = nullptr) {
    if (type_ != tag<Replica>() || model_ != model.identity()) {
      auto made = std::make_shared<Of<Replica>>();
      made->replicas.resize(static_cast<std::size_t>(replicas));
      on_each([&](int r) { made->replicas[static_cast<std::size_t>(r)] = make(r); });
      state_ = std::move(made);
      type_ = tag<Replica>();
      model_ = model.identity();
      if (fresh) *fresh = true;
    }
    Of<Replica>& state = current<Replica>();
    if (state.capacity != capacity || state.label_width != label_width) {
      on_each([&](int r) { state.replicas[static_cast<std::size_t>(r)]->resize(capacity, label_width); });
      state.capacity = capacity;
      state.label_width = label_width;
    }
    return state;
  }

  // Whether the state is `model`'s (made by a fit or a restore of it).
  template <class Model>
  bool holds(const Model& model) const {
    return state_ && model_ == model.identity();
  }

  // The state last returned by get (of this Replica type).
  template <class Replica>
  Of<Replica>& current() {
    return *static_cast<Of<Replica>*>(state_.get());
  }

 private:
  template <class Replica>
  static const void* tag() {
    static const char t = 0;
    return &t;
  }
  std::shared_ptr<void> state_;
  const void* type_ = nullptr;
  std::uint64_t model_ = 0;
};

// The optimizer part of a snapshot, from replica `replica`'s state: each
// slot whole in `out`, this replica filling the range its rule says it holds.
template <class Rule, class Group, class State, class Ctx>
void gather_slots(const Group& group, int replica, std::size_t params, std::size_t count, State& state, Ctx& ctx,
                  Snapshot& out) {
  if constexpr (is_detected<slots_probe, State>) {
    const auto [first, last] = Rule::optimizer_range(group, replica, params, count);
    std::size_t slot = 0;
    state.for_each_slot([&, first = first, last = last](const char* name, float* data, std::size_t size) {
      if (out.slots.size() <= slot) out.slots.push_back({name, std::vector<float>(size)});
      if (first < last && first < size)
        ctx.to_host(out.slots[slot].values.data() + first, data + first, std::min(last, size) - first);
      ++slot;
    });
    if (replica == 0) out.iterations = state.iterations();
  }
}
// The whole of every slot, and the step count, back into a replica's state.
template <class State, class Ctx>
void scatter_slots(State& state, Ctx& ctx, const Snapshot& from) {
  if constexpr (is_detected<slots_probe, State>) {
    std::size_t slot = 0;
    state.for_each_slot([&](const char* name, float* data, std::size_t size) {
      require(slot < from.slots.size() && from.slots[slot].values.size() == size, "restore: optimizer slot '", name,
              "' of ", size, " values is missing from the snapshot or has another size");
      ctx.from_host(data, from.slots[slot].values.data(), size);
      ++slot;
    });
    state.set_iterations(from.iterations);
  }
}
// Every variable, the state and the optimizer state of an executor's current
// run of Model, whatever the strategy: the executor gives its replica 0's
// parameters and state (copy_out_to) and each replica's optimizer state with
// the context it lives on (for_each_optimizer_state).
template <class Model, class Exec>
Snapshot take_snapshot(Exec& exec) {
  Snapshot out;
  out.params.resize(Model::kParams);
  out.state.resize(Model::kState);
  exec.template copy_out_to<Model>(out.params.data(), out.state.data());
  exec.template for_each_optimizer_state<Model>([&](int r, auto& state, auto& ctx) {
    gather_slots<typename Exec::rule>(exec.group(), r, Model::kParams, Model::kParams + Exec::kStats, state, ctx, out);
  });
  return out;
}

template <class Model>
void check_snapshot(const Snapshot& from) {
  require(from.params.size() == Model::kParams && from.state.size() == Model::kState, "restore: the snapshot has ",
          from.params.size(), " parameters and ", from.state.size(), " state values, the model has ", Model::kParams,
          " and ", Model::kState);
}

template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
