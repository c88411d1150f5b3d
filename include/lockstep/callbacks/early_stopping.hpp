// EarlyStopping: Keras' callback with its arguments and defaults. Stops fit
// when `monitor` has not improved by more than min_delta for `patience`
// epochs (counting from start_from_epoch); with a baseline, the wait only
// resets on beating it too. restore_best_weights puts the best epoch's
// weights back on every replica when it stops (the optimizer state is kept).
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/callbacks/monitor.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  std::string mode = "auto";
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

class EarlyStopping {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {})
      : options_(std::move(options)), monitor_(options_.monitor, options_.mode, options_.min_delta) {
    require(options_.patience >= 0, "EarlyStopping: patience ", options_.patience, ", expected at least 0");
    require(options_.start_from_epoch >= 0, "EarlyStopping: start_from_epoch ", options_.start_from_epoch,
            ", expected at least 0");
    if (options_.baseline) monitor_.check_reference(*options_.baseline, "EarlyStopping", "baseline");
  }

  void on_train_begin(const TrainInfo&) {
    wait_ = 0;
    stopped_epoch_ = -1;
    best_epoch_ = -1;
    best_params_.clear();
    best_state_.clear();
    monitor_.reset();
  }

  template <class View>
  void on_epoch_end(int epoch, const Logs& logs, View& view) {
    const double current = monitor_.value(logs);
    if (std::isnan(current) || epoch < options_.start_from_epoch) return;
    ++wait_;
    if (monitor_.improves(current, monitor_.best())) {
      monitor_.set_best(current);
      best_epoch_ = epoch;
      if (options_.restore_best_weights) {
        best_params_ = view.model().parameters();
        best_state_ = view.model().state();
      }
      if (!options_.baseline || monitor_.improves(current, *options_.baseline)) {
        wait_ = 0;
        return;
      }
    }
    if (wait_ >= options_.patience && epoch > 0) {
      stopped_epoch_ = epoch;
      view.stop_training();
      if (options_.restore_best_weights && !best_params_.empty()) {
        auto best = view.model();  // a copy of the live model, given the best epoch's values
        best.parameters() = best_params_;
        best.state() = best_state_;
        view.set_model(best);
      }
    }
  }

  // The epoch at which it stopped training (-1: it did not), and the best one.
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  double best() const { return monitor_.best(); }

 private:
  EarlyStoppingOptions options_;
  Monitor monitor_;
  int wait_ = 0, stopped_epoch_ = -1, best_epoch_ = -1;
  std::vector<float> best_params_, best_state_;
};

}  // namespace lockstep
