// AtomicFile: a file written so that a crash, a full disk or an error leaves
// the old file or the new one whole, never half of either. The bytes go to a
// temporary file in the same folder, which commit() flushes to disk
// (fsync), renames over the target and then makes the rename itself durable
// (fsync of the folder). A file dropped before commit() is removed, and the
// target is untouched. Every file the library writes goes through here
// (weights, traces, reports).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "lockstep/core/error.hpp"

namespace lockstep {

class AtomicFile {
 public:
  // `who` starts every error message ("safetensors", "profiler").
  AtomicFile(std::string path, std::string who)
      : path_(std::move(path)), who_(std::move(who)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_with("cannot create", tmp_, errno);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() { discard(); }

  void write(const void* data, std::size_t bytes) {
    const char* at = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t w = ::write(fd_, at, bytes);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) give_up("could not write (is the disk full?)", tmp_);
      at += w;
      bytes -= static_cast<std::size_t>(w);
    }
  }
  void write(const std::string& text) { write(text.data(), text.size()); }

  // The new file in place of the old, durably.
  void commit() {
    if (::fsync(fd_) != 0) give_up("could not flush to disk", tmp_);
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) give_up("could not close", tmp_);
    if (test_hook_before_rename) test_hook_before_rename(tmp_, path_);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) give_up("could not move the new file over", path_);
    committed_ = true;
    const int dfd = ::open(folder_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {  // some file systems refuse to fsync a folder: the file itself is safe by then
      ::fsync(dfd);
      ::close(dfd);
    }
  }

  // For tests of a crash mid-write (tests/resume/): when set, commit() calls
  // it with the complete, flushed temporary file and the target just before
  // the rename, where a test may kill the process. Null otherwise, which
  // costs one test per file written.
  static inline void (*test_hook_before_rename)(const std::string& tmp, const std::string& path) = nullptr;

  // An Error now, not after hours of training, where `path` could not be
  // written later: a folder that does not exist or cannot be written to, or
  // `path` itself a folder. It creates and removes the temporary file a
  // write would create; `path` itself is not touched.
  static void check_writable(const std::string& path, const std::string& who) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      fail(who, ": '", path, "' is a folder, expected the path of a file to write");
    const std::string dir = folder_of(path);
    const bool found = ::stat(dir.c_str(), &st) == 0;
    const int error = errno;
    if (!found || !S_ISDIR(st.st_mode))
      fail(who, ": cannot write '", path, "': its folder '", dir, "' ",
           found ? "is not a folder" : (error == ENOENT || error == ENOTDIR ? "does not exist" : std::strerror(error)),
           "; expected an existing folder");
    AtomicFile probe(path, who);  // made and, never committed, removed: an Error naming errno's reason
  }

  // `content` into `path`, atomically, in one call.
  static void write_whole(const std::string& path, const std::string& who, const std::string& content) {
    AtomicFile file(path, who);
    file.write(content);
    file.commit();
  }

 private:
  static std::string folder_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  }

  void discard() noexcept {
    if (committed_) return;
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
    ::unlink(tmp_.c_str());
    committed_ = true;
  }
  [[noreturn]] void give_up(const char* what, const std::string& shown) {
    const int e = errno;
    discard();
    fail_with(what, shown, e);
  }
  [[noreturn]] void fail_with(const char* what, const std::string& shown, int error) const {
    fail(who_, ": ", what, " '", shown, "': ", std::strerror(error));
  }

  std::string path_, who_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace lockstep
