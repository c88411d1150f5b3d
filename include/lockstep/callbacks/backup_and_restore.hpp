// BackupAndRestore: Keras' callback (tf.keras.callbacks.BackupAndRestore),
// so that nothing is lost when a process dies. It backs the whole run up
// (variables, layer state, optimizer state and the run state: io/
// checkpoint.hpp) into backup_dir after every epoch (save_freq 0, Keras'
// "epoch") or every save_freq batches, and at the start of fit, where
// backup_dir holds a backup, it puts that back and the loop goes on from the
// epoch and step it was taken at (FitView::resume). As the shuffle and the
// dropout keys come from (seed, epoch, step), rerunning the command of a
// process that died ends with the weights of an unbroken run, bit for bit.
// At the end of a fit that did not fail, the backup is deleted
// (delete_checkpoint).
//
// Every write is atomic (core/atomic_file.hpp): the new backup is written
// whole to a temporary file beside the old one and only then renamed over
// it, so a crash or a full disk mid-write leaves the previous backup as it
// was, and a backup that does not pass its CRC check is an Error, never a
// resume from bad state. backup_dir is made, and checked to be writable, at
// the start of fit, not at the first save. Only rank 0 writes; every rank
// reads (backup_dir must be on a file system every process sees), and every
// rank fails alike when rank 0 cannot write or the ranks see different files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <utility>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/atomic_file.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/io/checkpoint.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep {

struct BackupAndRestoreOptions {
  std::size_t save_freq = 0;      // 0: after every epoch (Keras' "epoch"); N: after every N-th batch of the run
  bool delete_checkpoint = true;  // remove the backup when fit ends without an error
};

class BackupAndRestore {
 public:
  explicit BackupAndRestore(std::string backup_dir, BackupAndRestoreOptions options = {})
      : dir_(std::move(backup_dir)), options_(options) {
    require(!dir_.empty(), "BackupAndRestore: an empty backup_dir, expected a folder to keep the backup in");
  }

  // The backup's file: backup_dir/backup.safetensors (a checkpoint that load_checkpoint reads too).
  std::string path() const { return (std::filesystem::path(dir_) / "backup.safetensors").string(); }
  // Whether the last fit resumed from a backup, and the epoch and step it went on from.
  bool restored() const { return restored_; }
  const RunState& restored_from() const { return restored_from_; }
  // Backups written by the last fit.
  int saves() const { return saves_; }

  template <class View>
  void on_train_begin(const TrainInfo& info, View& view) {
    using Model = typename View::model_type;
    restored_ = false;
    saves_ = 0;
    shape_ = {{"backup_batch_size", std::to_string(info.batch_size)},
              {"backup_samples", std::to_string(info.samples)},
              {"backup_steps_per_epoch", std::to_string(info.steps_per_epoch)}};
    on_rank_0(view, "prepare backup_dir", [&] { prepare(); });

    // Every rank reads the backup, if there is one, and checks it fits this fit.
    std::error_code ec;
    const bool found = std::filesystem::exists(path(), ec);
    Snapshot snap;
    std::string error;
    std::uint64_t crc = 0;
    if (found) {
      try {
        std::map<std::string, std::string> metadata;
        snap = read_checkpoint<Model>(path(), &metadata);
        crc = std::strtoull(metadata["crc32c"].c_str(), nullptr, 16);
        check_fits(metadata, snap, info, view.run().seed);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    // The ranks must agree on what they found, or the job would split.
    const std::uint64_t mine[4] = {found, error.empty() ? 0u : 1u, crc, snap.run.steps_done};
    std::uint64_t root[4];
    std::memcpy(root, mine, sizeof root);
    view.group().broadcast_from_root(root, sizeof root);
    double differ = std::memcmp(root, mine, sizeof root) == 0 ? 0.0 : 1.0;
    view.group().sum_across_processes(&differ, 1);
    require(differ == 0.0, "BackupAndRestore: the processes of this job see different backups in '", dir_,
            "' (rank ", view.process_rank(), ": ", seen(mine), "; rank 0: ", seen(root),
            "): backup_dir must be a folder every process reads, on a shared file system");
    if (!error.empty()) throw Error(error.substr(std::strlen("lockstep: ")));
    if (!found) return;
    view.resume(snap);
    restored_ = true;
    restored_from_ = snap.run;
  }

  template <class View>
  void on_batch_end(std::size_t step, const Logs&, View& view) {
    // Counted over the run (steps_done, restored with the backup), so a
    // resumed run backs up at the batches an unbroken one would.
    if (options_.save_freq != 0 && view.run().steps_done % options_.save_freq == 0)
      save(view, view.run().epoch, step + 1);
  }

  template <class View>
  void on_epoch_end(int epoch, const Logs&, View& view) {
    if (options_.save_freq == 0) save(view, epoch + 1, 0);
  }

  template <class View>
  void on_train_end(const Logs&, View& view) {
    if (!options_.delete_checkpoint) return;
    on_rank_0(view, "delete its backup", [&] {
      std::error_code ec;
      std::filesystem::remove(path(), ec);
      require(!ec, "BackupAndRestore: cannot delete the backup '", path(), "': ", ec.message());
      remove_temporaries();
      std::filesystem::remove(dir_, ec);  // the folder too, where nothing else is in it
    });
  }

 private:
  // Rank 0 runs f; every rank returns once it is done, and throws where it failed.
  template <class View, class F>
  void on_rank_0(View& view, const char* what, F&& f) {
    detail::on_rank_0(
        view.group(), std::forward<F>(f),
        detail::concat("BackupAndRestore: rank 0 could not ", what, " in '", dir_, "' (its error says why)"));
  }

  // backup_dir made, the temporary files of a writer that died removed, and
  // a temporary file made and dropped where the backups will be written.
  void prepare() {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    require(!ec, "BackupAndRestore: cannot create backup_dir '", dir_, "': ", ec.message());
    require(std::filesystem::is_directory(dir_, ec), "BackupAndRestore: backup_dir '", dir_,
            "' is not a folder");
    remove_temporaries();
    try {
      AtomicFile probe(path(), "BackupAndRestore");
    } catch (const Error& e) {
      const std::string why = e.what();  // "lockstep: BackupAndRestore: cannot create '...': <the OS's reason>"
      fail("BackupAndRestore: backup_dir '", dir_, "' is not writable: ",
           why.substr(std::strlen("lockstep: BackupAndRestore: ")));
    }
  }

  // AtomicFile's temporaries of the backup: "backup.safetensors.tmp.<pid>".
  void remove_temporaries() const {
    std::error_code ec;
    const std::string prefix = "backup.safetensors.tmp.";
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().filename().string().compare(0, prefix.size(), prefix) == 0) {
        std::error_code ignored;
        std::filesystem::remove(it->path(), ignored);
      }
  }

  template <class View>
  void save(View& view, int epoch, std::size_t step) {
    using Model = typename View::model_type;
    Snapshot snap = view.snapshot();
    snap.run.epoch = epoch;  // where a resumed run goes on from
    snap.run.step = step;
    on_rank_0(view, "write its backup", [&] { write_checkpoint<Model>(snap, path(), shape_); });
    ++saves_;
  }

  // A backup resumes only the run it was taken from: the same batches.
  void check_fits(std::map<std::string, std::string>& metadata, const Snapshot& snap, const TrainInfo& info,
                  std::uint64_t seed) const {
    require(snap.run.seed == seed, "BackupAndRestore: the backup '", path(), "' was taken by a fit of seed ",
            snap.run.seed, ", this fit has seed ", seed,
            ": rerun the command that made it, or delete the backup to start afresh");
    for (const auto& [key, value] : shape_)
      require(metadata[key] == value, "BackupAndRestore: the backup '", path(), "' was taken by a fit of ",
              key.substr(std::strlen("backup_")), " ", metadata[key], ", this fit has ", value,
              ": rerun the command that made it, or delete the backup to start afresh");
    require(snap.run.epoch <= info.epochs, "BackupAndRestore: the backup '", path(), "' was taken at epoch ",
            snap.run.epoch, ", after the ", info.epochs, " epochs of this fit: delete it to start afresh");
  }

  static std::string seen(const std::uint64_t* v) {
    if (!v[0]) return "no backup";
    if (v[1]) return "a backup it cannot read";
    return detail::concat("a backup of ", v[3], " steps, CRC-32C ", io::detail::crc_text(static_cast<std::uint32_t>(v[2])));
  }

  std::string dir_;
  BackupAndRestoreOptions options_;
  std::map<std::string, std::string> shape_;
  bool restored_ = false;
  RunState restored_from_;
  int saves_ = 0;
};

}  // namespace lockstep
