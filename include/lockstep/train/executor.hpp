// The contract between the Trainer's loop and a backend. The Trainer (fit /
// evaluate / predict, callbacks, logs, the progress bar, the run state) is
// written once; what runs the replicas of one backend is an
// Executor<Backend, ...>, chosen at compile time from the strategy's backend
// (no runtime dispatch). It supplies threads or devices, queues, buffers and
// the collective's group, and runs the step skeleton (train/step.hpp) with
// the strategy's StepRule:
//   Executor(const Strategy&, const Optimizer&)
//   int replicas(), global_replicas(), process_rank()
//   group()                                    the collective's Group: the
//                                              process-level broadcast, sums and checks
//   begin_fit<Model>(model, optimizer, capacity, label_width)
//   train_step<Model>(optimizer, data, batch, next_batch, key) -> const float*
//       one synchronous step with random key `key`; returns the step's
//       reduced loss and metric sums
//   copy_out<Model>(model), end_fit<Model>(model)
//                                              the live parameters and state into model
//   snapshot<Model>() -> Snapshot, restore<Model>(model, snapshot, capacity, label_width)
//   evaluate<Model>(params, state, or nullptr for the trained ones, data, batch) -> sums
//   predict<Model>(params, state, features, samples, batch) -> outputs
// The host's is in train/host_executor.hpp; the CUDA one in
// train/cuda_executor.cuh, included by <lockstep/cuda.hpp>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace lockstep {

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
};

// The sample indices of one global batch.
struct StepBatch {
  const std::uint32_t* indices = nullptr;
  std::size_t count = 0;
};

namespace detail {
template <class Backend, class Strategy, class Optimizer, class Loss, class MetricList>
class Executor;

// Evaluation's per-replica sums (rows of `width`) added up over the replicas,
// then over the processes of the job.
template <class Group>
std::vector<double> sum_over_replicas(const std::vector<double>& per_replica, std::size_t width, Group& group) {
  std::vector<double> out(width, 0.0);
  for (std::size_t at = 0; at < per_replica.size(); at += width)
    for (std::size_t i = 0; i < width; ++i) out[i] += per_replica[at + i];
  group.sum_across_processes(out.data(), out.size());
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

template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
