// The device placement log, TensorFlow's tf.debugging.set_log_device_placement:
// a process-wide switch, lockstep::log_device_placement(true), and the records
// and lines a Trainer prints once at the start of fit, on process rank 0 for
// the whole job: which strategy runs, where its variables and optimizer state
// live, how the collective combines the gradient buffer, and one line per
// replica of every process naming its TensorFlow device and what runs it (a
// thread and its core, or a GPU). Only data and formatting live here; the
// Trainer fills the records from its strategy, collective and executor
// (train/placement_log.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {
// Constant-initialised, so reading the switch is one atomic load (no guard of
// a function-local static): fit pays nothing else when the log is off.
inline std::atomic<bool> placement_log_on{false};
inline std::atomic<std::ostream*> placement_log_sink{nullptr};
}  // namespace detail

// Turns the placement log on or off for every Trainer of this process from
// the next fit on. `to` is where rank 0 writes it (std::cerr when null, as
// TensorFlow logs to stderr). Under mpirun every process must set the same
// value: the trainer checks that at start-up, as the gathering of the
// replicas' lines needs every rank.
inline void log_device_placement(bool on, std::ostream* to = nullptr) {
  lockstep::detail::placement_log_sink.store(to, std::memory_order_relaxed);
  detail::placement_log_on.store(on, std::memory_order_release);
}
inline bool logging_device_placement() { return detail::placement_log_on.load(std::memory_order_acquire); }

namespace observe {

// Where one replica runs. Host replicas fill the thread fields; GPU
// replicas the GPU fields too (their thread is the host thread driving the GPU).
struct ReplicaPlacement {
  int process = 0;                  // the process rank: TensorFlow's task
  int replica = 0;                  // the replica's index in its process
  std::string host;                 // the machine's host name
  bool gpu = false;                 // device:GPU (else device:CPU)
  int device_index = 0;             // CPU: the local replica index; GPU: the CUDA device index
  long long thread = 0;             // the OS thread id (Linux: the tid `top -H` shows); 0 if unknown
  int core = -1;                    // the core the thread ran on when asked (sched_getcpu); -1 if unknown
  int allowed_cores = 0;            // cores in the thread's affinity mask: 1 means pinned; 0 if unknown
  std::string gpu_name;             // "NVIDIA H200"
  std::string compute_capability;   // "9.0"
  std::string pci_bus_id;           // "0000:19:00.0"
  std::size_t memory_bytes = 0;     // the GPU's global memory
};

// Where a job keeps its state and how it combines gradients; every field in words
// the strategy's rule and the collective chose (train/placement_log.hpp).
struct JobPlacement {
  std::string strategy;          // "MirroredPolicy<HostAllReduce>"
  int replicas = 1;              // per process
  int processes = 1;
  std::string variables;         // "mirrored on every replica"
  std::string optimizer_state;   // "mirrored on every replica"
  std::size_t parameters = 0;    // floats of the gradient buffer that are gradients
  std::size_t statistics = 0;    // the step's loss and metric sums riding after them
  std::string collective;        // "HostAllReduce"
  std::string combined;          // "all-reduced", "reduced onto replica 0", ...; "" for one replica
  std::string algorithm;         // the collective's describe() of this buffer
  std::vector<std::string> replica_lines;  // replica_line() of every replica of every process, rank order
};

// The machine's host name ("" if unknown).
inline std::string host_name() {
#if defined(__unix__) || defined(__APPLE__)
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) return name;
#endif
  return "";
}

// The calling thread's placement as a host replica: its thread id, the core it
// is on now and how many cores its affinity mask allows. lockstep's replica
// pool does not pin threads, so a thread is pinned only where the launcher or
// the user bound it (mpirun --bind-to core, taskset); replicas of one process
// then share the process's mask, which the log shows.
inline ReplicaPlacement this_thread_placement(int process, int replica, const std::string& host) {
  ReplicaPlacement p;
  p.process = process;
  p.replica = replica;
  p.host = host;
  p.device_index = replica;
#if defined(__linux__)
  p.thread = static_cast<long long>(syscall(SYS_gettid));
  p.core = sched_getcpu();
  cpu_set_t mask{};
  // Fails (and the count stays unknown) only on machines of more than 1024 CPUs.
  if (pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0) p.allowed_cores = CPU_COUNT(&mask);
#endif
  return p;
}

// TensorFlow's name of the replica's device: /job:worker/replica:0/task:P/device:CPU:R.
inline std::string device_name(const ReplicaPlacement& p) {
  return ::lockstep::detail::concat("/job:worker/replica:0/task:", p.process, "/device:", p.gpu ? "GPU:" : "CPU:",
                        p.device_index);
}

// "139.8 GiB"
inline std::string gibibytes(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// One replica's line, e.g.
//   /job:worker/replica:0/task:0/device:CPU:1 -> thread 12346 on host "node1", core 1 (pinned: no, 2 cores allowed)
//   /job:worker/replica:0/task:0/device:GPU:0 -> NVIDIA H200 (compute 9.0, 139.8 GiB, PCI 0000:19:00.0)
//       on host "node1", driven by thread 12345
inline std::string replica_line(const ReplicaPlacement& p) {
  std::string line = device_name(p) + " -> ";
  const std::string thread = p.thread ? ::lockstep::detail::concat("thread ", p.thread) : std::string("thread unknown");
  const std::string host = ::lockstep::detail::concat("host \"", p.host.empty() ? "unknown" : p.host, "\"");
  if (p.gpu) {
    line += ::lockstep::detail::concat(p.gpu_name, " (compute ", p.compute_capability, ", ", gibibytes(p.memory_bytes));
    if (!p.pci_bus_id.empty()) line += ", PCI " + p.pci_bus_id;
    return line + ") on " + host + ", driven by " + thread;
  }
  line += thread + " on " + host + ", ";
  line += p.core >= 0 ? ::lockstep::detail::concat("core ", p.core) : std::string("core unknown");
  if (p.allowed_cores == 1) return line + " (pinned: yes)";
  if (p.allowed_cores > 1) return line + ::lockstep::detail::concat(" (pinned: no, ", p.allowed_cores, " cores allowed)");
  return line + " (pinned: unknown)";
}

// The log's lines, each starting "placement: ": the strategy and where its
// state lives, the gradient buffer and its collective, then every replica.
inline std::vector<std::string> placement_lines(const JobPlacement& job) {
  const int total = job.replicas * job.processes;
  std::string layout = ::lockstep::detail::concat(total, total == 1 ? " replica" : " replicas", " in ", job.processes,
                                      job.processes == 1 ? " process" : " processes");
  if (job.processes > 1) layout += ::lockstep::detail::concat(" (", job.replicas, " each)");
  std::vector<std::string> lines;
  lines.push_back(::lockstep::detail::concat("placement: strategy ", job.strategy, ", ", layout, "; variables ", job.variables,
                                 ", optimizer state ", job.optimizer_state));
  const std::string buffer =
      ::lockstep::detail::concat("placement: gradients ", job.parameters, " floats (", job.parameters * sizeof(float), " bytes) + ",
                     job.statistics, job.statistics == 1 ? " statistic" : " statistics");
  // One replica: the collective has nothing to do (an empty `combined`).
  lines.push_back(job.combined.empty()
                      ? ::lockstep::detail::concat(buffer, ", used as computed: 1 replica, nothing for ", job.collective,
                                       " to combine")
                      : ::lockstep::detail::concat(buffer, ", ", job.combined, " by ", job.collective, ": ", job.algorithm));
  for (const std::string& r : job.replica_lines) lines.push_back("placement: " + r);
  return lines;
}

// Writes the lines to the sink log_device_placement named (std::cerr by
// default), as one block so that other output does not interleave.
inline void write_placement(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + '\n';
  std::ostream* sink = ::lockstep::detail::placement_log_sink.load(std::memory_order_relaxed);
  std::ostream& out = sink ? *sink : std::cerr;
  out << text;
  out.flush();
}

}  // namespace observe
}  // namespace lockstep
