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
//   below_meets_first
//               backward: the layer whose backward runs next meets every
//               replica at a sum over rows before it writes anything
//               (detail::meets_first; set by the model), so the rows this
//               layer gives `rows` outlive every replica's reading of them
//   sum         sums a small float buffer in place over every replica of every
//               process (a collective call: every replica makes the same calls
//               in the same order, also with 0 rows); the sum of one replica
//               alone is the buffer itself
//   rows        the sums over a batch's rows (OwnRows below): a layer's
//               weight and bias gradients, the step's loss and metric sums
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

// The sums over a batch's rows that a layer's backward and the step take:
// over this replica's own rows (OwnRows: every mode but one), or over the
// global batch's rows in row order (host::RowOrderSums, the deterministic
// row-order scheme of core/determinism.hpp). Like `sum`, a collective call in
// the latter: every replica makes the same calls in the same order, also
// with 0 rows.
struct OwnRows {
  // Whether these sums may span replicas (RowOrderSums: then global() says
  // whether they do); a layer's own kernels decide on it at compile time.
  static constexpr bool kSpansReplicas = false;
  // dw(in, out) = x(rows, in)^T dy(rows, out), and db(out) = the sums of dy's
  // columns unless db is null: a dense layer's gradients. rows_reused: false
  // where backward writes over neither x nor dy before the replicas meet
  // again (the first layer; a layer whose below_meets_first).
  template <class Ctx, class T>
  void weight_gradients(Ctx& ctx, const T* x, int in, const T* dy, int out, int rows, T* dw, T* db,
                        bool rows_reused = true) const {
    (void)rows_reused;
    const std::size_t weights = static_cast<std::size_t>(in) * static_cast<std::size_t>(out);
    if (rows == 0) {
      ctx.zero(dw, weights);
      if (db) ctx.zero(db, static_cast<std::size_t>(out));
      return;
    }
    ctx.gemm(true, false, in, out, rows, T(1), x, in, dy, out, T(0), dw, out);  // (in, rows) x (rows, out)
    if (db) ctx.column_sums(dy, rows, out, db);
  }
  // out[i] = the sum over rows of per_row[i * stride + row], for i < count:
  // the step's loss and metric sums.
  template <class Ctx, class T>
  void sums(Ctx& ctx, const T* per_row, std::size_t stride, int rows, std::size_t count, T* out) const {
    for (std::size_t i = 0; i < count; ++i) ctx.sum_to(per_row + i * stride, static_cast<std::size_t>(rows), out + i);
  }
};

template <class Sum = OneReplicaSum, class Tracer = observe::NoTrace, class Rows = OwnRows>
struct BasicPass : Tracer {
  BasicPass() = default;
  explicit BasicPass(Mode m) : mode(m) {}  // Pass{Mode::kTraining}, as a layer's own test writes it

  Mode mode = Mode::kInference;
  std::uint64_t first_row = 0;
  std::uint64_t key = 0;
  std::uint64_t layer = 0;
  bool below_meets_first = false;
  Sum sum{};
  Rows rows{};
  const std::uint64_t* key_at = nullptr;  // where the key is read at run time; null: `key` itself

  bool training() const { return mode == Mode::kTraining; }
  const std::uint64_t* key_source() const { return key_at ? key_at : &key; }
  BasicPass for_layer(std::uint64_t index, bool below_meets = false) const {
    BasicPass p = *this;
    p.layer = index;
    p.below_meets_first = below_meets;
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
