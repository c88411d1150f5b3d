// What a collective is: a policy with `using backend`, a kName, and a nested
// Group made for N replicas whose all_reduce(replica, data, count, op) every
// replica calls with its own buffer; on return each buffer holds the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lockstep/core/traits.hpp"

namespace lockstep {

enum class ReduceOp { kSum, kMean };

namespace detail {
// The process-level operations of a collective whose replicas all live in
// this process: identities. A multi-process collective (MpiAllReduce) does
// them over MPI; the trainer calls them either way.
struct SingleProcess {
  int process_rank() const { return 0; }
  int process_count() const { return 1; }
  int processes_on_this_node() const { return 1; }
  void broadcast_from_root(void*, std::size_t) {}
  void sum_across_processes(double*, std::size_t) {}
  void check_same_across_processes(const char* const*, const std::uint64_t*, std::size_t) {}
  // No other process waits on this one: the trainer rebuilds the group and rethrows.
  void end_job_after_failure(const char*) {}
};

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
