// ProfileBatches: Keras' TensorBoard(profile_batch=(first, last)) as a
// callback of its own: the profiler (observe/profiler.hpp) records training
// batches first..last, counted from 1 over the whole fit as Keras counts
// them, then writes the trace and the scaling report into `logdir`. Every
// process of a job profiles its own replicas (one trace file per rank);
// rank 0 prints its report when fit ends if `print_report` is set. Recording needs a
// strategy wrapped in Profiled<...> (strategy/profiled.hpp); with another,
// the report says that nothing was recorded and why.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iostream>
#include <string>
#include <utility>

#include "lockstep/core/error.hpp"
#include "lockstep/observe/profiler.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

class ProfileBatches {
 public:
  ProfileBatches(std::string logdir, std::size_t first = 10, std::size_t last = 20, profiler::Options options = {},
                 bool print_report = true)
      : logdir_(std::move(logdir)), first_(first), last_(last), options_(options), print_(print_report) {
    require(!logdir_.empty(), "ProfileBatches: an empty log directory");
    require(first_ >= 1 && last_ >= first_, "ProfileBatches: batches ", first_, " to ", last_,
            ", expected 1 <= first <= last (Keras' profile_batch counts batches from 1)");
  }

  // The logdir is made and checked now, so a folder that cannot be written
  // is an Error before training, not when batch `first` begins.
  template <class View>
  void on_train_begin(const TrainInfo&, View& view) {
    rank_ = view.process_rank();
    batch_ = 0;
    observe::detail::prepare_logdir(logdir_);
  }
  void on_batch_begin(std::size_t) {
    if (++batch_ == first_) {
      profiler::start(logdir_, options_);
      started_ = true;
    }
  }
  void on_batch_end(std::size_t, const Logs&) {
    if (batch_ == last_) finish();
  }
  // A fit shorter than `last` batches (or stopped early) still writes what it
  // recorded. The report is printed here, after the progress bar's last line.
  void on_train_end(const Logs&) {
    finish();
    if (print_ && rank_ == 0 && !result_.trace_path.empty() && !printed_) {
      printed_ = true;
      std::cout << "profile of batches " << first_ << "-" << std::min(batch_, last_) << ": " << result_.trace_path
                << "\n"
                << result_.report << std::flush;
    }
  }

  // The files and the report of the last range profiled (empty before).
  const profiler::Result& result() const { return result_; }

 private:
  void finish() {
    if (!started_) return;
    started_ = false;
    result_ = profiler::stop();
    printed_ = false;
  }

  std::string logdir_;
  std::size_t first_, last_;
  profiler::Options options_;
  bool print_;
  int rank_ = 0;
  std::size_t batch_ = 0;
  bool started_ = false, printed_ = true;
  profiler::Result result_;
};

}  // namespace lockstep
