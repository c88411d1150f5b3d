// ReduceLROnPlateau: Keras' callback with its arguments and defaults. When
// `monitor` has not improved by more than min_delta for `patience` epochs,
// the learning rate is multiplied by `factor` (not below min_lr), then
// `cooldown` epochs pass before counting again. The new rate is used from
// the next step on, on every backend.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "lockstep/callbacks/monitor.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/optim/schedules.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  std::string mode = "auto";
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0.0;
};

class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {})
      : options_(std::move(options)), monitor_(options_.monitor, options_.mode, options_.min_delta) {
    require(options_.factor > 0.0 && options_.factor < 1.0, "ReduceLROnPlateau: factor ", options_.factor,
            ", expected in (0, 1): it multiplies the learning rate");
    require(options_.patience >= 0 && options_.cooldown >= 0, "ReduceLROnPlateau: patience ", options_.patience,
            " and cooldown ", options_.cooldown, ", expected at least 0");
    require(options_.min_lr >= 0.0 && std::isfinite(options_.min_lr), "ReduceLROnPlateau: min_lr ", options_.min_lr,
            ", expected a finite number >= 0");
  }

  template <class View>
  void on_epoch_end(int, const Logs& logs, View& view) {
    const double current = monitor_.value(logs);
    if (std::isnan(current)) return;
    if (cooldown_left_ > 0) {
      --cooldown_left_;
      wait_ = 0;
    }
    if (monitor_.improves(current, monitor_.best())) {
      monitor_.set_best(current);
      wait_ = 0;
      return;
    }
    if (cooldown_left_ > 0) return;
    if (++wait_ < options_.patience && options_.patience > 0) return;
    float& lr = detail::settable_learning_rate(view.optimizer());
    if (lr > options_.min_lr) {
      lr = static_cast<float>(std::max(static_cast<double>(lr) * options_.factor, options_.min_lr));
      ++reductions_;
      cooldown_left_ = options_.cooldown;
      wait_ = 0;
    }
  }

  int reductions() const { return reductions_; }

 private:
  ReduceLROnPlateauOptions options_;
  Monitor monitor_;
  int wait_ = 0, cooldown_left_ = 0, reductions_ = 0;
};

}  // namespace lockstep
