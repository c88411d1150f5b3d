// Host launches of the element-wise and row-wise functors that the CUDA
// backend runs from __global__ templates: the math is written once.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "lockstep/core/config.hpp"

namespace lockstep::host {

// A functor may define host_loop(n): the effect of f(i) for every i in [0,
// n), bit for bit, in a loop shape the compiler can vectorise where f(i)'s
// cannot (a per-channel functor dividing i by the channel count per value;
// a per-chunk sum walking one channel with a stride). A GPU calls f(i).
template <class F, class = void>
struct has_host_loop : std::false_type {};
template <class F>
struct has_host_loop<F, std::void_t<decltype(std::declval<const F&>().host_loop(std::size_t{}))>> : std::true_type {};

// Calls f(i) for i in [0, n) (or f.host_loop(n), above). f is a
// LOCKSTEP_HOST_DEVICE functor whose call for i reads and writes element i
// only. It is copied to a local so that its pointer members stay in registers.
template <class F>
inline void for_each_index(std::size_t n, const F& functor) {
  const F f = functor;
  if constexpr (has_host_loop<F>::value) {
    f.host_loop(n);
  } else {
    LOCKSTEP_INDEPENDENT_ITERATIONS
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
}

// Calls f(row) for row in [0, rows): one call per row, for row reductions.
template <class F>
inline void for_each_row(std::size_t rows, const F& functor) {
  const F f = functor;
  for (std::size_t r = 0; r < rows; ++r) f(r);
}

}  // namespace lockstep::host
