// TensorBoard: Keras' callback, writing event files that `tensorboard
// --logdir <log_dir>` shows (observe/event_file.hpp writes them). As Keras 2
// does: the training values of each epoch go to <log_dir>/train/ as
// epoch_loss, epoch_accuracy, ... (step = the epoch, 0-based); the validation
// values ("val_loss", ...) to <log_dir>/validation/ under the same tags
// without "val_" (an epoch that did not validate writes none); with
// update_freq N ("batch" is 1), the running values of every Nth batch as
// batch_loss, ... (step = the global batch count, all fits of the trainer
// together); with histogram_freq N, every Nth epoch, a histogram of each
// variable of the model (trainable or not) tagged as Keras 2 tags them:
// "dense/kernel_0/histogram". Each fit starts new files, flushed at every
// epoch's end (and after each batch write) and closed when fit ends. Only
// rank 0 writes, and a write it fails is an Error on every rank.
//
// With profile_batch {first, last} (Keras' profile_batch=(first, last)),
// batches first..last (counted from 1) are profiled by ProfileBatches into
// <log_dir>/plugins/profile: a Chrome trace (Perfetto, chrome://tracing; not
// TensorBoard's own profile format) and the scaling report. Recording needs
// a strategy wrapped in Profiled<...> (strategy/profiled.hpp).
//
// Not written: the model graph (write_graph must be false), images,
// embeddings, steps per second, or a schedule's learning rate.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/callbacks/profile_batches.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/observe/event_file.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

// Keras' update_freq: "epoch", "batch" (every batch) or a number of batches.
class UpdateFreq {
 public:
  // Implicit, so that `options.update_freq = "batch";` and `= 100;` read as Keras' argument does.
  UpdateFreq(const char* text) : text_(text ? text : "") {}
  UpdateFreq(std::string text) : text_(std::move(text)) {}
  UpdateFreq(int batches) : batches_(batches), is_number_(true) {}
  // Batches between writes; 0 for "epoch". An Error for any other text, or a number below 1.
  std::size_t batches() const {
    if (is_number_) {
      require(batches_ >= 1, "TensorBoard: update_freq ", batches_, ", expected \"epoch\", \"batch\" or at least 1");
      return static_cast<std::size_t>(batches_);
    }
    if (text_ == "epoch") return 0;
    if (text_ == "batch") return 1;
    fail("TensorBoard: update_freq '", text_, "', expected \"epoch\", \"batch\" or a number of batches");
  }

 private:
  std::string text_;
  int batches_ = 0;
  bool is_number_ = false;
};

struct TensorBoardOptions {
  std::string log_dir = "logs";
  int histogram_freq = 0;     // 0: no histograms; N: every N epochs (epochs 0, N, 2N...)
  bool write_graph = false;   // Keras' default is true; lockstep writes no graph, so only false
  UpdateFreq update_freq = "epoch";
  // Keras' profile_batch=(first, last): the batches to profile, from 1; {0, 0}: none (Keras' 0).
  std::pair<std::size_t, std::size_t> profile_batch{0, 0};
};

namespace detail {
template <class M>
using model_variables_probe = decltype(M::variables());
}  // namespace detail

class TensorBoard {
 public:
  explicit TensorBoard(TensorBoardOptions options = {}) : options_(std::move(options)) {
    require(!options_.log_dir.empty(), "TensorBoard: an empty log_dir, expected the directory to write logs to");
    require(options_.histogram_freq >= 0, "TensorBoard: histogram_freq ", options_.histogram_freq,
            ", expected 0 (no histograms) or a number of epochs");
    require(!options_.write_graph, "TensorBoard: write_graph = true, but lockstep writes no graphs; "
                                   "set write_graph = false");
    every_ = options_.update_freq.batches();
    const auto [first, last] = options_.profile_batch;
    if (first != 0 || last != 0)
      profile_.emplace((std::filesystem::path(options_.log_dir) / "plugins" / "profile").string(), first, last);
  }
  explicit TensorBoard(std::string log_dir) : TensorBoard(options_with(std::move(log_dir))) {}

  template <class View>
  void on_train_begin(const TrainInfo& info, View& view) {
    if (profile_) profile_->on_train_begin(info, view);
    validation_.reset();
    train_.reset();
    using Model = typename View::model_type;
    require(options_.histogram_freq == 0 || detail::is_detected<detail::model_variables_probe, Model>,
            "TensorBoard: histogram_freq ", options_.histogram_freq,
            ", but this model does not name its variables (no static variables()); set histogram_freq = 0");
    on_rank_0(view, [&] { train_ = std::make_unique<observe::EventFileWriter>(subdir("train")); });
  }

  void on_batch_begin(std::size_t step) {
    if (profile_) profile_->on_batch_begin(step);
  }

  template <class View>
  void on_batch_end(std::size_t step, const Logs& logs, View& view) {
    if (profile_) profile_->on_batch_end(step, logs);
    if (every_ == 0) return;
    // Keras 2 records when its train counter (batches done, all fits) is a multiple of update_freq.
    const std::uint64_t done = view.run().steps_done;
    if (done % every_ != 0) return;
    on_rank_0(view, [&] {
      for (std::size_t i = 0; i < logs.size(); ++i)
        train_->add_scalar("batch_" + logs.name(i), static_cast<std::int64_t>(done), logs.value(i));
      train_->flush();  // batch values show while the epoch runs: one write call per update_freq batches
    });
  }

  template <class View>
  void on_epoch_end(int epoch, const Logs& logs, View& view) {
    on_rank_0(view, [&] {
      for (std::size_t i = 0; i < logs.size(); ++i) {
        const std::string& name = logs.name(i);
        if (name.rfind("val_", 0) != 0) {
          train_->add_scalar("epoch_" + name, epoch, logs.value(i));
        } else if (!std::isnan(logs.value(i))) {  // NaN: this epoch did not validate (Keras has no entry)
          if (!validation_) validation_ = std::make_unique<observe::EventFileWriter>(subdir("validation"));
          validation_->add_scalar("epoch_" + name.substr(4), epoch, logs.value(i));
        }
      }
      if (options_.histogram_freq > 0 && epoch % options_.histogram_freq == 0) write_histograms(epoch, view);
      train_->flush();
      if (validation_) validation_->flush();
    });
  }

  void on_train_end(const Logs& logs) {
    if (profile_) profile_->on_train_end(logs);
    if (train_) train_->close();
    if (validation_) validation_->close();
    train_.reset();
    validation_.reset();
  }

  // The files of the current (or last) fit; empty where none was written.
  std::string train_file() const { return train_ ? train_->path() : std::string(); }
  const TensorBoardOptions& options() const { return options_; }

 private:
  // Rank 0 writes; a failure there is an Error on every rank.
  template <class View, class Work>
  void on_rank_0(View& view, Work&& work) const {
    detail::on_rank_0(view.group(), std::forward<Work>(work),
                      detail::concat("TensorBoard: rank 0 could not write its event files in '", options_.log_dir,
                                     "' (its error says why)"));
  }

  static TensorBoardOptions options_with(std::string log_dir) {
    TensorBoardOptions o;
    o.log_dir = std::move(log_dir);
    return o;
  }
  std::string subdir(const char* name) const { return (std::filesystem::path(options_.log_dir) / name).string(); }

  template <class View>
  void write_histograms(int epoch, View& view) {
    using Model = typename View::model_type;
    if constexpr (detail::is_detected<detail::model_variables_probe, Model>) {
      const auto& model = view.model();  // the live parameters, copied out of the replicas
      for (const auto& v : Model::variables()) {
        const std::vector<float>& values = v.trainable ? model.parameters() : model.state();
        // Keras 2 names a weight "dense/kernel:0" and writes it as "dense/kernel_0/histogram".
        train_->add_histogram(v.name + "_0/histogram", epoch, values.data() + v.offset, v.size());
      }
    }
  }

  TensorBoardOptions options_;
  std::size_t every_ = 0;
  std::unique_ptr<observe::EventFileWriter> train_, validation_;
  std::optional<ProfileBatches> profile_;
};

}  // namespace lockstep
