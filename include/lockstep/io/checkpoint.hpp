// save_checkpoint / load_checkpoint: everything a resumed fit needs, in one
// safetensors file: the model's variables (as save_weights names them), the
// optimizer's slots ("optimizer/m", "optimizer/v", "optimizer/velocity") and
// step count ("optimizer/iterations", I64), and the trainer's run state
// (epoch, seed, steps done) in __metadata__. Then
//   fit(epochs = 2)  equals  fit(epochs = 1); save_checkpoint; load_checkpoint
//   into a fresh trainer and model; fit(epochs = 2, initial_epoch = 1)
// bit for bit, whatever the strategy. Under several processes every rank
// holds the same state and only rank 0 writes; every rank loads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/io/weights.hpp"
#include "lockstep/train/executor.hpp"

namespace lockstep {

// Writes a snapshot of a Model's run (with its run state) to `path`.
template <class Model>
void write_checkpoint(const Snapshot& snap, const std::string& path) {
  std::vector<io::TensorView> tensors = io::detail::variable_tensors<Model>(snap.params.data(), snap.state.data());
  std::string slot_names;
  for (const Snapshot::Slot& s : snap.slots) {
    tensors.push_back({"optimizer/" + s.name, "F32", {static_cast<std::int64_t>(s.values.size())}, s.values.data(),
                       s.values.size() * sizeof(float)});
    slot_names += (slot_names.empty() ? "" : ",") + s.name;
  }
  tensors.push_back({"optimizer/iterations", "I64", {1}, &snap.iterations, sizeof snap.iterations});
  io::write_safetensors(path, tensors,
                        {{"format", "lockstep checkpoint"},
                         {"layout_hash", io::detail::hex(Model::kLayoutHash)},
                         {"optimizer_slots", slot_names},
                         {"epoch", std::to_string(snap.run.epoch)},
                         {"seed", std::to_string(snap.run.seed)},
                         {"steps_done", std::to_string(snap.run.steps_done)}});
}

// Rank 0 writes; every rank returns once the file is complete (a broadcast
// of rank 0's outcome), so any rank may load it next, and a failed write is
// an Error on every rank, not only on rank 0.
template <class Trainer, class Model>
void save_checkpoint(Trainer& trainer, const Model& model, const std::string& path) {
  const Snapshot snap = trainer.snapshot(model);
  std::string error;
  if (trainer.process_rank() == 0) {
    try {
      write_checkpoint<Model>(snap, path);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  char failed = error.empty() ? 0 : 1;
  trainer.executor().group().broadcast_from_root(&failed, 1);
  if (!error.empty()) throw Error(error.substr(error.find(' ') + 1));  // "lockstep: " is added again
  require(!failed, "save_checkpoint: rank 0 could not write '", path, "' (its error says why)");
}

// Restores `model`, the trainer's optimizer state for it and the run state;
// continue with fit(..., options.initial_epoch = trainer.run_state().epoch).
template <class Trainer, class Model>
void load_checkpoint(Trainer& trainer, Model& model, const std::string& path) {
  const io::SafetensorsFile file(path);
  Snapshot snap;
  snap.params.resize(Model::kParams);
  snap.state.resize(Model::kState);
  io::detail::read_variables<Model>(file, snap.params.data(), snap.state.data());
  const std::string& names = file.metadata("optimizer_slots");
  for (std::size_t at = 0; at < names.size();) {
    const std::size_t comma = std::min(names.find(',', at), names.size());
    Snapshot::Slot slot{names.substr(at, comma - at), std::vector<float>(Model::kParams)};
    file.read("optimizer/" + slot.name, "F32", {static_cast<std::int64_t>(Model::kParams)}, slot.values.data());
    snap.slots.push_back(std::move(slot));
    at = comma + 1;
  }
  file.read("optimizer/iterations", "I64", {1}, &snap.iterations);
  const auto number = [&](const char* key) {
    const std::string& text = file.metadata(key);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    require(!text.empty() && *end == '\0', path, ": __metadata__ '", key, "' is '", text, "', expected a count");
    return static_cast<std::uint64_t>(v);
  };
  snap.run.epoch = static_cast<int>(number("epoch"));
  snap.run.seed = number("seed");
  snap.run.steps_done = number("steps_done");
  trainer.restore(model, snap);
}

}  // namespace lockstep
