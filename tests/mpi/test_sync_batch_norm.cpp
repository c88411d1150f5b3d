// Under mpirun -np P: BatchNormalization across processes. The synchronised
// layer's statistics span every replica of every process, so P processes x 2
// local replicas train as one replica on the whole global batch (also with a
// short last batch that leaves replicas without rows); the per-replica layer
// equals one process with 2P replicas (the same slices). And a callback's
// view at on_epoch_end sees the epoch's weights on every rank.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "lockstep/mpi.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using SyncModel = Sequential<Input<6>, Dense<5>, SyncBatchNormalization, Relu, Dense<3>>;
using LocalModel = Sequential<Input<6>, Dense<5>, BatchNormalization<>, Relu, Dense<3>>;
using MultiWorker = MultiWorkerMirroredPolicy<MpiAllReduce>;
constexpr int kLocal = 2;

int processes() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int this_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Rank 0's process id, the same on every rank: a name for this run's files.
int rank_0_pid() {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return pid;
}

FitOptions options(int epochs) {
  FitOptions o;
  o.batch_size = 8;  // 18 samples: steps of 8, 8 and 2, the last leaving replicas empty
  o.epochs = epochs;
  o.verbose = false;
  return o;
}

// Every rank holds the same bits as rank 0.
bool same_on_every_rank(const std::vector<float>& mine) {
  std::vector<float> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = root == mine ? 1 : 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

template <class Model>
struct RecordAtEpochEnd {
  const Model* model;
  std::vector<std::vector<float>> by_view, by_reference, state_by_view;
  template <class View>
  void on_epoch_end(int, const Logs&, View& view) {
    by_reference.push_back(model->parameters());
    by_view.push_back(view.model().parameters());
    state_by_view.push_back(view.model().state());
  }
};
}  // namespace

TEST_CASE("SyncBatchNormalization: P processes x 2 replicas equal one replica on the global batch") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const Sgd opt(0.1, 0.9, true);
  SyncModel multi{11}, single{11};
  Trainer<MultiWorker, Sgd> trainer{MultiWorker{kLocal}, opt};
  REQUIRE(trainer.global_replicas() == kLocal * processes());
  trainer.fit(multi, data, options(2));
  Trainer<MirroredPolicy<HostAllReduce>, Sgd> reference{MirroredPolicy<HostAllReduce>{1}, opt};
  reference.fit(single, data, options(2));
  CHECK(multi.parameters() != SyncModel{11}.parameters());
  CHECK(multi.state() != SyncModel{11}.state());
  CHECK(testing::max_abs_difference(multi.parameters(), single.parameters()) <= 1e-5);
  CHECK(testing::max_abs_difference(multi.state(), single.state()) <= 1e-5);
  CHECK(same_on_every_rank(multi.parameters()));
  CHECK(same_on_every_rank(multi.state()));

  // Inference with the moving statistics, over P processes, equals one process.
  const Dataset test = testing::argmax_dataset(37, 6, 3, 2);
  const Logs a = trainer.evaluate(multi, test, 5), b = reference.evaluate(multi, test, 5);
  CHECK(a["loss"] == doctest::Approx(b["loss"]).epsilon(1e-6));
}

TEST_CASE("BatchNormalization<> per replica: P processes x 2 replicas equal one process with 2P replicas") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const Sgd opt(0.1, 0.9, true);
  LocalModel multi{11}, single{11};
  Trainer<MultiWorker, Sgd> trainer{MultiWorker{kLocal}, opt};
  trainer.fit(multi, data, options(2));
  Trainer<MirroredPolicy<HostAllReduce>, Sgd> reference{MirroredPolicy<HostAllReduce>{kLocal * processes()}, opt};
  reference.fit(single, data, options(2));
  CHECK(testing::max_abs_difference(multi.parameters(), single.parameters()) <= 1e-5);
  CHECK(testing::max_abs_difference(multi.state(), single.state()) <= 1e-5);
  CHECK(same_on_every_rank(multi.state()));
  // Per-replica statistics are not the global batch's.
  SyncModel global{11};
  Trainer<MirroredPolicy<HostAllReduce>, Sgd> one{MirroredPolicy<HostAllReduce>{1}, opt};
  one.fit(global, data, options(2));
  CHECK(testing::max_abs_difference(multi.state(), global.state()) > 1e-5);
}

TEST_CASE("multi-worker: on_epoch_end sees the epoch's weights through the view and in the model object") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  SyncModel model{9}, after_one{9};
  Trainer<MultiWorker, Adam> trainer{MultiWorker{kLocal}, Adam{0.01}};
  RecordAtEpochEnd<SyncModel> record{&model, {}, {}, {}};
  trainer.fit(model, data, options(2), record);
  REQUIRE(record.by_view.size() == 2);
  Trainer<MultiWorker, Adam> other{MultiWorker{kLocal}, Adam{0.01}};
  other.fit(after_one, data, options(1));
  CHECK(after_one.parameters() != SyncModel{9}.parameters());
  CHECK(record.by_view[0] == after_one.parameters());
  CHECK(record.by_reference[0] == after_one.parameters());
  CHECK(record.state_by_view[0] == after_one.state());
  CHECK(record.by_view[1] == model.parameters());
  CHECK(same_on_every_rank(record.by_view[0]));
}

TEST_CASE("snapshot and restore across processes: 1 epoch + restore into a new trainer + 1 epoch equals 2 epochs") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  FitOptions two = options(2), one = options(1);
  two.shuffle = one.shuffle = false;  // both runs see the same batches
  SyncModel straight{5};
  Trainer<MultiWorker, Adam> a{MultiWorker{kLocal}, Adam{0.01}};
  a.fit(straight, data, two);

  SyncModel first{5};
  Trainer<MultiWorker, Adam> b{MultiWorker{kLocal}, Adam{0.01}};
  b.fit(first, data, one);
  const Snapshot snapshot = b.snapshot(first);
  CHECK(snapshot.iterations == 3);
  CHECK(same_on_every_rank(snapshot.slots.at(0).values));  // every rank holds the whole optimizer state

  SyncModel resumed{0};
  Trainer<MultiWorker, Adam> c{MultiWorker{kLocal}, Adam{0.01}};
  c.restore(resumed, snapshot);
  c.fit(resumed, data, one);
  CHECK(resumed.parameters() == straight.parameters());
  CHECK(resumed.state() == straight.state());
}

TEST_CASE("a checkpoint file across processes: rank 0 writes, every rank loads, the resumed fit equals an unbroken one") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  FitOptions two = options(2), one = options(1);  // shuffled
  SyncModel straight{5};
  Trainer<MultiWorker, Adam> a{MultiWorker{kLocal}, Adam{0.01}};
  a.fit(straight, data, two);

  // One path for the job, named by rank 0's process.
  const std::string path = "/tmp/lockstep_mpi_checkpoint_" + std::to_string(rank_0_pid()) + ".safetensors";

  SyncModel first{5};
  Trainer<MultiWorker, Adam> b{MultiWorker{kLocal}, Adam{0.01}};
  b.fit(first, data, one);
  save_checkpoint(b, first, path);
  SyncModel resumed{0};
  Trainer<MultiWorker, Adam> c{MultiWorker{kLocal}, Adam{0.01}};
  load_checkpoint(c, resumed, path);
  FitOptions rest = two;
  rest.initial_epoch = c.run_state().epoch;
  c.fit(resumed, data, rest);
  CHECK(resumed.parameters() == straight.parameters());
  CHECK(resumed.state() == straight.state());
  MPI_Barrier(MPI_COMM_WORLD);
  if (this_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("callbacks that write files write on rank 0 only; EarlyStopping stops every rank at the same epoch") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const int rank = this_rank(), pid = rank_0_pid();
  // Each rank names its own files, so a write from any rank but 0 would show.
  const std::string base = "/tmp/lockstep_mpi_cb_" + std::to_string(pid) + "_rank" + std::to_string(rank);
  SyncModel model{5};
  Trainer<MultiWorker, Adam> trainer{MultiWorker{kLocal}, Adam{0.01}};
  FitOptions o = options(6);
  o.validation_data = &data;
  CSVLogger log(base + ".csv");
  ModelCheckpointOptions weights_only;
  weights_only.save_weights_only = true;
  ModelCheckpoint checkpoint(base + "-{epoch}.safetensors", weights_only);
  EarlyStoppingOptions es;
  es.monitor = "val_loss";
  es.min_delta = 10.0;  // nothing improves that much: stops at epoch 1 on every rank
  EarlyStopping stop(es);
  const History h = trainer.fit(model, data, o, log, checkpoint, stop);
  CHECK(h["loss"].size() == 2);
  CHECK(stop.stopped_epoch() == 1);
  const bool wrote = std::ifstream(base + ".csv").good() && std::ifstream(base + "-2.safetensors").good();
  CHECK(wrote == (rank == 0));
  std::remove((base + ".csv").c_str());
  std::remove((base + "-1.safetensors").c_str());
  std::remove((base + "-2.safetensors").c_str());
}

TEST_CASE("a file rank 0 cannot write is an Error on every rank: check_can_save before fit, ModelCheckpoint's saves") {
  const Dataset data = testing::argmax_dataset(18, 6, 3, 1);
  const int rank = this_rank(), pid = rank_0_pid();
  const std::string missing = "/tmp/lockstep_mpi_missing_" + std::to_string(pid);  // never made
  SyncModel model{5};
  Trainer<MultiWorker, Adam> trainer{MultiWorker{kLocal}, Adam{0.01}};
  // Rank 0 says why; the others that rank 0 failed, rather than waiting for it in a collective.
  const char* expected = rank == 0 ? "does not exist" : "rank 0 cannot write";
  CHECK_THROWS_WITH_AS(check_can_save(trainer, missing + "/c.safetensors"), doctest::Contains(expected), Error);
  // A field in the folder's part: the first save, at epoch 1's end, is where it fails.
  ModelCheckpoint checkpoint(missing + "/e{epoch}/w.safetensors");
  expected = rank == 0 ? "cannot create" : "rank 0 could not write";
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options(2), checkpoint), doctest::Contains(expected), Error);
  CHECK(trainer.run_state().steps_done == 3);  // epoch 1's steps, on every rank

  // The callbacks that write on rank 0 alone, where rank 0 cannot: the same on every rank, at once.
  CSVLogger log(missing + "/log.csv");
  expected = rank == 0 ? "cannot create" : "CSVLogger: rank 0 could not write";
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options(2), log), doctest::Contains(expected), Error);
  TensorBoard tensorboard("/proc/self/lockstep_logs");  // a folder no process can make
  expected = rank == 0 ? "cannot create" : "TensorBoard: rank 0 could not write";
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options(2), tensorboard), doctest::Contains(expected), Error);
  CHECK(trainer.run_state().steps_done == 3);  // neither began a step
}
