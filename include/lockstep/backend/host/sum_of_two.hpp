// host::SumOfTwo: a read-only view of two float buffers as their element-wise
// sum, a[i] + b[i], taken when read. HostAllReduce's sharded update hands it
// to the optimizer with two replicas, so the optimizer sums the gradient
// chunks as it reads them: the sum is never stored and read back, and the
// reads from the other core's cache overlap the optimizer's arithmetic
// (2 replicas, batch 256: reduce and Adam update of a replica's chunk took
// 228 us a step reducing first, 180 us summing as it reads).
// It indexes and offsets like the `const float*` it stands in for.
#pragma once

#include <cstddef>

#include "lockstep/core/config.hpp"

namespace lockstep::host {

struct SumOfTwo {
  const float* a;
  const float* b;
  // Host and device: the optimizers' kernels are, though this view is only
  // ever handed host memory.
  LOCKSTEP_HOST_DEVICE float operator[](std::size_t i) const { return a[i] + b[i]; }
  friend SumOfTwo operator+(SumOfTwo s, std::size_t offset) { return {s.a + offset, s.b + offset}; }
};

}  // namespace lockstep::host
