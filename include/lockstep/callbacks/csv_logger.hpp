// CSVLogger: Keras' callback. One row per epoch: "epoch" (0-based, as Keras
// writes it), then every value of the epoch's logs in the alphabetical order
// of their names, joined by `separator`; the header first unless appending to
// a file that has rows. Each row is flushed as it is written. Only rank 0
// writes; a file that cannot be opened is an Error when fit starts.
#pragma once

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

class CSVLogger {
 public:
  explicit CSVLogger(std::string filename, std::string separator = ",", bool append = false)
      : filename_(std::move(filename)), separator_(std::move(separator)), append_(append) {
    require(!filename_.empty(), "CSVLogger: an empty file name");
  }

  template <class View>
  void on_train_begin(const TrainInfo&, View& view) {
    writes_ = view.process_rank() == 0;
    if (!writes_) return;
    bool has_rows = false;
    if (append_) {
      std::ifstream existing(filename_);
      has_rows = existing && existing.peek() != std::ifstream::traits_type::eof();
    }
    out_.open(filename_, append_ ? std::ios::app : std::ios::trunc);
    require(static_cast<bool>(out_), "CSVLogger: cannot open '", filename_, "' for writing");
    header_written_ = has_rows;
  }

  void on_epoch_end(int epoch, const Logs& logs) {
    if (!writes_) return;
    std::vector<std::size_t> order(logs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logs.name(a) < logs.name(b); });
    if (!header_written_) {
      out_ << "epoch";
      for (std::size_t i : order) out_ << separator_ << logs.name(i);
      out_ << '\n';
      header_written_ = true;
    }
    out_ << epoch;
    for (std::size_t i : order) out_ << separator_ << detail::shortest(logs.value(i));
    out_ << '\n';
    out_.flush();
    require(static_cast<bool>(out_), "CSVLogger: could not write to '", filename_, "' (is the disk full?)");
  }

  void on_train_end(const Logs&) {
    if (out_.is_open()) out_.close();
  }

 private:
  std::string filename_, separator_;
  bool append_;
  bool writes_ = false, header_written_ = false;
  std::ofstream out_;
};

}  // namespace lockstep
