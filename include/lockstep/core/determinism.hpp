// Deterministic: bitwise-reproducible training whatever the replica count
// (strategy.set_deterministic), by one of two schemes.
//
// Row order (Deterministic::in_row_order(), host replicas, in one process or
// several under MPI):
// no units. Each replica computes its own rows with lockstep's chain GEMM
// (backend/host/chain_gemm.hpp), whose every element is one chain of fused
// multiply-adds whatever the split of the rows, columns or threads; every
// sum over the batch's rows (a weight or bias gradient, the loss and metric
// sums) is one sum over the global batch's rows in row order, each replica
// computing a slice of it over every replica's rows (train/row_order.hpp).
// The bits are those of one replica on the whole batch, for any replica
// count. Dense, SyncBatchNormalization, activations, Dropout, Flatten,
// Reshape, pooling and Softmax take part; a model with another layer that
// has parameters or state (Conv2D, the per-replica BatchNormalization) is an
// Error that says to use units, as are GPUs.
//
// Units (Deterministic{units}): every global batch is split into `units`
// slices, a number that does not depend on how many replicas or processes
// run them; each unit is a logical replica with its own buffers and always
// the same rows, so its forward and backward run the same GEMM shapes
// wherever it runs. The units' gradients, loss and metric sums and
// BatchNormalization statistics are then summed in unit order, one
// left-to-right sum per value, whichever thread or process sums it. On the
// host the units are threads, as many computing at once as the process has
// cores (host::Permits): the replica and process counts change the speed,
// not one bit of the result. The cost grows with the unit count (each unit
// re-reads the weights and writes a whole gradient), so use the smallest
// count that covers the replica counts to compare. GEMMs run on one
// thread each, since a library's split of a product over threads can change
// its sums. docs/concepts.md, "Determinism", says what the guarantee covers.
#pragma once

#include "lockstep/core/error.hpp"

namespace lockstep {

struct Deterministic {
  // The units each global batch is split into; 0: no units.
  // It must be a multiple of every replica count (and process count x
  // replicas per process) the runs to be compared use: 24 covers 1, 2, 3,
  // 4, 6 and 8. More units than rows in a batch leaves some units empty.
  int units = 0;
  // The row-order scheme (no units): see above.
  bool row_order = false;

  static Deterministic in_row_order() {
    Deterministic d;
    d.row_order = true;
    return d;
  }
  bool enabled() const { return units > 0 || row_order; }
  bool by_units() const { return units > 0; }
};

namespace detail {
// The largest unit count: each unit is a thread of its process.
inline constexpr int kMaxUnits = 4096;

inline const Deterministic& checked(const Deterministic& d, const char* who) {
  require(d.units >= 0 && d.units <= kMaxUnits, who, ": Deterministic::units ", d.units,
          ", expected 0 (off) or a unit count from 1 to ", kMaxUnits,
          " that is a multiple of every replica count the runs use (24 covers 1, 2, 3, 4, 6 and 8)");
  require(!(d.units > 0 && d.row_order), who, ": Deterministic with units ", d.units,
          " and row_order both set, expected one scheme: units, or Deterministic::in_row_order() (units 0)");
  return d;
}

// The units each process runs: an Error unless `units` splits evenly over
// the processes and their replicas.
inline int units_per_process(const Deterministic& d, int replicas, int processes) {
  const int everyone = replicas * processes;
  require(d.units % everyone == 0, "Deterministic{", d.units, "}: ", d.units, " units do not split evenly over ",
          processes, processes == 1 ? " process" : " processes", " x ", replicas,
          replicas == 1 ? " replica" : " replicas", " (", everyone, "); choose a unit count that is a multiple of every "
          "replica count you run with (24 covers 1, 2, 3, 4, 6 and 8; 48 also covers 16)");
  return d.units / processes;
}
}  // namespace detail

}  // namespace lockstep
