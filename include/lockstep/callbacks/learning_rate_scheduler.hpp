// LearningRateScheduler: Keras' callback. At the start of each epoch the
// optimizer's learning rate becomes schedule(epoch, current rate); it is used
// from that epoch's first step on, on every backend.
#pragma once

#include <cmath>
#include <functional>
#include <utility>

#include "lockstep/core/error.hpp"
#include "lockstep/optim/schedules.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

class LearningRateScheduler {
 public:
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule)
      : schedule_(std::move(schedule)) {
    require(static_cast<bool>(schedule_), "LearningRateScheduler: an empty schedule, expected a function");
  }

  template <class View>
  void on_epoch_begin(int epoch, const TrainInfo&, View& view) {
    float& lr = detail::settable_learning_rate(view.optimizer());
    const double next = schedule_(epoch, static_cast<double>(lr));
    require(next > 0.0 && std::isfinite(next), "LearningRateScheduler: the schedule gave learning rate ", next,
            " for epoch ", epoch, ", expected a finite value > 0");
    lr = static_cast<float>(next);
  }

 private:
  std::function<double(int, double)> schedule_;
};

}  // namespace lockstep
