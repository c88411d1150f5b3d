// CSVLogger: Keras' callback. One row per epoch: "epoch" (0-based, as Keras
// writes it), then every value of the epoch's logs in the alphabetical order
// of their names, joined by `separator`; the header first unless appending to
// a file that has rows. Only rank 0 writes, and a write it fails is an Error
// on every rank; a folder that cannot be written is an Error when fit starts.
//
// Each epoch rewrites the whole file atomically (core/atomic_file.hpp: a
// temporary file, fsynced, renamed over the old one) instead of appending to
// an open stream, so a crash or a full disk leaves the file with every row
// of the epochs before, never a torn last row, and a file being appended to
// is not emptied before the first new row is safe. The file holds a row an
// epoch, so rewriting it costs next to nothing.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/atomic_file.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/input_file.hpp"
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
    on_rank_0(view, [&] {
      text_.clear();
      if (append_ && ::access(filename_.c_str(), F_OK) == 0) text_ = read_regular_file(filename_, "a CSV log");
      { AtomicFile probe(filename_, "CSVLogger"); }  // the folder takes a new file; the old one is kept
      header_written_ = !text_.empty();
      if (header_written_ && text_.back() != '\n') text_ += '\n';  // a row cut short by another writer
    });
  }

  template <class View>
  void on_epoch_end(int epoch, const Logs& logs, View& view) {
    on_rank_0(view, [&] { write_row(epoch, logs); });
  }

 private:
  // Rank 0 writes; a failure there is an Error on every rank.
  template <class View, class Work>
  void on_rank_0(View& view, Work&& work) const {
    detail::on_rank_0(view.group(), std::forward<Work>(work),
                      detail::concat("CSVLogger: rank 0 could not write '", filename_, "' (its error says why)"));
  }

  void write_row(int epoch, const Logs& logs) {
    std::vector<std::size_t> order(logs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logs.name(a) < logs.name(b); });
    if (!header_written_) {
      text_ += "epoch";
      for (std::size_t i : order) text_ += separator_ + logs.name(i);
      text_ += '\n';
      header_written_ = true;
    }
    text_ += std::to_string(epoch);
    for (std::size_t i : order) text_ += separator_ + detail::shortest(logs.value(i));
    text_ += '\n';
    AtomicFile::write_whole(filename_, "CSVLogger", text_);
  }

  std::string filename_, separator_;
  bool append_;
  bool header_written_ = false;
  std::string text_;  // the whole file: the rows it had (when appending), then this fit's
};

}  // namespace lockstep
