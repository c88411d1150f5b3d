// FitView: what a callback reaches during fit, passed to any hook that takes
// it as its last argument (train/callbacks.hpp), as Keras callbacks reach
// self.model. It reads the live run, whatever the strategy:
//   model()         the model, with the live parameters and state copied in
//                   first (on_epoch_end and on_train_end see them already)
//   optimizer()     the trainer's optimizer: a learning rate changed here is
//                   used from the next step on, on every backend
//   run()           the run state: epoch, step, seed, steps done
//   snapshot()      every variable, the state and the optimizer state (train/executor.hpp)
//   set_model(m)    m's parameters and state onto every replica (and into the
//                   model), the optimizer state kept: EarlyStopping's
//                   restore_best_weights
//   stop_training() ends fit after the current batch (Keras' model.stop_training = True)
//   process_rank()  this process's rank: callbacks that write files write on rank 0
//   group()         the job's process group (collective/collective.hpp): rank 0's
//                   outcome broadcast, so that every rank fails or goes on alike
//   resume(s)       from on_train_begin only: s put back whole (variables, state,
//                   optimizer state and run state), and the loop starts at
//                   s.run.epoch, step s.run.step (BackupAndRestore)
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/core/error.hpp"
#include "lockstep/train/executor.hpp"

namespace lockstep {

template <class Executor, class Optimizer, class Model>
class FitView {
 public:
  FitView(Executor& exec, Optimizer& optimizer, Model& model, RunState& run, std::size_t capacity,
          std::size_t label_width)
      : exec_(exec), optimizer_(optimizer), model_(model), run_(run), capacity_(capacity), label_width_(label_width) {}

  Model& model() {
    exec_.copy_out(model_);
    return model_;
  }
  Optimizer& optimizer() { return optimizer_; }
  const RunState& run() const { return run_; }
  using model_type = Model;

  Snapshot snapshot() {
    Snapshot s = detail::take_snapshot<Model>(exec_);
    s.run = run_;
    return s;
  }
  void set_model(const Model& weights) {
    Snapshot s = snapshot();
    s.params = weights.parameters();
    s.state = weights.state();
    exec_.restore(model_, s, capacity_, label_width_);
    model_.parameters() = s.params;
    model_.state() = s.state;
  }
  int process_rank() const { return exec_.process_rank(); }
  auto& group() { return exec_.group(); }
  void stop_training() { stop_ = true; }
  bool stop_requested() const { return stop_; }

  // The shuffle was made from this fit's seed before on_train_begin, so the
  // snapshot must have been taken with it for the batches to be the same.
  void resume(const Snapshot& from) {
    require(from.run.seed == run_.seed, "resume: the snapshot was taken with seed ", from.run.seed,
            ", this fit has seed ", run_.seed, ": resume with the options of the run it came from");
    exec_.restore(model_, from, capacity_, label_width_);
    model_.parameters() = from.params;
    model_.state() = from.state;
    run_ = from.run;
    resumed_ = true;
  }
  bool resumed() const { return resumed_; }

 private:
  Executor& exec_;
  Optimizer& optimizer_;
  Model& model_;
  RunState& run_;
  std::size_t capacity_, label_width_;
  bool stop_ = false;
  bool resumed_ = false;
};

}  // namespace lockstep
