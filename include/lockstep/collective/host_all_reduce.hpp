// HostAllReduce: replicas are threads of one process, so the all-reduce works
// in shared memory, in one pass between two barriers. Replica r sums chunk r
// over every buffer, always in replica order (deterministic), and writes the
// sum into chunk r of every buffer: a reduce-scatter whose all-gather is
// folded in as a push. Each element is read N times and written N times in
// all, the bandwidth optimum, and no replica reads a sum back from another:
// on this machine's two cores that halves the time of a reduce-scatter
// followed by a copying all-gather (814 KB: 115 -> 57 us), because a line
// another core has just written costs as much to read as to fetch from L3.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/backend/host/queue.hpp"
#include "lockstep/backend/host/sum_of_two.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

struct HostAllReduce {
  using backend = Host;
  static constexpr const char* kName = "HostAllReduce";

  // The placement log's words for a `count`-float buffer (Group::shard's chunks).
  static std::string describe(std::size_t count, int replicas, int = 1, CollectiveCall call = CollectiveCall::kAllReduce) {
    if (replicas <= 1) return "nothing to combine with 1 replica";
    std::string out = detail::concat("reduce-scatter in shared memory over ", replicas, " replicas in ", replicas,
                                     " chunks of up to ", detail::largest_part(count, replicas, 16),
                                     " floats (whole 64-byte lines), each summed in replica order by one replica, ");
    switch (call) {
      case CollectiveCall::kAllReduce:
        return out + "then all-gather folded in: that replica writes the sum into every buffer; 2 barriers";
      case CollectiveCall::kReduceToRoot:
        return out + "then written into replica 0's buffer only; 2 barriers";
      case CollectiveCall::kReduceUpdate:
        return out + "then the optimizer applied by that replica to its chunk of the shared variables, nothing "
                     "gathered; 2 barriers";
    }
    return out;
  }

  class Group : public detail::SingleProcess {
   public:
    explicit Group(int replicas)
        : replicas_(replicas),
          buffers_(static_cast<std::size_t>(std::max(replicas, 1))),
          barrier_(std::max(replicas, 1)) {
      require(replicas >= 1, "HostAllReduce: ", replicas, " replicas, expected at least 1");
    }
    // The collective contract's form: one replica per entry.
    explicit Group(const std::vector<int>& devices) : Group(static_cast<int>(devices.size())) {}

    int size() const { return replicas_; }

    // How long a replica waits for the others (CommunicationOptions), and
    // the step under way, for a timeout's message (-1: outside a step).
    void set_timeout(double seconds) { barrier_.set_timeout(seconds); }
    void set_step(std::int64_t step) { step_ = step; }
    // The name a timeout's message gives this group (MpiAllReduce's local part).
    void set_label(std::string label) { label_ = std::move(label); }

    // Called by every replica with a buffer of the same `count`.
    void all_reduce(int replica, float* data, std::size_t count, ReduceOp op = ReduceOp::kSum) {
      reduce(replica, data, count, op, true);
    }
    void all_reduce(int replica, float* data, std::size_t count, host::Queue) {
      reduce(replica, data, count, ReduceOp::kSum, true);
    }

    // The same, but only replica 0's buffer receives the result (the others
    // hold partial sums): CentralStoragePolicy's "send gradients to the
    // central device".
    void reduce_to_root(int replica, float* data, std::size_t count, ReduceOp op = ReduceOp::kSum) {
      reduce(replica, data, count, op, false);
    }
    void reduce_to_root(int replica, float* data, std::size_t count, host::Queue) {
      reduce(replica, data, count, ReduceOp::kSum, false);
    }

    // The all-reduce and the optimizer step together, for replicas that
    // compute with one shared parameter buffer (threads of one process need
    // no copies of it): `update(first, last, summed)` applies the optimizer
    // to the shared parameters [first, last) of the chunk this replica owns,
    // where summed[i] is the gradient of parameter i summed over the replicas
    // in replica order. That is ZeRO's sharded update with nothing to
    // gather: each replica does 1/N of the optimizer's work, and half the
    // bytes of all_reduce move. With two replicas, and an update callable
    // with a host::SumOfTwo, the optimizer reads both buffers and sums as it
    // goes; otherwise `summed` is a `const float*` to the sums, written into
    // this replica's own buffer first. On return every parameter is updated,
    // and entries of `grads` past `params_count` (the step's statistics)
    // hold their sum in replica 0's buffer, as after reduce_to_root.
    template <class Update>
    void reduce_update(int replica, float* grads, std::size_t count, std::size_t params_count, Update&& update) {
      if (replicas_ == 1) {
        update(std::size_t{0}, params_count, static_cast<const float*>(grads));
        return;
      }
      buffers_[static_cast<std::size_t>(replica)] = grads;
      wait(replica, "reduce_update", count, "arriving");
      const auto [first, last] = shard(replica, count);
      const std::size_t split = std::clamp(params_count, first, last);
      reduce_chunk(split, last, 1.0f, Deliver::kRoot, replica);
      if (first < split) update_chunk(replica, first, split, update);
      // Every shard is updated before any replica computes with the
      // parameters again, and every gradient chunk is read before its owner
      // writes the next step's gradients into it.
      wait(replica, "reduce_update", count, "updating its shard");
    }

    // The range [first, last) of a `count`-long buffer that `replica` reduces
    // (and, in reduce_update, updates): whole cache lines (16 floats), so two
    // replicas never write one line.
    std::pair<std::size_t, std::size_t> shard(int replica, std::size_t count) const {
      constexpr std::size_t kLine = 16;
      const std::size_t lines = (count + kLine - 1) / kLine;
      const std::size_t r = static_cast<std::size_t>(replica), n = static_cast<std::size_t>(replicas_);
      const std::size_t first = std::min(count, lines * r / n * kLine);
      const std::size_t last = std::min(count, lines * (r + 1) / n * kLine);
      return {first, last};
    }

    // Releases replicas waiting in all_reduce after one of them failed.
    void abort() { barrier_.abort(); }

   private:
    void reduce(int replica, float* data, std::size_t count, ReduceOp op, bool everywhere) {
      if (replicas_ == 1) return;  // the sum and the mean of one buffer are itself
      buffers_[static_cast<std::size_t>(replica)] = data;
      const char* const call = everywhere ? "all_reduce" : "reduce_to_root";
      wait(replica, call, count, "arriving");
      const auto [first, last] = shard(replica, count);
      const float scale = op == ReduceOp::kMean ? 1.0f / static_cast<float>(replicas_) : 1.0f;
      reduce_chunk(first, last, scale, everywhere ? Deliver::kEveryone : Deliver::kRoot, replica);
      // Every buffer is whole before any replica returns and writes its own again.
      wait(replica, call, count, "summing its chunk");
    }

    // barrier_.wait, whose timeout names the call, its bytes, the step and
    // the replicas that had not arrived (`phase`: what they had not finished).
    void wait(int replica, const char* call, std::size_t count, const char* phase) {
      barrier_.wait(replica, [&](const host::Stall& stall) {
        return detail::barrier_timeout(label_, call, count * sizeof(float), step_, phase, stall.text());
      });
    }

    // reduce_update's optimizer step on [first, last), this replica's chunk.
    template <class Update>
    void update_chunk(int replica, std::size_t first, std::size_t last, Update& update) const {
      if constexpr (std::is_invocable_v<Update&, std::size_t, std::size_t, host::SumOfTwo>) {
        if (replicas_ == 2) {
          update(first, last, host::SumOfTwo{buffers_[0], buffers_[1]});
          return;
        }
      }
      reduce_chunk(first, last, 1.0f, Deliver::kOwner, replica);
      update(first, last, static_cast<const float*>(buffers_[static_cast<std::size_t>(replica)]));
    }

    // Where a chunk's sum goes: every buffer (all_reduce), replica 0's
    // (reduce_to_root), or the buffer of the replica that summed it.
    enum class Deliver { kEveryone, kRoot, kOwner };

    // The sum over replicas of [first, last), in replica order, times scale,
    // written to the buffers `deliver` names. Each element of every source is
    // read before any destination's is written, and only replica `replica`
    // touches [first, last) of any buffer until the next barrier.
    void reduce_chunk(std::size_t first, std::size_t last, float scale, Deliver deliver, int replica) const {
      // The one destination of kRoot and kOwner is also a source, so no
      // pointer here is restrict: the loops say their iterations are independent.
      float* const target = deliver == Deliver::kOwner ? buffers_[static_cast<std::size_t>(replica)] : buffers_[0];
      float* const a = buffers_[0];
      float* const b = buffers_[1];
      if (buffers_.size() == 2) {  // the common case: one pass, nothing staged
        if (deliver == Deliver::kEveryone) {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t i = first; i < last; ++i) {
            const float sum = (a[i] + b[i]) * scale;
            a[i] = sum;
            b[i] = sum;
          }
        } else {
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t i = first; i < last; ++i) target[i] = (a[i] + b[i]) * scale;
        }
        return;
      }
      constexpr std::size_t kBlock = 1024;  // stay in L1 while summing N sources
      alignas(64) float acc[kBlock];
      for (std::size_t at = first; at < last; at += kBlock) {
        const std::size_t n = std::min(last - at, kBlock);
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t i = 0; i < n; ++i) acc[i] = (a[at + i] + b[at + i]);
        for (std::size_t s = 2; s < buffers_.size(); ++s) {
          const float* LOCKSTEP_RESTRICT src = buffers_[s] + at;
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t i = 0; i < n; ++i) acc[i] += src[i];
        }
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t i = 0; i < n; ++i) acc[i] *= scale;
        if (deliver == Deliver::kEveryone) {
          for (float* buffer : buffers_) std::memcpy(buffer + at, acc, n * sizeof(float));
        } else {
          std::memcpy(target + at, acc, n * sizeof(float));
        }
      }
    }

    int replicas_;
    std::vector<float*> buffers_;
    host::SpinBarrier barrier_;
    std::int64_t step_ = -1;
    std::string label_ = kName;
  };
};

}  // namespace lockstep
