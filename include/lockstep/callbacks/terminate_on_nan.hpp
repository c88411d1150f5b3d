// TerminateOnNaN: Keras' callback. Stops fit at the first batch whose running
// loss is NaN or infinite, and says so on stderr; nan_batch() tells which.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>

#include "lockstep/train/logs.hpp"

namespace lockstep {

class TerminateOnNaN {
 public:
  template <class View>
  void on_batch_end(std::size_t step, const Logs& logs, View& view) {
    const double loss = logs["loss"];
    if (std::isfinite(loss)) return;
    nan_epoch_ = view.run().epoch;
    nan_batch_ = static_cast<long>(step);
    if (view.process_rank() == 0)
      std::fprintf(stderr, "lockstep: epoch %d, batch %ld: invalid loss %f, terminating training\n", nan_epoch_,
                   nan_batch_, loss);
    view.stop_training();
  }
  int nan_epoch() const { return nan_epoch_; }
  long nan_batch() const { return nan_batch_; }

 private:
  int nan_epoch_ = -1;
  long nan_batch_ = -1;
};

}  // namespace lockstep
