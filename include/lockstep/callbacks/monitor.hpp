// Monitor: what EarlyStopping, ModelCheckpoint and ReduceLROnPlateau share:
// a value of the epoch's logs watched for improvement, Keras' way. mode
// "auto" means "max" for accuracies and "min" otherwise; an improvement beats
// the best so far by more than min_delta. A NaN value (an epoch without
// validation, under validation_freq) is no value: the callback waits.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "lockstep/core/error.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

class Monitor {
 public:
  Monitor(std::string monitor, std::string mode, double min_delta)
      : monitor_(std::move(monitor)), min_delta_(std::abs(min_delta)) {
    require(mode == "auto" || mode == "min" || mode == "max", "Monitor '", monitor_, "': mode '", mode,
            "', expected auto, min or max");
    // A NaN min_delta would make every comparison false: no epoch would ever
    // improve, so EarlyStopping would stop and ModelCheckpoint never save.
    require(std::isfinite(min_delta), "Monitor '", monitor_, "': min_delta ", min_delta, ", expected a finite number");
    maximize_ = mode == "max" ||
                (mode == "auto" && (ends_with(monitor_, "acc") || ends_with(monitor_, "accuracy") ||
                                    ends_with(monitor_, "auc")));
    reset();
  }

  // No best value yet: anything but NaN improves on it.
  void reset() {
    best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }

  const std::string& name() const { return monitor_; }
  bool maximize() const { return maximize_; }
  double best() const { return best_; }
  void set_best(double v) { best_ = v; }

  // The monitored value of `logs` (an Error listing the names when it has none).
  double value(const Logs& logs) const { return logs[monitor_]; }
  // An Error unless `reference` (a baseline, a threshold) is a number:
  // nothing improves on NaN.
  void check_reference(double reference, const char* who, const char* what) const {
    require(!std::isnan(reference), who, ": ", what, " nan for monitor '", monitor_,
            "', expected a number (or none, std::nullopt)");
  }

  // Whether `value` improves on `reference` by more than min_delta.
  bool improves(double value, double reference) const {
    if (std::isnan(value)) return false;
    return maximize_ ? value - min_delta_ > reference : value + min_delta_ < reference;
  }

 private:
  static bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  }
  std::string monitor_;
  double min_delta_;
  bool maximize_ = false;
  double best_ = 0;
};

}  // namespace lockstep
