// What a collective is: a policy with `using backend`, a kName, and a nested
// Group that combines one contiguous float buffer across the replicas of a
// step. One contract on every backend; Queue is the backend context's
// queue_type (host::Queue, an empty value, on the host; cudaStream_t on CUDA):
//   Group(const std::vector<int>& devices)       replica r on devices[r]
//   int size() const                             replicas in this process
//   all_reduce(int replica, float* data, std::size_t count, Queue queue)
//       called by every replica with its own buffer; when the queue's work is
//       done every buffer holds the sum
//   abort()                                      releases replicas waiting in
//                                                the group after one failed
//   process-level: process_rank(), process_count(), processes_on_this_node(),
//       broadcast_from_root(p, bytes), sum_across_processes(double*, n),
//       check_same_across_processes(names, values, n), end_job_after_failure(what)
//       (derive from detail::SingleProcess when every replica is in this process)
// Optional, used by the strategies that need them:
//   reduce_to_root(r, data, count, queue), copy_from_root(r, data, count, queue)
//       CentralStoragePolicy's reduce onto replica 0 and copy back out
//   reduce_update(r, grads, count, params_count, update), shard(r, count)
//       the all-reduce fused with a sharded optimizer step (shared memory)
//   release_after_failure()                      device work to drop after a failure
//   set_timeout(double seconds), set_step(std::int64_t step)
//       CommunicationOptions::timeout_seconds for every wait on the other
//       replicas or processes, and the step under way (-1: none) for the
//       message of a wait that timed out (configure_group below)
//   kCapturable, kPartial, kSharedDevices, kCapturableAlone
//       capabilities, false by default: calls may be recorded in a CUDA
//       graph; calls on parts of the buffer may overlap backward; several
//       replicas may share one device; a group of one replica returns from
//       every call at once, so a one-replica step may be recorded even where
//       kCapturable is false (the copy collectives' host barriers)
//   gather_to_root(text) -> every process's text on rank 0 (the placement log)
//   gather_across_processes(mine, n, all)        every process's n doubles,
//       in rank order, on every process: evaluation's per-replica sums, so
//       that they are added in global replica order whatever the process count
//   sum_in_replica_order()                       the deterministic mode
//       (core/determinism.hpp): from now on every value is summed left to
//       right over the job's replicas in global order, whatever the process
//       count. A group that always sums so in one process (HostAllReduce)
//       need not have it; one that spans processes must (in_unit_order below)
// and on the collective itself, for the placement log (observe/placement.hpp):
//   static describe(count, local_replicas, processes, CollectiveCall)
//       how it combines a buffer of `count` floats, in words
// A Trainer checks the required members (check_group) and names a missing one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/communication.hpp"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"

namespace lockstep {

enum class ReduceOp { kSum, kMean };

// Which of a Group's calls a strategy's step makes on the gradient buffer,
// as a collective's describe() tells it: all_reduce (mirrored), reduce_to_root
// (central storage), reduce_update (the sharded update).
enum class CollectiveCall { kAllReduce, kReduceToRoot, kReduceUpdate };

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
  // Every process's text on rank 0: here only this one's.
  std::vector<std::string> gather_to_root(const std::string& text) { return {text}; }
};

// Runs `work` on process rank 0 alone, as the code that writes a file does;
// every rank returns once rank 0 has (a broadcast of its outcome), and an
// Error there is an Error on every rank, rank 0's with its own message, the
// others' with `elsewhere`, instead of ranks that go on to wait in their
// next collective for one that has left.
template <class Group, class Work>
void on_rank_0(Group& group, Work&& work, const std::string& elsewhere) {
  std::string error;
  if (group.process_rank() == 0) {
    try {
      work();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  char failed = error.empty() ? 0 : 1;
  group.broadcast_from_root(&failed, 1);
  if (!error.empty()) throw Error(error.substr(error.find(' ') + 1));  // "lockstep: " is added again
  require(!failed, elsewhere);
}

// Where a wait that timed out was, for its message: " in step 17 of this
// fit (counted from 0 over its epochs)", or `outside` when `step` is -1.
inline std::string step_text(std::int64_t step, const char* outside = " outside a training step") {
  return step >= 0 ? concat(" in step ", step, " of this fit (counted from 0 over its epochs)") : std::string(outside);
}

// The Error of a shared-memory group's barrier that timed out: "HostAllReduce:
// all_reduce of 814120 bytes in step 3 ... timed out (arriving): <who did not
// arrive>. <what next>". `phase` (what the others had not finished) may be null.
inline std::string barrier_timeout(const std::string& group, const char* call, std::size_t bytes, std::int64_t step,
                                   const char* phase, const std::string& stall) {
  return concat(group, ": ", call, " of ", bytes, " bytes", step_text(step), " timed out",
                phase ? concat(" (", phase, ")") : std::string(), ": ", stall, ". ", kAfterTimeout);
}

// The largest of `parts` parts of a `count`-long buffer cut into whole
// multiples of `grain` elements (the last part short), as the collectives
// cut their chunks: for describe().
inline std::size_t largest_part(std::size_t count, int parts, std::size_t grain) {
  const std::size_t grains = (count + grain - 1) / grain, k = static_cast<std::size_t>(parts > 0 ? parts : 1);
  std::size_t largest = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t first = std::min(count, grains * i / k * grain);
    const std::size_t last = std::min(count, grains * (i + 1) / k * grain);
    largest = std::max(largest, last - first);
  }
  return largest;
}

template <class C>
using collective_probe = decltype(C::kName, static_cast<typename C::backend*>(nullptr));
template <class C>
inline constexpr bool is_collective = is_detected<collective_probe, C>;

// True for collectives whose replicas live in several processes (MpiAllReduce).
template <class C, class = void>
struct spans_processes : std::false_type {};
template <class C>
struct spans_processes<C, std::enable_if_t<C::kSpansProcesses>> : std::true_type {};

// The members of the contract, as detection probes.
template <class G>
using group_from_devices = decltype(G(std::declval<const std::vector<int>&>()));
template <class G>
using group_size = decltype(std::declval<const G&>().size());
template <class G, class Q>
using group_all_reduce =
    decltype(std::declval<G&>().all_reduce(0, std::declval<float*>(), std::size_t{}, std::declval<Q>()));
template <class G, class Q>
using group_reduce_to_root =
    decltype(std::declval<G&>().reduce_to_root(0, std::declval<float*>(), std::size_t{}, std::declval<Q>()));
template <class G, class Q>
using group_copy_from_root =
    decltype(std::declval<G&>().copy_from_root(0, std::declval<float*>(), std::size_t{}, std::declval<Q>()));
template <class G>
using group_abort = decltype(std::declval<G&>().abort());
template <class G>
using group_processes =
    decltype(std::declval<G&>().process_rank(), std::declval<G&>().process_count(),
             std::declval<G&>().processes_on_this_node(), std::declval<G&>().broadcast_from_root(nullptr, 0),
             std::declval<G&>().sum_across_processes(static_cast<double*>(nullptr), 0),
             std::declval<G&>().check_same_across_processes(nullptr, nullptr, 0),
             std::declval<G&>().end_job_after_failure(""));
template <class G>
using group_release = decltype(std::declval<G&>().release_after_failure());
template <class G>
using group_shard = decltype(std::declval<const G&>().shard(0, std::size_t{}));

// Checks a Group against the contract for queue type Q; each missing member
// gets its own sentence. Used as static_assert(check_group<G, Q>()).
template <class G, class Q>
constexpr bool check_group() {
  static_assert(is_detected<group_from_devices, G>,
                "A collective's Group must be constructible from const std::vector<int>& devices (replica r on "
                "devices[r]; on the host the entries only count the replicas).");
  static_assert(is_detected<group_size, G>, "A collective's Group needs int size() const: its replicas in this process.");
  static_assert(is_detected<group_all_reduce, G, Q>,
                "A collective's Group needs all_reduce(int replica, float* data, std::size_t count, Queue queue), "
                "Queue being the backend's queue (host::Queue on the host, cudaStream_t on CUDA): see "
                "collective/collective.hpp.");
  static_assert(is_detected<group_abort, G>,
                "A collective's Group needs abort(): it releases replicas waiting in the group after one failed.");
  static_assert(is_detected<group_processes, G>,
                "A collective's Group needs the process-level members (process_rank, process_count, "
                "processes_on_this_node, broadcast_from_root, sum_across_processes, check_same_across_processes, "
                "end_job_after_failure): derive it from lockstep::detail::SingleProcess when all its replicas are in "
                "one process.");
  return true;
}

// Optional capabilities, false where a Group does not declare them.
template <class G, class = void>
struct capturable : std::false_type {};
template <class G>
struct capturable<G, std::enable_if_t<G::kCapturable>> : std::true_type {};
template <class G, class = void>
struct capturable_alone : std::false_type {};
template <class G>
struct capturable_alone<G, std::enable_if_t<G::kCapturableAlone>> : std::true_type {};
template <class G, class = void>
struct partial : std::false_type {};
template <class G>
struct partial<G, std::enable_if_t<G::kPartial>> : std::true_type {};
template <class G, class = void>
struct shared_devices : std::false_type {};
template <class G>
struct shared_devices<G, std::enable_if_t<G::kSharedDevices>> : std::true_type {};

template <class G>
using group_set_timeout = decltype(std::declval<G&>().set_timeout(1.0));
template <class G>
using group_set_step = decltype(std::declval<G&>().set_step(std::int64_t{}));

// The options into a group that takes them (a group without waits of its own ignores them).
template <class G>
void configure_group(G& group, const CommunicationOptions& options) {
  if constexpr (is_detected<group_set_timeout, G>) group.set_timeout(options.timeout_seconds);
}
// The step under way, for a timeout's message; -1 once it is over.
template <class G>
void set_group_step(G& group, std::int64_t step) {
  if constexpr (is_detected<group_set_step, G>) group.set_step(step);
}

template <class G>
using group_replica_order = decltype(std::declval<G&>().sum_in_replica_order());
// The deterministic mode's sums, in global replica (unit) order: asked of a
// group that has the call; any other must keep every replica in this process.
template <class G>
void in_unit_order(G& group) {
  if constexpr (is_detected<group_replica_order, G>)
    group.sum_in_replica_order();
  else
    require(group.process_count() == 1, "Deterministic: this collective sums across its ", group.process_count(),
            " processes in an order that depends on the process count, so it cannot give the deterministic mode's "
            "bits; use MultiWorkerMirroredPolicy<MpiAllReduce> across processes");
}

// group.release_after_failure() where the group has device work to drop.
template <class G>
void release_after_failure(G& group) {
  if constexpr (is_detected<group_release, G>) group.release_after_failure();
}
}  // namespace detail

}  // namespace lockstep
