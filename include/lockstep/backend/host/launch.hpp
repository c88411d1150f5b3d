// Host launches of the element-wise and row-wise functors that the CUDA
// backend runs from __global__ templates: the math is written once.
#pragma once

#include <cstddef>

namespace lockstep::host {

// Element-wise functors touch only index i of each array, so iterations are
// independent by contract: say so. Otherwise the compiler, seeing several
// float pointers, vectorises only behind a runtime alias check, and in some
// inlining contexts not at all (a standalone Adam step ran 4x slower).
#if defined(__clang__)
#define LOCKSTEP_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define LOCKSTEP_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define LOCKSTEP_INDEPENDENT_ITERATIONS
#endif

// Calls f(i) for i in [0, n). f is a LOCKSTEP_HOST_DEVICE functor whose call
// for i reads and writes element i only. It is copied to a local so that its
// pointer members stay in registers.
template <class F>
inline void for_each_index(std::size_t n, const F& functor) {
  const F f = functor;
  LOCKSTEP_INDEPENDENT_ITERATIONS
  for (std::size_t i = 0; i < n; ++i) f(i);
}

// Calls f(row) for row in [0, rows): one call per row, for row reductions.
template <class F>
inline void for_each_row(std::size_t rows, const F& functor) {
  const F f = functor;
  for (std::size_t r = 0; r < rows; ++r) f(r);
}

}  // namespace lockstep::host
