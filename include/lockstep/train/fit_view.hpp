// FitView: what a callback reaches during fit, passed to any hook that takes
// it as its last argument (train/callbacks.hpp), as Keras callbacks reach
// self.model. It reads the live run, whatever the strategy:
//   model()         the model, with the live parameters and state copied in
//                   first (on_epoch_end and on_train_end see them already)
//   optimizer()     the trainer's optimizer: a learning rate changed here is
//                   used from the next step on, on every backend
//   run()           the run state: epoch, step, seed, steps done
//   snapshot()      every variable, the state and the optimizer state (train/executor.hpp)
//   stop_training() ends fit after the current epoch (Keras' model.stop_training = True)
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/train/executor.hpp"

namespace lockstep {

template <class Executor, class Optimizer, class Model>
class FitView {
 public:
  FitView(Executor& exec, Optimizer& optimizer, Model& model, RunState& run)
      : exec_(exec), optimizer_(optimizer), model_(model), run_(run) {}

  Model& model() {
    exec_.copy_out(model_);
    return model_;
  }
  Optimizer& optimizer() { return optimizer_; }
  const RunState& run() const { return run_; }
  Snapshot snapshot() { return detail::take_snapshot<Model>(exec_); }
  void stop_training() { stop_ = true; }
  bool stop_requested() const { return stop_; }

 private:
  Executor& exec_;
  Optimizer& optimizer_;
  Model& model_;
  RunState& run_;
  bool stop_ = false;
};

}  // namespace lockstep
