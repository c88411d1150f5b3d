// Trains a small model with BackupAndRestore and can kill itself with
// SIGKILL (no unwinding, no on_train_end, as when a machine dies) at a
// chosen point; tests/resume/check_resume.cmake runs it killed, reruns it
// to the end, and compares the weights with an unbroken run's, byte for byte.
//   resume_run STRATEGY BACKUP_DIR WEIGHTS_OUT SAVE_FREQ [KILL]
// STRATEGY: mirrored (2 replicas), central (2 replicas), one, or multiworker
// (1 replica a process, under mpirun; built as mpi_resume_run).
// KILL: batch:E:K  from a callback, after batch K of epoch E
//       layer:S    from a layer, in the forward pass of step S of the run (mid-step)
//       write:N    in the N-th backup's write: its temporary file complete, before the rename
//       end        from a callback's on_train_end, before the backup is deleted
// Under mpirun rank 1 is killed at a batch or in a layer, rank 0 in a write or at the end.
// It prints "resumed at epoch E step S" or "started afresh", then "finished".
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "lockstep/lockstep.hpp"
#if LOCKSTEP_RESUME_MPI
#include "lockstep/mpi.hpp"
#endif
#include "train/test_helpers.hpp"

namespace {

// Whether the strategy spans processes: then rank 1 dies, rank 0 writes.
template <class S>
struct MultiWorkerProcesses : std::false_type {};
#if LOCKSTEP_RESUME_MPI
template <class C>
struct MultiWorkerProcesses<lockstep::MultiWorkerMirroredPolicy<C>> : std::true_type {};
#endif

// A layer that passes its input on and kills the process in the forward
// pass of step kill_step (set by KillPoint before each batch).
struct KillInStep {
  static inline std::atomic<long long> current_step{-1};
  static inline long long kill_step = -1;
  template <class In>
  struct Bind : lockstep::detail::ShapePreserving<In> {
    using lockstep::detail::ShapePreserving<In>::kIn;
    template <class Ctx, class P, class T>
    static void forward(Ctx&, const P&, lockstep::Slots<T>, const T* x, T* y, int rows) {
      if (kill_step >= 0 && current_step.load() == kill_step) std::raise(SIGKILL);
      for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * kIn; ++i) y[i] = x[i];
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx&, const P&, lockstep::Slots<T>, const T*, const T*, const T* dy, T* dx, T*, int rows) {
      if (!dx) return;
      for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * kIn; ++i) dx[i] = dy[i];
    }
  };
};

struct KillPoint {
  bool armed = false;  // on the rank that dies
  int epoch = -1;
  long long batch = -1;
  bool at_end = false;
  template <class View>
  void on_batch_begin(std::size_t, View& view) {
    KillInStep::current_step = static_cast<long long>(view.run().steps_done);
  }
  template <class View>
  void on_batch_end(std::size_t step, const lockstep::Logs&, View& view) {
    if (armed && view.run().epoch == epoch && static_cast<long long>(step) == batch) std::raise(SIGKILL);
  }
  void on_train_end(const lockstep::Logs&) {
    if (armed && at_end) std::raise(SIGKILL);
  }
};

std::string g_backup_path;
long g_kill_write = -1;
long g_writes = 0;
void kill_in_write(const std::string&, const std::string& path) {
  if (path == g_backup_path && ++g_writes == g_kill_write) std::raise(SIGKILL);
}

template <class Strategy>
int run(Strategy strategy, int argc, char** argv) {
  using namespace lockstep;
  using Model = Sequential<Input<16>, Dense<32>, BatchNormalization<>, Relu, KillInStep, Dropout<20>, Dense<4>>;
  const Dataset data = testing::argmax_dataset(300, 16, 4, 7);  // 10 steps of 32 an epoch, the last of 12
  Model model{3};
  Trainer<Strategy, Adam> trainer{strategy, Adam{0.01}};
  FitOptions options = testing::quiet_fit(32, 4);
  options.seed = 11;

  BackupAndRestoreOptions backup_options;
  backup_options.save_freq = static_cast<std::size_t>(std::atol(argv[4]));
  BackupAndRestore backup(argv[2], backup_options);
  KillPoint kill;
  const std::string what = argc > 5 ? argv[5] : "";
  const bool writer = trainer.process_rank() == 0;
  const bool victim = trainer.process_rank() == (MultiWorkerProcesses<Strategy>::value ? 1 : 0);
  if (what.rfind("batch:", 0) == 0) {
    kill.armed = victim;
    kill.epoch = std::atoi(what.c_str() + 6);
    kill.batch = std::atoll(what.c_str() + what.rfind(':') + 1);
  } else if (what.rfind("layer:", 0) == 0) {
    if (victim) KillInStep::kill_step = std::atoll(what.c_str() + 6);
  } else if (what.rfind("write:", 0) == 0) {
    g_backup_path = backup.path();
    g_kill_write = writer ? std::atol(what.c_str() + 6) : -1;
    AtomicFile::test_hook_before_rename = kill_in_write;
  } else if (what == "end") {
    kill.armed = writer;  // rank 0, before it deletes the backup
    kill.at_end = true;
  } else {
    require(what.empty(), "resume_run: kill point '", what, "', expected batch:E:K, layer:S, write:N or end");
  }

  trainer.fit(model, data, options, kill, backup);  // KillPoint first: its on_train_end runs before the deletion
  if (writer) {
    if (backup.restored())
      std::printf("resumed at epoch %d step %zu\n", backup.restored_from().epoch, backup.restored_from().step);
    else
      std::printf("started afresh\n");
    save_weights(model, argv[3]);
    std::printf("finished after %d backups\n", backup.saves());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  if (argc < 5) {
    std::fprintf(stderr, "usage: resume_run mirrored|central|one|multiworker BACKUP_DIR WEIGHTS_OUT SAVE_FREQ [KILL]\n");
    return 2;
  }
  try {
    const std::string strategy = argv[1];
#if LOCKSTEP_RESUME_MPI
    if (strategy == "multiworker") return run(MultiWorkerMirroredPolicy<MpiAllReduce>{1}, argc, argv);
#endif
    if (strategy == "mirrored") return run(MirroredPolicy<HostAllReduce>{2}, argc, argv);
    if (strategy == "central") return run(CentralStoragePolicy{2}, argc, argv);
    if (strategy == "one") return run(OneDevicePolicy{}, argc, argv);
    std::fprintf(stderr, "resume_run: strategy '%s', expected mirrored, central, one or multiworker\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
