// What a collective is: a policy with `using backend`, a kName, and a nested
// Group made for N replicas whose all_reduce(replica, data, count, op) every
// replica calls with its own buffer; on return each buffer holds the result.
#pragma once

#include <cstddef>
#include <type_traits>

#include "lockstep/core/traits.hpp"

namespace lockstep {

enum class ReduceOp { kSum, kMean };

namespace detail {
template <class C>
using collective_probe = decltype(C::kName, static_cast<typename C::backend*>(nullptr));
template <class C>
inline constexpr bool is_collective = is_detected<collective_probe, C>;

// True for collectives whose replicas live in several processes (MpiAllReduce).
template <class C, class = void>
struct spans_processes : std::false_type {};
template <class C>
struct spans_processes<C, std::enable_if_t<C::kSpansProcesses>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
