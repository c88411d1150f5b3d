// ProgressBar: Keras' progress display for fit.
//   Epoch 1/10
//   469/469 [==============================] - 1s 2ms/step - loss: 0.5123 - accuracy: 0.8201
// On a terminal the line is redrawn in place as steps finish; otherwise one
// line per epoch is written, so logs stay readable.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "lockstep/train/logs.hpp"

namespace lockstep {

class ProgressBar {
 public:
  // `interactive`: redraw in place; by default, when stdout is a terminal.
  explicit ProgressBar(std::ostream& out = std::cout) : out_(&out), interactive_(&out == &std::cout && isatty(1)) {}
  ProgressBar(std::ostream& out, bool interactive) : out_(&out), interactive_(interactive) {}

  void on_train_begin(const TrainInfo& info) {
    epochs_ = info.epochs;
    steps_ = info.steps_per_epoch;
  }
  void on_epoch_begin(int epoch, const TrainInfo&) {
    *out_ << "Epoch " << epoch + 1 << '/' << epochs_ << '\n';
    out_->flush();
    start_ = last_draw_ = Clock::now();
  }
  void on_batch_end(std::size_t step, const Logs& logs) {
    if (!interactive_ || step + 1 == steps_) return;  // the epoch's end draws the final line
    const auto now = Clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(50)) return;
    last_draw_ = now;
    *out_ << '\r' << line(step + 1, logs, now) << "\x1b[K";
    out_->flush();
  }
  void on_epoch_end(int, const Logs& logs) {
    *out_ << (interactive_ ? "\r" : "") << line(steps_, logs, Clock::now()) << (interactive_ ? "\x1b[K\n" : "\n");
    out_->flush();
  }

  // One line of the display after `done` of the epoch's steps.
  std::string line(std::size_t done, const Logs& logs, std::chrono::steady_clock::time_point now) const {
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    std::ostringstream s;
    const std::string total = std::to_string(steps_);
    std::string count = std::to_string(done);
    s << std::string(total.size() > count.size() ? total.size() - count.size() : 0, ' ') << count << '/' << total
      << " [" << bar(done) << "] - ";
    if (done < steps_) {
      const double eta = done ? elapsed / static_cast<double>(done) * static_cast<double>(steps_ - done) : 0.0;
      s << "ETA: " << static_cast<long>(std::lround(eta)) << 's';
    } else {
      s << static_cast<long>(std::lround(elapsed)) << "s " << per_step(done ? elapsed / static_cast<double>(done) : 0.0);
    }
    char value[32];
    for (std::size_t i = 0; i < logs.size(); ++i) {
      std::snprintf(value, sizeof value, "%.4f", logs.value(i));
      s << " - " << logs.name(i) << ": " << value;
    }
    return s.str();
  }

 private:
  using Clock = std::chrono::steady_clock;

  std::string bar(std::size_t done) const {
    constexpr std::size_t kWidth = 30;
    if (steps_ == 0 || done >= steps_) return std::string(kWidth, '=');
    // Keras' arithmetic: the head replaces the last '=' of the filled part.
    const std::size_t filled = kWidth * done / steps_;
    std::string b(filled > 0 ? filled - 1 : 0, '=');
    b += '>';
    b += std::string(kWidth - filled, '.');
    return b;
  }
  // Keras' time per step: 2ms/step, 350us/step, 1s/step.
  static std::string per_step(double seconds) {
    if (seconds >= 1.0) return std::to_string(std::lround(seconds)) + "s/step";
    if (seconds >= 1e-3) return std::to_string(std::lround(seconds * 1e3)) + "ms/step";
    return std::to_string(std::lround(seconds * 1e6)) + "us/step";
  }

  std::ostream* out_;
  bool interactive_;
  int epochs_ = 0;
  std::size_t steps_ = 0;
  Clock::time_point start_{}, last_draw_{};
};

}  // namespace lockstep
