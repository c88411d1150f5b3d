// What the deterministic-mode tests share (train/test_deterministic.cpp and
// mpi/test_deterministic.cpp): the model (Dropout, synchronised and
// unsynchronised BatchNormalization), the data with its short last batch,
// and a bit-for-bit comparison of everything a run leaves.
#pragma once

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "test_helpers.hpp"

namespace lockstep::testing::determinism {
using Model = Sequential<Input<12>, Dense<16, Relu>, SyncBatchNormalization, Dropout<20>, Dense<16, Relu>,
                         BatchNormalization<>, Dense<4>>;

// Everything a run leaves: the snapshot's parameters, state, slots and step
// count, and the History's values, as bytes.
struct Outcome {
  Snapshot snapshot;
  History history;
  std::vector<double> evaluated;  // evaluate's loss and accuracy on the whole data set, batch 32
};

inline constexpr int kUnits = 24;

inline Dataset data_set() { return argmax_dataset(150, 12, 4, 7); }

inline FitOptions options(int epochs = 2) {
  // 150 samples, the last 30 for validation (val_loss, val_accuracy: logged
  // values too); 120 at batch 56: steps of 56, 56 and a short one of 8 rows,
  // so that in the last step 16 of the 24 units have no rows at all.
  FitOptions o = quiet_fit(56, epochs);
  o.seed = 5;
  o.validation_split = 0.2;
  return o;
}

// The model without the unsynchronised BatchNormalization, whose statistics
// are per replica in the default mode (TensorFlow's) and per unit in the
// deterministic one: the two modes then compute the same function.
using SyncModel = Sequential<Input<12>, Dense<16, Relu>, SyncBatchNormalization, Dropout<20>, Dense<4>>;

// The row-order scheme's model (core/determinism.hpp): Dense, synchronised
// BatchNormalization (fused with the Relu after it), Dropout, activations;
// the per-replica BatchNormalization cannot take part.
using RowOrderModel = Sequential<Input<12>, Dense<16>, SyncBatchNormalization, Relu, Dropout<20>, Dense<16, Tanh>,
                                 Relu, Dense<4>>;
// Layers whose layer below meets the replicas before it writes (Dense, a
// synchronised BatchNormalization past its fused Relu): their rows need no
// second meeting (BasicPass::below_meets_first), which RowOrderModel's
// Dropout and Relu layer never skip. Its first and third Dense layers are
// wide enough for their output gradients to be packed once for every replica
// (chain_pack_b), the first with a partial panel.
using RowOrderStack = Sequential<Input<12>, Dense<40, Relu>, Dense<16>, SyncBatchNormalization, Relu,
                                 Dense<64, Tanh>, Dense<4>>;

template <class Strategy, class Optimizer, class M = Model>
Outcome train(Strategy strategy, const Optimizer& opt, Deterministic mode, int epochs = 2) {
  if (mode.enabled()) strategy.set_deterministic(mode);
  M model{21};
  Trainer<Strategy, Optimizer> trainer{strategy, opt};
  Outcome out;
  out.history = trainer.fit(model, data_set(), options(epochs));
  out.snapshot = trainer.snapshot(model);
  const Logs logs = trainer.evaluate(model, data_set(), 32);
  out.evaluated = {logs["loss"], logs["accuracy"]};
  return out;
}
template <class Strategy, class Optimizer, class M = Model>
Outcome train(Strategy strategy, const Optimizer& opt, int units, int epochs = 2) {
  return train<Strategy, Optimizer, M>(std::move(strategy), opt, Deterministic{units}, epochs);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Which part of two outcomes differs, or "" when every bit agrees.
inline std::string first_difference(const Outcome& a, const Outcome& b) {
  if (!same_bits(a.snapshot.params, b.snapshot.params)) return "parameters";
  if (!same_bits(a.snapshot.state, b.snapshot.state)) return "state (moving statistics)";
  if (a.snapshot.slots.size() != b.snapshot.slots.size()) return "optimizer slot count";
  for (std::size_t i = 0; i < a.snapshot.slots.size(); ++i)
    if (!same_bits(a.snapshot.slots[i].values, b.snapshot.slots[i].values))
      return "optimizer slot " + a.snapshot.slots[i].name;
  if (a.snapshot.iterations != b.snapshot.iterations) return "optimizer iterations";
  if (a.history.history.size() != b.history.history.size()) return "logged names";
  for (const auto& [name, values] : a.history.history)
    if (!same_bits(values, b.history[name])) return "logged " + name;
  if (!same_bits(a.evaluated, b.evaluated)) return "evaluate's loss and accuracy";
  return "";
}
}  // namespace lockstep::testing::determinism
