// save_checkpoint / load_checkpoint: everything a resumed fit needs, in one
// safetensors file: the model's variables (as save_weights names them), the
// optimizer's slots ("optimizer/m", "optimizer/v", "optimizer/velocity") and
// step count ("optimizer/iterations", I64), and the trainer's run state
// (epoch, step, seed, steps done) in __metadata__, with a CRC-32C of the
// whole file ("crc32c") that every load checks: a corrupt, truncated or
// foreign file is an Error naming the file and what is wrong, never a run
// resumed from bad state. Then
//   fit(epochs = 2)  equals  fit(epochs = 1); save_checkpoint; load_checkpoint
//   into a fresh trainer and model; fit(epochs = 2, initial_epoch = 1)
// bit for bit, whatever the strategy. Under several processes every rank
// holds the same state and only rank 0 writes; every rank loads.
#pragma once

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/atomic_file.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/io/weights.hpp"
#include "lockstep/train/executor.hpp"

namespace lockstep {

// Writes a snapshot of a Model's run (with its run state) to `path`;
// `extra` adds __metadata__ entries of the caller's (BackupAndRestore's).
template <class Model>
void write_checkpoint(const Snapshot& snap, const std::string& path,
                      const std::map<std::string, std::string>& extra = {}) {
  std::vector<io::TensorView> tensors = io::detail::variable_tensors<Model>(snap.params.data(), snap.state.data());
  std::string slot_names;
  for (const Snapshot::Slot& s : snap.slots) {
    tensors.push_back({"optimizer/" + s.name, "F32", {static_cast<std::int64_t>(s.values.size())}, s.values.data(),
                       s.values.size() * sizeof(float)});
    slot_names += (slot_names.empty() ? "" : ",") + s.name;
  }
  tensors.push_back({"optimizer/iterations", "I64", {1}, &snap.iterations, sizeof snap.iterations});
  std::map<std::string, std::string> metadata = extra;
  metadata.insert({{"format", "lockstep checkpoint"},
                   {"layout_hash", io::detail::hex(Model::kLayoutHash)},
                   {"optimizer_slots", slot_names},
                   {"epoch", std::to_string(snap.run.epoch)},
                   {"step", std::to_string(snap.run.step)},
                   {"seed", std::to_string(snap.run.seed)},
                   {"steps_done", std::to_string(snap.run.steps_done)}});
  io::write_safetensors(path, tensors, metadata, "crc32c");
}

// Reads and checks the checkpoint at `path` (its CRC, that it is one, that
// it fits Model) into a snapshot; `metadata`, where given, gets its
// __metadata__. Touches no trainer.
template <class Model>
Snapshot read_checkpoint(const std::string& path, std::map<std::string, std::string>* metadata = nullptr) {
  const io::SafetensorsFile file(path);  // sizes, header and ranges checked
  const auto format = file.metadata().find("format");
  if (format == file.metadata().end() || format->second != "lockstep checkpoint")
    fail(path, ": not a lockstep checkpoint (its __metadata__ format is '",
         format == file.metadata().end() ? "" : format->second, "', expected 'lockstep checkpoint'",
         format != file.metadata().end() && format->second == "lockstep" ? "; it is a save_weights file: load_weights" : "",
         ")");
  require(file.metadata().count("crc32c") == 1, path,
          ": a lockstep checkpoint without a crc32c in its __metadata__ (written before lockstep 0.2, or altered), "
          "so its contents cannot be checked; load_weights reads its variables");
  file.check_crc32c("crc32c");
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
  // Digits only, and no more than `max`: strtoull alone takes "-1" (as its
  // largest value), leading spaces and out-of-range numbers.
  const auto number = [&](const char* key, std::uint64_t max = UINT64_MAX) {
    const std::string& text = file.metadata(key);
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    require(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && *end == '\0' &&
                errno != ERANGE && v <= max,
            path, ": __metadata__ '", key, "' is '", text, "', expected a count up to ", max);
    return static_cast<std::uint64_t>(v);
  };
  snap.run.epoch = static_cast<int>(number("epoch", static_cast<std::uint64_t>(INT_MAX)));
  snap.run.step = static_cast<std::size_t>(number("step"));
  snap.run.seed = number("seed");
  snap.run.steps_done = number("steps_done");
  if (metadata) *metadata = file.metadata();
  return snap;
}

// Rank 0 writes; every rank returns once the file is complete, so any rank
// may load it next, and a failed write is an Error on every rank.
template <class Trainer, class Model>
void save_checkpoint(Trainer& trainer, const Model& model, const std::string& path) {
  const Snapshot snap = trainer.snapshot(model);
  detail::on_rank_0(
      trainer.executor().group(), [&] { write_checkpoint<Model>(snap, path); },
      detail::concat("save_checkpoint: rank 0 could not write '", path, "' (its error says why)"));
}

namespace detail {
// AtomicFile::check_writable on rank 0, an Error on every rank where it fails
// (`who` starts the messages): for the writers that write on rank 0 alone.
template <class Group>
void check_writable_on_rank_0(Group& group, const std::string& path, const char* who) {
  on_rank_0(
      group, [&] { AtomicFile::check_writable(path, who); },
      concat(who, ": rank 0 cannot write '", path, "' (its error says why)"));
}
}  // namespace detail

// An Error on every rank now, before fit, where save_checkpoint could not
// write `path` after it: a folder that does not exist or is read-only, or
// `path` a folder. A typo in a path should not cost the training run.
// Nothing is written; rank 0 checks, as it is the one that writes.
template <class Trainer>
void check_can_save(Trainer& trainer, const std::string& path) {
  detail::check_writable_on_rank_0(trainer.executor().group(), path, "save_checkpoint");
}

// Restores `model`, the trainer's optimizer state for it and the run state;
// continue with fit(..., options.initial_epoch = trainer.run_state().epoch).
// On any Error (a bad file) nothing is changed.
template <class Trainer, class Model>
void load_checkpoint(Trainer& trainer, Model& model, const std::string& path) {
  trainer.restore(model, read_checkpoint<Model>(path));
}

}  // namespace lockstep
