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
#pragma once

#include <cstddef>
#include <cstdint>

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
  void stop_training() { stop_ = true; }
  bool stop_requested() const { return stop_; }

 private:
  Executor& exec_;
  Optimizer& optimizer_;
  Model& model_;
  RunState& run_;
  std::size_t capacity_, label_width_;
  bool stop_ = false;
};

}  // namespace lockstep
