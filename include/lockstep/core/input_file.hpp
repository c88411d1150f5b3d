// Opening an input file only when it is a regular file. The readers (IDX, CSV,
// safetensors weights and checkpoints) take a path from the user, and a path
// to a FIFO would block in open() until a writer comes, /dev/zero would be
// read forever, and a directory fails late with an obscure message; so the
// path is stat()ed first, opened with O_NONBLOCK (a FIFO's open never waits)
// and checked again on the open descriptor, and anything but a regular file
// is an Error naming the path, what it is, and what was expected.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {
// What a file that is not a regular file is, in words.
inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

inline void require_regular(const std::string& path, mode_t mode, const char* expected) {
  require(S_ISREG(mode), path, ": ", file_kind(mode), ", expected a regular file (", expected, ")");
}
}  // namespace detail

// Opens `path` read-only and returns its descriptor (the caller closes it),
// or throws Error: "<path>: file does not exist", "<path>: a FIFO (named
// pipe), expected a regular file (<expected>)", ... `expected` names what
// the file should be ("an IDX file").
inline int open_regular_file(const std::string& path, const char* expected) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int err = errno;
    if (err == ENOENT) fail(path, ": file does not exist");
    fail(path, ": file cannot be opened: ", std::strerror(err));
  }
  detail::require_regular(path, info.st_mode, expected);
  // O_NONBLOCK: should the path have become a FIFO since stat, open returns at once.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) fail(path, ": file does not exist");
    fail(path, ": file cannot be opened: ", std::strerror(err));
  }
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, ": file cannot be examined: ", std::strerror(err));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    detail::require_regular(path, info.st_mode, expected);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags != -1) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// The whole of the regular file `path` (open_regular_file's checks and messages).
inline std::string read_regular_file(const std::string& path, const char* expected) {
  const int fd = open_regular_file(path, expected);
  std::string bytes;
  try {
    struct stat info {};
    if (::fstat(fd, &info) == 0 && info.st_size > 0) bytes.reserve(static_cast<std::size_t>(info.st_size));
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        fail(path, ": read failed: ", std::strerror(err));
      }
      bytes.append(buffer, static_cast<std::size_t>(n));
    }
  } catch (const std::bad_alloc&) {
    ::close(fd);
    fail(path, ": the file does not fit in memory (", bytes.size(), " bytes read)");
  } catch (const std::length_error&) {
    ::close(fd);
    fail(path, ": the file is too large to read into memory");
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return bytes;
}

}  // namespace lockstep
