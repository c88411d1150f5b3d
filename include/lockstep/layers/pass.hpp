// Pass: what one forward or backward pass tells its layers beyond the data.
//   mode        training (Dropout drops, BatchNormalization uses the batch's
//               statistics and updates its moving ones) or inference
//   first_row   the global index, within the global batch, of this replica's
//               first row: per-sample randomness keyed by it does not depend
//               on which replica computes a row, nor on how many there are
//   key         the step's random key, from (seed, epoch, step): see step_key;
//               kernels read it through key_source(), memory that holds it
//               when they run (host-visible memory on CUDA, so a step
//               replayed from a graph uses the current step's key)
//   layer       the index of the layer being run (set by the model)
//   sum         sums a small float buffer in place over every replica of every
//               process (a collective call: every replica makes the same calls
//               in the same order, also with 0 rows); the sum of one replica
//               alone is the buffer itself
//   track()     the profiler's track of this replica (observe/tracer.hpp):
//               a constant null in an unprofiled step, so the model's
//               per-layer spans compile to nothing
// The executors make passes; a layer only reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lockstep/core/config.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/observe/tracer.hpp"

namespace lockstep {

enum class Mode { kTraining, kInference };

// The sum of a pass with one replica: the buffer is already the sum.
struct OneReplicaSum {
  template <class T>
  void operator()(T*, std::size_t) const {}
};

template <class Sum = OneReplicaSum, class Tracer = observe::NoTrace>
struct BasicPass : Tracer {
  BasicPass() = default;
  explicit BasicPass(Mode m) : mode(m) {}  // Pass{Mode::kTraining}, as a layer's own test writes it

  Mode mode = Mode::kInference;
  std::uint64_t first_row = 0;
  std::uint64_t key = 0;
  std::uint64_t layer = 0;
  Sum sum{};
  const std::uint64_t* key_at = nullptr;  // where the key is read at run time; null: `key` itself

  bool training() const { return mode == Mode::kTraining; }
  const std::uint64_t* key_source() const { return key_at ? key_at : &key; }
  BasicPass for_layer(std::uint64_t index) const {
    BasicPass p = *this;
    p.layer = index;
    return p;
  }
};
using Pass = BasicPass<>;

// The random key of training step `step` of epoch `epoch` under `seed`: every
// replica and process derives the same key, so masks agree bit for bit.
inline std::uint64_t step_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t step) {
  return Philox4x32::bits64(seed, rng_stream::kStep + epoch, step);
}

}  // namespace lockstep
