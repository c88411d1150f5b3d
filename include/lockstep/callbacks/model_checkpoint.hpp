// ModelCheckpoint: Keras' callback with its arguments and defaults. Saves
// after every epoch (save_freq 0, Keras' "epoch") or every save_freq
// batches, to `filepath` with Keras' fields filled in: {epoch} (1-based, as
// Keras numbers files), {batch}, and any value of the logs, each with an
// optional format ({epoch:02d}, {val_loss:.4f}). save_weights_only writes
// save_weights' file; otherwise a full checkpoint (io/checkpoint.hpp) that
// load_checkpoint resumes from. save_best_only writes only when `monitor`
// improves (on initial_value_threshold, where given). Only rank 0 writes, and
// a failed write is an Error on every rank; every write is atomic, so the
// last good file survives a crash. A folder that cannot be written is an
// Error when fit begins.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "lockstep/callbacks/monitor.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/io/checkpoint.hpp"
#include "lockstep/io/weights.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  bool save_best_only = false;
  bool save_weights_only = false;
  std::string mode = "auto";
  std::size_t save_freq = 0;  // 0: after every epoch ("epoch"); N: every N batches
  std::optional<double> initial_value_threshold;
};

namespace detail {
// `pattern` with each {name} or {name:spec} replaced: "epoch" and "batch" by
// the numbers given, other names by the logs' values.
inline std::string fill_path(const std::string& pattern, long epoch, long batch, const Logs& logs) {
  std::string out;
  for (std::size_t at = 0; at < pattern.size();) {
    const char c = pattern[at];
    if (c != '{') {
      out.push_back(c);
      ++at;
      continue;
    }
    const std::size_t close = pattern.find('}', at);
    require(close != std::string::npos, "ModelCheckpoint: filepath '", pattern, "' has a '{' without its '}'");
    const std::string field = pattern.substr(at + 1, close - at - 1);
    const std::size_t colon = field.find(':');
    const std::string name = field.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    require(spec.find_first_of("%*$") == std::string::npos && spec.size() < 16, "ModelCheckpoint: format '", spec,
            "' of {", name, "}, expected one such as 02d or .4f");
    char text[64];
    if (name == "epoch" || name == "batch") {
      const long v = name == "epoch" ? epoch : batch;
      const std::string f = "%" + (spec.empty() ? std::string("ld") : spec.substr(0, spec.size() - 1) + "ld");
      require(spec.empty() || spec.back() == 'd', "ModelCheckpoint: {", name, ":", spec, "} is a whole number: use d");
      std::snprintf(text, sizeof text, f.c_str(), v);
    } else {
      const double v = logs[name];
      if (spec.empty()) {
        out += shortest(v);
        at = close + 1;
        continue;
      }
      require(spec.back() == 'f' || spec.back() == 'e' || spec.back() == 'g', "ModelCheckpoint: {", name, ":", spec,
              "} is a number: use f, e or g");
      std::snprintf(text, sizeof text, ("%" + spec).c_str(), v);
    }
    out += text;
    at = close + 1;
  }
  return out;
}
}  // namespace detail

class ModelCheckpoint {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {})
      : filepath_(std::move(filepath)), options_(std::move(options)),
        monitor_(options_.monitor, options_.mode, 0.0) {
    require(!filepath_.empty(), "ModelCheckpoint: an empty filepath");
    if (options_.initial_value_threshold) {
      monitor_.check_reference(*options_.initial_value_threshold, "ModelCheckpoint", "initial_value_threshold");
      monitor_.set_best(*options_.initial_value_threshold);
    }
  }

  // A folder that could not be written is an Error on every rank before the
  // first step, not at the first save (where the folder's part of filepath
  // has a field, it is known only then).
  template <class View>
  void on_train_begin(const TrainInfo&, View& view) {
    const std::size_t slash = filepath_.find_last_of('/');
    if (slash != std::string::npos && filepath_.find('{') < slash) return;
    detail::check_writable_on_rank_0(view.group(), filepath_, "ModelCheckpoint");
  }

  template <class View>
  void on_batch_end(std::size_t step, const Logs& logs, View& view) {
    if (options_.save_freq == 0 || ++batches_ % options_.save_freq != 0) return;
    save(view.run().epoch, static_cast<long>(step) + 1, logs, view);
  }

  template <class View>
  void on_epoch_end(int epoch, const Logs& logs, View& view) {
    if (options_.save_freq == 0) save(epoch, 0, logs, view);
  }

  const std::string& last_path() const { return last_path_; }
  int saves() const { return saves_; }

 private:
  template <class View>
  void save(int epoch, long batch, const Logs& logs, View& view) {
    if (options_.save_best_only) {
      const double current = monitor_.value(logs);
      if (!monitor_.improves(current, monitor_.best())) return;
      monitor_.set_best(current);
    }
    const std::string path = detail::fill_path(filepath_, epoch + 1, batch, logs);
    using Model = typename View::model_type;
    const std::string elsewhere =
        detail::concat("ModelCheckpoint: rank 0 could not write '", path, "' (its error says why)");
    if (options_.save_weights_only) {
      const Model& model = view.model();
      detail::on_rank_0(view.group(), [&] { save_weights(model, path); }, elsewhere);
    } else {
      const Snapshot snap = view.snapshot();
      detail::on_rank_0(view.group(), [&] { write_checkpoint<Model>(snap, path); }, elsewhere);
    }
    last_path_ = path;
    ++saves_;
  }

  std::string filepath_;
  ModelCheckpointOptions options_;
  Monitor monitor_;
  std::size_t batches_ = 0;
  std::string last_path_;
  int saves_ = 0;
};

}  // namespace lockstep
