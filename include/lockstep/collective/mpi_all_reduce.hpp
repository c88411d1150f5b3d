// MpiAllReduce: host replicas in several processes. Hierarchical: the local
// replicas are first combined in shared memory (HostAllReduce), then one
// reduce-scatter + all-gather over MPI per process (each chunk is reduced by
// one rank, so every rank receives the same bits), then shared back.
// MPI is called from replica 0 only, the thread that called fit, so
// MPI_THREAD_FUNNELED is enough. Needs <mpi.h>: link lockstep::mpi.
// Every MPI call is non-blocking and polled against a deadline
// (CommunicationOptions::timeout_seconds): a stopped or unreachable rank
// ends the job with a message naming the rank waited for, instead of a hang.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/backend/host/queue.hpp"
#include "lockstep/collective/collective.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {

// Initialises MPI on first use (unless the program did) and finalises it at
// exit if lockstep initialised it.
class MpiSession {
 public:
  static MpiSession& get() {
    static MpiSession session;
    return session;
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Finalize();
  }

 private:
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        fail("MPI_Init_thread failed: start the program with mpirun or srun");
      owned_ = true;
      require(provided >= MPI_THREAD_FUNNELED, "MPI gives thread level ", provided,
              ", lockstep needs MPI_THREAD_FUNNELED (", MPI_THREAD_FUNNELED, ") for its replica threads");
    }
  }
  bool owned_ = false;
};

inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(call, " failed: ", std::string(text, static_cast<std::size_t>(length)));
}

// The process-level side of a multi-process collective: a duplicate of
// MPI_COMM_WORLD whose errors come back as lockstep::Error, this process's
// rank, the job's size, and the broadcasts, sums and checks the trainer makes
// across processes. MpiAllReduce and NcclAllReduce's multi-worker group both
// build on it.
class MpiProcesses {
 public:
  MpiProcesses() {
    MpiSession::get();
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    // Errors come back as codes, which become lockstep::Error with MPI's text.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node = MPI_COMM_NULL;  // the processes that share this machine
    mpi_check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    MPI_Comm_size(node, &node_size_);
    MPI_Comm_rank(node, &node_rank_);
    MPI_Comm_free(&node);
  }
  MpiProcesses(const MpiProcesses&) = delete;
  MpiProcesses& operator=(const MpiProcesses&) = delete;
  ~MpiProcesses() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int process_rank() const { return rank_; }
  int process_count() const { return size_; }
  int processes_on_this_node() const { return node_size_; }
  // This process's index among those on its machine (its GPUs are chosen by it).
  int rank_on_this_node() const { return node_rank_; }

  // A replica of this process failed mid-step while the other ranks wait in
  // the collective: they cannot be released one by one, so the job ends
  // here, non-zero, naming this rank (tf.distribute fails the job too).
  [[noreturn]] void end_job_after_failure(const char* what) {
    std::fprintf(stderr, "lockstep: rank %d of %d failed: %s\nlockstep: aborting the job\n", rank_, size_, what);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::abort();
  }

  // How long a rank waits for the others in any MPI call, and the step under
  // way (-1: none) for the message of one that timed out.
  void set_timeout(double seconds) {
    timeout_ = checked(CommunicationOptions{seconds}, "MPI collective").timeout_seconds;
  }
  void set_step(std::int64_t step) { step_ = step; }

  // Main thread only, every process: rank 0's bytes everywhere.
  void broadcast_from_root(void* data, std::size_t bytes) {
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm_, &request), "MPI_Ibcast");
    collective_wait(request, "MPI_Ibcast", bytes);
  }
  void sum_across_processes(double* values, std::size_t count) {
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, comm_, &request),
              "MPI_Iallreduce");
    collective_wait(request, "MPI_Iallreduce", count * sizeof(double));
  }
  // Every process's `count` doubles in rank order into `all` (count x P),
  // on every process: evaluation's per-replica sums (train/executor.hpp).
  void gather_across_processes(const double* mine, std::size_t count, double* all) {
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(mine, static_cast<int>(count), MPI_DOUBLE, all, static_cast<int>(count), MPI_DOUBLE,
                             comm_, &request),
              "MPI_Iallgather");
    collective_wait(request, "MPI_Iallgather (evaluation's sums)", count * sizeof(double));
  }
  // Every process's bytes in rank order into `all` on every process, and
  // each one's count in sizes[rank]: the deterministic row-order scheme's
  // rows (train/row_order.hpp). Main thread, every rank.
  void all_gather_bytes(const std::vector<char>& mine, std::vector<char>& all, std::vector<int>& sizes) {
    require(mine.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "MpiAllReduce: ", mine.size(),
            " bytes of rows to exchange, expected at most ", std::numeric_limits<int>::max(),
            "; use a smaller batch size");
    const int length = static_cast<int>(mine.size());
    sizes.assign(static_cast<std::size_t>(size_), 0);
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(&length, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_, &request), "MPI_Iallgather");
    collective_wait(request, "MPI_Iallgather (the row-order mode's row counts)", sizeof(int));
    std::vector<int> displs(sizes.size());
    std::size_t total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      displs[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(sizes[r]);
      require(total <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "MpiAllReduce: ", total,
              " bytes of rows gathered, expected at most ", std::numeric_limits<int>::max(),
              "; use a smaller batch size");
    }
    all.resize(total);
    mpi_check(MPI_Iallgatherv(mine.data(), length, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, comm_,
                              &request),
              "MPI_Iallgatherv");
    collective_wait(request, "MPI_Iallgatherv (the row-order mode's rows)", total);
  }
  // Every process's text on rank 0, in rank order (other ranks get none):
  // the placement log's replica lines. Every rank must call it.
  std::vector<std::string> gather_to_root(const std::string& text) {
    const int length = static_cast<int>(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_, &request), "MPI_Igather");
    collective_wait(request, "MPI_Igather (the placement log's lengths)", sizeof(int));
    std::size_t total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      displs[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(lengths[r]);
    }
    std::vector<char> all(rank_ == 0 ? total + 1 : 1);
    mpi_check(MPI_Igatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, 0,
                           comm_, &request),
              "MPI_Igatherv");
    collective_wait(request, "MPI_Igatherv (the placement log)", text.size());
    std::vector<std::string> out;
    if (rank_ != 0) return out;
    for (std::size_t r = 0; r < lengths.size(); ++r)
      out.emplace_back(all.data() + displs[r], static_cast<std::size_t>(lengths[r]));
    return out;
  }
  // Every rank must pass the same values; otherwise every rank throws an
  // Error naming what differs and each rank's value, so none is left waiting.
  void check_same_across_processes(const char* const* names, const std::uint64_t* values, std::size_t count) {
    std::vector<std::uint64_t> all(count * static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(values, static_cast<int>(count), MPI_UINT64_T, all.data(), static_cast<int>(count),
                             MPI_UINT64_T, comm_, &request),
              "MPI_Iallgather");
    collective_wait(request, "MPI_Iallgather (the check that every rank runs the same layout)",
                    count * sizeof(std::uint64_t));
    std::ostringstream differ;
    for (std::size_t i = 0; i < count; ++i) {
      bool same = true;
      for (int r = 1; r < size_; ++r) same = same && all[static_cast<std::size_t>(r) * count + i] == all[i];
      if (same) continue;
      differ << "\n  " << names[i] << ":";
      for (int r = 0; r < size_; ++r) differ << " rank " << r << " has " << all[static_cast<std::size_t>(r) * count + i] << ';';
    }
    if (!differ.str().empty())
      fail("MultiWorkerMirroredPolicy: the processes of this job disagree; every rank must run the same model, "
           "global batch and replica layout:", differ.str());
  }

 protected:
  using Clock = std::chrono::steady_clock;

  // Polls `count` requests until all are done or `deadline` passes; returns
  // whether they all completed (those done are MPI_REQUEST_NULL, the others
  // left as they are). A fast partner is met by spinning; a wait that lasts
  // yields, then naps 100 us at a time, so a rank waiting for a stopped peer
  // does not burn a core. The clock is read every 64 polls.
  bool poll(MPI_Request* requests, int count, Clock::time_point deadline) {
    Clock::time_point start{};
    bool nap = false;
    for (std::uint32_t polls = 0;; ++polls) {
      bool done = true;
      for (int i = 0; i < count; ++i) {
        if (requests[i] == MPI_REQUEST_NULL) continue;
        int flag = 0;
        mpi_check(MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE), "MPI_Test");
        done = done && flag != 0;
      }
      if (done) return true;
      if (polls < 1024) continue;
      if (polls % 64 == 0) {
        const Clock::time_point now = Clock::now();
        if (polls == 1024) start = now;
        if (now >= deadline) return false;
        nap = now - start > std::chrono::milliseconds(10);
      }
      if (nap)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      else
        std::this_thread::yield();
    }
  }
  // The deadline of a call starting now.
  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }

  // Where this rank was (collective.hpp's step_text), or what runs outside a step.
  std::string step_text() const {
    return detail::step_text(step_, " outside a training step (the start of fit, evaluation or the placement log)");
  }
  // "rank 1" / "ranks 1, 2": every rank but this one.
  std::string other_ranks() const {
    std::string out = size_ == 2 ? "rank " : "ranks ";
    bool first = true;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      out += concat(first ? "" : ", ", r);
      first = false;
    }
    return out;
  }

  // A process-level collective's wait. On timeout the request cannot be
  // taken back and the communicator is unusable, so the job ends here, as
  // after a failure in a step (end_job_after_failure), naming the call.
  void collective_wait(MPI_Request& request, const char* call, std::size_t bytes) {
    if (poll(&request, 1, deadline())) return;
    const std::string message = concat(
        "lockstep: ", call, " of ", bytes, " bytes", step_text(), " did not complete within ", timeout_,
        " s on rank ", rank_, " of ", size_, ": waiting for ", other_ranks(),
        size_ > 2 ? " (MPI does not say which of them has not taken part)" : "",
        " (stopped, hung or unreachable). The job ends; if a rank really takes this long, raise "
        "CommunicationOptions::timeout_seconds (strategy.set_communication)");
    end_job_after_failure(message.c_str());
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, node_size_ = 1, node_rank_ = 0;
  double timeout_ = CommunicationOptions{}.timeout_seconds;
  std::int64_t step_ = -1;
};

}  // namespace detail

struct MpiAllReduce {
  using backend = Host;
  static constexpr const char* kName = "MpiAllReduce";
  static constexpr bool kSpansProcesses = true;

  // The placement log's words for a `count`-float buffer (Group::all_reduce).
  static std::string describe(std::size_t count, int local_replicas, int processes,
                              CollectiveCall = CollectiveCall::kAllReduce) {
    std::string out = local_replicas > 1
                          ? "HostAllReduce over the " + std::to_string(local_replicas) + " replicas of each process, then "
                          : std::string();
    if (processes <= 1) return out + "no other process to combine with";
    out += detail::concat("a ring over ", processes, " processes (MPI_Isend/MPI_Irecv from replica 0's thread): reduce-scatter "
                          "in ", processes, " chunks of up to ", detail::largest_part(count, processes, 1),
                          " floats, then all-gather, ", 2 * (processes - 1), " steps");
    if (local_replicas > 1) out += ", then the sum copied to the other local replicas";
    return out;
  }

  // The same in the deterministic mode (Group::sum_in_replica_order).
  static std::string describe_in_replica_order(std::size_t count, int local_replicas, int processes) {
    return detail::concat("the deterministic mode's sum in replica order over ", processes, " processes x ",
                          local_replicas, " replicas (MPI_Ialltoallv from replica 0's thread): rank k receives chunk k "
                          "(up to ", detail::largest_part(count, processes, 1), " floats) of every replica's buffer "
                          "and adds them left to right in global replica order, then MPI_Iallgatherv of the sums");
  }

  class Group : public detail::MpiProcesses {
   public:
    explicit Group(int local_replicas)
        : local_(local_replicas),
          barrier_(std::max(local_replicas, 1)),
          buffers_(static_cast<std::size_t>(std::max(local_replicas, 1))) {
      local_.set_label(detail::concat("MpiAllReduce (its HostAllReduce over the ", local_replicas,
                                      " replicas of rank ", rank_, " of ", size_, ")"));
      set_timeout(timeout_);
    }
    explicit Group(const std::vector<int>& devices) : Group(static_cast<int>(devices.size())) {}

    int size() const { return local_.size() * size_; }

    // One timeout for the local replicas' barriers and every MPI call. The
    // local replicas wait for replica 0's exchange with the other ranks for
    // twice as long: that exchange has its own deadline, and ends the job
    // with the better message (which rank it waited for).
    void set_timeout(double seconds) {
      detail::MpiProcesses::set_timeout(seconds);
      local_.set_timeout(seconds);
      barrier_.set_timeout(2 * seconds);
    }
    void set_step(std::int64_t step) {
      detail::MpiProcesses::set_step(step);
      local_.set_step(step);
    }

    // The deterministic mode: every value summed left to right over the
    // job's replicas in global order, as HostAllReduce sums the replicas of
    // one process, so that P processes x R replicas give the bits of one
    // process of P x R (exchange_in_replica_order).
    void sum_in_replica_order() { replica_order_ = true; }

    void all_reduce(int replica, float* data, std::size_t count, ReduceOp op = ReduceOp::kSum) {
      if (replica_order_ && size_ > 1) {
        buffers_[static_cast<std::size_t>(replica)] = data;
        wait_for_exchange(replica, count);
        if (replica == 0) exchange_in_replica_order(count);
        wait_for_exchange(replica, count);
        if (replica != 0) std::memcpy(data, buffers_[0], count * sizeof(float));
        wait_for_exchange(replica, count);
      } else {
        all_reduce_by_ring(replica, data, count);
      }
      if (op == ReduceOp::kMean) {
        const float scale = 1.0f / static_cast<float>(size());
        for (std::size_t i = 0; i < count; ++i) data[i] *= scale;
      }
    }

    void all_reduce(int replica, float* data, std::size_t count, host::Queue) {
      all_reduce(replica, data, count, ReduceOp::kSum);
    }

    void abort() {
      local_.abort();
      barrier_.abort();
    }

   private:
    void all_reduce_by_ring(int replica, float* data, std::size_t count) {
      local_.all_reduce(replica, data, count, ReduceOp::kSum);
      if (size_ > 1) {
        if (replica == 0) {
          across_processes(data, count);
          root_buffer_ = data;
        }
        wait_for_exchange(replica, count);
        if (replica != 0) std::memcpy(data, root_buffer_, count * sizeof(float));
        wait_for_exchange(replica, count);
      }
    }

    void wait_for_exchange(int replica, std::size_t count) {
      barrier_.wait(replica, [&](const host::Stall& stall) {
        return detail::concat("MpiAllReduce: all_reduce of ", count * sizeof(float), " bytes", step_text(),
                              " on rank ", rank_, " of ", size_, ": the local replicas waited for replica 0's "
                              "exchange with the other ranks and timed out: ", stall.text(), ". ",
                              detail::kAfterTimeout);
      });
    }

    // One ring step: send `send_count` floats to the right, receive
    // `recv_count` from the left, non-blocking, polled until `deadline`. On
    // timeout an Error (the job then ends: end_job_after_failure) says which
    // side had not completed: a rank in a ring sees only its neighbours, so
    // the rank at fault may be further round.
    void ring_step(const float* send, int send_count, float* recv, int recv_count, int tag, const char* phase,
                   int step, std::size_t bytes, Clock::time_point deadline) {
      const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
      MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      detail::mpi_check(MPI_Irecv(recv, recv_count, MPI_FLOAT, left, tag, comm_, &requests[0]), "MPI_Irecv");
      detail::mpi_check(MPI_Isend(send, send_count, MPI_FLOAT, right, tag, comm_, &requests[1]), "MPI_Isend");
      if (poll(requests, 2, deadline)) return;
      std::string waiting;
      const bool unsent = requests[0] != MPI_REQUEST_NULL, untaken = requests[1] != MPI_REQUEST_NULL;
      if (unsent && untaken && left == right)  // two ranks: the one neighbour on both sides
        waiting = detail::concat("rank ", left, ", which has neither sent its chunk nor taken this rank's");
      else if (unsent)
        waiting = detail::concat("rank ", left, ", its left neighbour in the ring, which has not sent its chunk");
      if (untaken && left != right)
        waiting += detail::concat(waiting.empty() ? "" : ", and for ", "rank ", right,
                                  ", its right neighbour, which has not taken this rank's chunk");
      else if (untaken && !unsent)
        waiting = detail::concat("rank ", right, ", which has not taken this rank's chunk");
      fail("MpiAllReduce: the ring all-reduce of ", bytes, " bytes", step_text(), " did not finish within ", timeout_,
           " s on rank ", rank_, " of ", size_, " (", phase, " step ", step + 1, " of ", size_ - 1, "): waiting for ",
           waiting, " (stopped, hung or unreachable; a rank sees only its neighbours in the ring, so the rank at "
           "fault may be further round). The job ends: a timed-out MPI call cannot be taken back. If a rank really "
           "takes this long, raise CommunicationOptions::timeout_seconds (strategy.set_communication)");
    }

    // A ring reduce-scatter, then a ring all-gather, with MPI_Isend/MPI_Irecv to the
    // next rank: in P-1 steps each rank adds the chunk its left neighbour
    // sends to its own copy, so chunk k is summed along the ring (in an order
    // fixed by the ranks alone) and ends complete on rank k; P-1 more steps
    // pass the complete chunks round. Every rank then holds the bits rank k
    // computed for chunk k. Measured between 2 processes on one machine for
    // the 814 KB gradient: 230 us, against 318 us for MPI_Reduce_scatter +
    // MPI_Allgatherv and 212 us for MPI_Allreduce (whose ranks need not agree
    // to the bit); 577 against 753 and 848 us for 3 processes on 2 cores.
    void across_processes(float* data, std::size_t count) {
      split(count);
      if (count == 0) return;
      const Clock::time_point until = deadline();  // one deadline for the whole exchange
      const std::size_t bytes = count * sizeof(float);
      const auto chunk = [&](int step_back) {  // the chunk `step_back` ranks to the left of this one
        return static_cast<std::size_t>(((rank_ - step_back) % size_ + size_) % size_);
      };
      for (int step = 0; step < size_ - 1; ++step) {  // reduce-scatter: send chunk rank-1-step, add chunk rank-2-step
        const std::size_t out = chunk(1 + step), in = chunk(2 + step);
        ring_step(data + displs_[out], counts_[out], incoming_.data(), counts_[in], kReduceTag, "reduce-scatter", step,
                  bytes, until);
        float* const sum = data + displs_[in];
        const float* const add = incoming_.data();
        const std::size_t n = static_cast<std::size_t>(counts_[in]);
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t i = 0; i < n; ++i) sum[i] += add[i];
      }
      for (int step = 0; step < size_ - 1; ++step) {  // all-gather: pass complete chunks to the right
        const std::size_t out = chunk(step), in = chunk(1 + step);
        ring_step(data + displs_[out], counts_[out], data + displs_[in], counts_[in], kGatherTag, "all-gather", step,
                  bytes, until);
      }
    }

    // counts_/displs_: rank r's chunk of a `count`-float buffer, P chunks.
    void split(std::size_t count) {
      if (counts_.size() == static_cast<std::size_t>(size_) && cached_count_ == count) return;
      require(count <= static_cast<std::size_t>(std::numeric_limits<int>::max()) / static_cast<std::size_t>(size()),
              "MpiAllReduce: a buffer of ", count, " floats over ", size(), " replicas, expected at most ",
              std::numeric_limits<int>::max() / size(), " (MPI counts are int)");
      counts_.assign(static_cast<std::size_t>(size_), 0);
      displs_.assign(static_cast<std::size_t>(size_), 0);
      for (int r = 0; r < size_; ++r) {
        const std::size_t first = count * static_cast<std::size_t>(r) / static_cast<std::size_t>(size_);
        const std::size_t last = count * static_cast<std::size_t>(r + 1) / static_cast<std::size_t>(size_);
        counts_[static_cast<std::size_t>(r)] = static_cast<int>(last - first);
        displs_[static_cast<std::size_t>(r)] = static_cast<int>(first);
      }
      cached_count_ = count;
      incoming_.assign(static_cast<std::size_t>(*std::max_element(counts_.begin(), counts_.end())), 0.0f);
    }

    // The deterministic mode's sum, from replica 0's thread once every local
    // buffer is in buffers_: rank k receives chunk k of every replica's
    // buffer (MPI_Ialltoallv; replica r of rank p is the job's replica
    // p * R + r, so the rows arrive in global order), sums them left to
    // right as HostAllReduce::reduce_chunk does, and the summed chunks go to
    // every rank (MPI_Iallgatherv) in local replica 0's buffer. It moves R
    // times the bytes of the ring: the price of one summation order for
    // every process count.
    void exchange_in_replica_order(std::size_t count) {
      split(count);
      if (count == 0) return;
      const std::size_t local = static_cast<std::size_t>(local_.size()), ranks = static_cast<std::size_t>(size_);
      const std::size_t mine = static_cast<std::size_t>(counts_[static_cast<std::size_t>(rank_)]);
      outgoing_.resize(local * count);
      gathered_.resize(local * ranks * mine);
      send_counts_.assign(ranks, 0);
      send_displs_.assign(ranks, 0);
      recv_counts_.assign(ranks, static_cast<int>(local * mine));
      recv_displs_.assign(ranks, 0);
      for (std::size_t q = 0; q < ranks; ++q) {
        const std::size_t n = static_cast<std::size_t>(counts_[q]), at = local * static_cast<std::size_t>(displs_[q]);
        send_counts_[q] = static_cast<int>(local * n);
        send_displs_[q] = static_cast<int>(at);
        recv_displs_[q] = static_cast<int>(q * local * mine);
        for (std::size_t r = 0; r < local; ++r)
          std::memcpy(outgoing_.data() + at + r * n, buffers_[r] + displs_[q], n * sizeof(float));
      }
      MPI_Request request = MPI_REQUEST_NULL;
      detail::mpi_check(MPI_Ialltoallv(outgoing_.data(), send_counts_.data(), send_displs_.data(), MPI_FLOAT,
                                       gathered_.data(), recv_counts_.data(), recv_displs_.data(), MPI_FLOAT, comm_,
                                       &request),
                        "MPI_Ialltoallv");
      collective_wait(request, "MPI_Ialltoallv (the deterministic mode's sum in replica order)",
                      local * count * sizeof(float));
      float* const sum = buffers_[0] + displs_[static_cast<std::size_t>(rank_)];
      const std::size_t rows = local * ranks;
      const float* const first = gathered_.data();
      const float* const second = rows > 1 ? first + mine : nullptr;
      if (rows == 1) {
        std::memcpy(sum, first, mine * sizeof(float));
      } else {
        LOCKSTEP_INDEPENDENT_ITERATIONS
        for (std::size_t i = 0; i < mine; ++i) sum[i] = first[i] + second[i];
        for (std::size_t row = 2; row < rows; ++row) {
          const float* LOCKSTEP_RESTRICT add = first + row * mine;
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t i = 0; i < mine; ++i) sum[i] += add[i];
        }
      }
      detail::mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buffers_[0], counts_.data(), displs_.data(),
                                        MPI_FLOAT, comm_, &request),
                        "MPI_Iallgatherv");
      collective_wait(request, "MPI_Iallgatherv (the deterministic mode's sum in replica order)",
                      count * sizeof(float));
    }

    static constexpr int kReduceTag = 17, kGatherTag = 18;

    HostAllReduce::Group local_;
    host::SpinBarrier barrier_;
    float* root_buffer_ = nullptr;  // local replica 0's buffer, holding the job-wide result
    std::vector<int> counts_, displs_;
    std::size_t cached_count_ = 0;
    std::vector<float> incoming_;  // the chunk received in a reduce-scatter step
    // The deterministic mode's exchange (exchange_in_replica_order).
    bool replica_order_ = false;
    std::vector<float*> buffers_;  // each local replica's buffer of the call under way
    std::vector<float> outgoing_, gathered_;
    std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
  };
};

}  // namespace lockstep
