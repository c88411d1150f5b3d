// Host launches of the element-wise and row-wise functors that the CUDA
// backend runs from __global__ templates: the math is written once.
#pragma once

#include <cstddef>

namespace lockstep::host {

// Calls f(i) for i in [0, n). f is a LOCKSTEP_HOST_DEVICE functor.
template <class F>
inline void for_each_index(std::size_t n, const F& f) {
  for (std::size_t i = 0; i < n; ++i) f(i);
}

// Calls f(row) for row in [0, rows): one call per row, for row reductions.
template <class F>
inline void for_each_row(std::size_t rows, const F& f) {
  for (std::size_t r = 0; r < rows; ++r) f(r);
}

}  // namespace lockstep::host
