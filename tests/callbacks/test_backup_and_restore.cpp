// BackupAndRestore in one process: a fit interrupted (here by an Error from
// a callback; tests/resume/ kills real processes) and run again resumes
// where its last backup was taken and ends bit for bit where an unbroken fit
// ends, at an epoch's end or mid-epoch, on every host strategy; the backup is
// deleted at the end (or kept); a corrupt, truncated or foreign backup, or a
// backup of other options, is an Error at the start of fit that leaves the
// file as it was; so are a backup_dir that cannot be made or written, and a
// full disk mid-save, after which the previous backup still resumes.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<4>, Dense<8>, BatchNormalization<>, Relu, Dropout<20>, Dense<2>>;

const Dataset& data() {
  static const Dataset d = testing::argmax_dataset(50, 4, 2, 3);  // 7 steps of 8 an epoch, the last of 2
  return d;
}
FitOptions options() {
  FitOptions o = testing::quiet_fit(8, 3);
  o.seed = 5;
  return o;
}
std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Stands for a process that dies: an Error after batch `batch` of epoch `epoch`.
struct FailAt {
  int epoch;
  std::size_t batch;
  template <class View>
  void on_batch_end(std::size_t step, const Logs&, View& view) {
    if (view.run().epoch == epoch && step == batch) fail("interrupted");
  }
};

template <class Strategy>
Model unbroken(Strategy strategy) {
  Model model{7};
  Trainer<Strategy, Adam> trainer{strategy, Adam{0.01}};
  trainer.fit(model, data(), options());
  return model;
}
}  // namespace

TEST_CASE("BackupAndRestore: an interrupted fit run again ends bit for bit where an unbroken fit ends") {
  const auto check = [](auto strategy, std::size_t save_freq, int resumed_epoch, std::size_t resumed_step) {
    using S = decltype(strategy);
    CAPTURE(S::kName);
    CAPTURE(save_freq);
    testing::TempDir dir;
    const std::string backup_dir = dir.file("backup");
    const Model straight = unbroken(strategy);
    BackupAndRestoreOptions backup_options;
    backup_options.save_freq = save_freq;
    {
      Model model{7};
      Trainer<S, Adam> trainer{strategy, Adam{0.01}};
      BackupAndRestore backup(backup_dir, backup_options);
      CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options(), FailAt{1, 4}, backup), "lockstep: interrupted", Error);
      CHECK(std::filesystem::exists(backup.path()));
    }
    Model model{7};
    Trainer<S, Adam> trainer{strategy, Adam{0.01}};
    BackupAndRestore backup(backup_dir, backup_options);
    trainer.fit(model, data(), options(), backup);
    CHECK(backup.restored());
    CHECK(backup.restored_from().epoch == resumed_epoch);
    CHECK(backup.restored_from().step == resumed_step);
    CHECK(model.parameters() == straight.parameters());
    CHECK(model.state() == straight.state());
    CHECK(trainer.run_state().steps_done == 21);
    CHECK_FALSE(std::filesystem::exists(backup_dir));  // delete_checkpoint: the file, and the folder it left empty
  };
  check(MirroredPolicy<HostAllReduce>{2}, 0, 1, 0);  // epoch 0's backup
  check(MirroredPolicy<HostAllReduce>{2}, 3, 1, 2);  // steps 3, 6, 9 (epoch 1, after its batch 1)
  check(MirroredPolicy<HostAllReduce>{3}, 5, 1, 3);
  check(CentralStoragePolicy{2}, 3, 1, 2);
  check(OneDevicePolicy{}, 0, 1, 0);
  check(OneDevicePolicy{}, 7, 0, 7);  // after the last batch of epoch 0: its end runs again, no step
}

TEST_CASE("BackupAndRestore: delete_checkpoint false keeps the backup, and a finished backup resumes to the same end") {
  testing::TempDir dir;
  BackupAndRestoreOptions keep;
  keep.delete_checkpoint = false;
  const Model straight = unbroken(MirroredPolicy<HostAllReduce>{2});
  Model model{7};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
  BackupAndRestore backup(dir.file("b"), keep);
  trainer.fit(model, data(), options(), backup);
  CHECK_FALSE(backup.restored());
  CHECK(backup.saves() == 3);
  REQUIRE(std::filesystem::exists(backup.path()));
  const Snapshot snap = read_checkpoint<Model>(backup.path());
  CHECK(snap.run.epoch == 3);
  CHECK(snap.run.step == 0);

  Model again{7};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> second{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
  second.fit(again, data(), options(), backup);
  CHECK(backup.restored());
  CHECK(backup.saves() == 0);
  CHECK(second.run_state().steps_done == 21);  // restored, none run
  CHECK(again.parameters() == straight.parameters());
}

TEST_CASE("BackupAndRestore: a corrupt, truncated or foreign backup is an Error at the start of fit, the file left as it was") {
  testing::TempDir dir;
  BackupAndRestoreOptions keep;
  keep.delete_checkpoint = false;
  BackupAndRestore backup(dir.file("b"), keep);
  {
    Model model{7};
    Trainer<OneDevicePolicy, Adam> trainer{OneDevicePolicy{}, Adam{0.01}};
    FitOptions one = options();
    one.epochs = 1;
    trainer.fit(model, data(), one, backup);
  }
  const std::string good = read_all(backup.path());
  const auto fit_with = [&](const std::string& bytes) {
    testing::write_file(backup.path(), bytes);
    Model model{7};
    const std::vector<float> before = model.parameters();
    Trainer<OneDevicePolicy, Adam> trainer{OneDevicePolicy{}, Adam{0.01}};
    std::string message;
    try {
      trainer.fit(model, data(), options(), backup);
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(read_all(backup.path()) == bytes);  // neither replaced nor deleted
    CHECK(trainer.run_state().steps_done == 0);
    CHECK(model.parameters() == before);
    return message;
  };
  std::string flipped = good;
  flipped[flipped.size() - 3] = static_cast<char>(flipped[flipped.size() - 3] ^ 0x10);  // a bit of optimizer state
  std::string message = fit_with(flipped);
  CHECK(message.find(backup.path()) != std::string::npos);
  CHECK(message.find("bad CRC-32C: the header records ") != std::string::npos);
  CHECK(message.find(", the contents give ") != std::string::npos);
  std::string epoch_changed = good;  // the header is covered too
  const std::size_t at = epoch_changed.find("\"epoch\":\"1\"");
  REQUIRE(at != std::string::npos);
  epoch_changed[at + 9] = '0';
  CHECK(fit_with(epoch_changed).find("bad CRC-32C") != std::string::npos);
  message = fit_with(good.substr(0, good.size() - 100));
  CHECK(message.find(backup.path() + ": " + std::to_string(good.size() - 100) + " bytes, but its header describes " +
                     std::to_string(good.size())) != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);
  CHECK(fit_with("").find("too short for a safetensors file") != std::string::npos);
  save_weights(Model{1}, backup.path());
  message = fit_with(read_all(backup.path()));
  CHECK(message.find(backup.path() + ": not a lockstep checkpoint") != std::string::npos);
  CHECK(message.find("save_weights file") != std::string::npos);
  CHECK(fit_with("lockstep?").find("not a safetensors file") != std::string::npos);
  // A lockstep checkpoint without a CRC (as lockstep 0.1 wrote them).
  Model plain{1};
  const std::int64_t iterations = 0;
  std::vector<io::TensorView> tensors =
      io::detail::variable_tensors<Model>(plain.parameters().data(), plain.state().data());
  tensors.push_back({"optimizer/iterations", "I64", {1}, &iterations, sizeof iterations});
  io::write_safetensors(backup.path(), tensors,
                        {{"format", "lockstep checkpoint"}, {"epoch", "1"}, {"seed", "5"}, {"steps_done", "7"}});
  CHECK(fit_with(read_all(backup.path())).find("without a crc32c") != std::string::npos);

  // A backup of a fit with other options resumes nothing.
  testing::write_file(backup.path(), good);
  FitOptions other = options();
  other.batch_size = 16;
  Model model{7};
  Trainer<OneDevicePolicy, Adam> trainer{OneDevicePolicy{}, Adam{0.01}};
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), other, backup),
                       doctest::Contains("was taken by a fit of batch_size 8, this fit has 16"), Error);
  other = options();
  other.seed = 6;
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), other, backup),
                       doctest::Contains("was taken by a fit of seed 5, this fit has seed 6"), Error);
  CHECK(read_all(backup.path()) == good);
}

TEST_CASE("BackupAndRestore: a backup_dir that cannot be made or written is an Error at the start of fit") {
  testing::TempDir dir;
  testing::write_file(dir.file("file"), std::string("x"));
  Model model{7};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
  BackupAndRestore under_a_file(dir.file("file/backup"));
  CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options(), under_a_file),
                       doctest::Contains(("BackupAndRestore: cannot create backup_dir '" + dir.file("file/backup") + "'").c_str()),
                       Error);
  CHECK(trainer.run_state().steps_done == 0);
  // A folder this process may not write in: a read-only one where permissions bind, else /proc.
  const std::string read_only = dir.file("read_only");
  std::filesystem::create_directory(read_only);
  std::filesystem::permissions(read_only, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const std::string target = ::access(read_only.c_str(), W_OK) != 0 ? read_only : std::string("/proc");
  if (std::filesystem::is_directory(target)) {
    BackupAndRestore unwritable(target);
    CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options(), unwritable),
                         doctest::Contains(("BackupAndRestore: backup_dir '" + target + "' is not writable").c_str()), Error);
    CHECK(trainer.run_state().steps_done == 0);
  } else {
    MESSAGE("no unwritable folder here (root, and no /proc): the read-only case is skipped");
  }
  std::filesystem::permissions(read_only, std::filesystem::perms::owner_all);
}

namespace {
// From epoch 1 on, the backup's temporary file is /dev/full: the next save
// fails as on a full disk. Records the backup as it was before.
struct FillDisk {
  std::string dir;
  std::string* before;
  void on_epoch_begin(int epoch, const TrainInfo&) {
    if (epoch != 1) return;
    *before = read_all(dir + "/backup.safetensors");
    std::filesystem::create_symlink("/dev/full", dir + "/backup.safetensors.tmp." + std::to_string(::getpid()));
  }
};
}  // namespace

TEST_CASE("BackupAndRestore: a full disk mid-save is an Error, and the previous backup is intact and resumes") {
  if (!std::filesystem::exists("/dev/full")) {
    MESSAGE("no /dev/full here: the full-disk case is skipped");
    return;
  }
  testing::TempDir dir;
  const std::string backup_dir = dir.file("b");
  const Model straight = unbroken(MirroredPolicy<HostAllReduce>{2});
  std::string before;
  {
    Model model{7};
    Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
    BackupAndRestore backup(backup_dir);
    CHECK_THROWS_WITH_AS(trainer.fit(model, data(), options(), FillDisk{backup_dir, &before}, backup),
                         doctest::Contains("could not write (is the disk full?)"), Error);
    REQUIRE(!before.empty());
    CHECK(read_all(backup.path()) == before);
    CHECK(backup.saves() == 1);
  }
  CHECK(std::distance(std::filesystem::directory_iterator(backup_dir), std::filesystem::directory_iterator()) == 1);
  Model model{7};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
  BackupAndRestore backup(backup_dir);
  trainer.fit(model, data(), options(), backup);
  CHECK(backup.restored_from().epoch == 1);
  CHECK(model.parameters() == straight.parameters());
}
