// Shared by the libFuzzer targets: lockstep's readers take a path, so each
// input is written to one temporary file of this process (named once,
// removed at exit), and the readers open that.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep_fuzz {

inline const std::string& temp_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/lockstep-fuzz-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) {
      std::perror("lockstep fuzz: mkstemp");
      std::abort();
    }
    ::close(fd);
    return pattern;
  }();
  static const bool cleanup = [] { return std::atexit([] { ::unlink(temp_path().c_str()); }) == 0; }();
  (void)cleanup;
  return path;
}

// The input as the whole content of temp_path(); aborts (a finding) if the
// machine cannot write it, which is no fault of the reader.
inline const std::string& write_input(const std::uint8_t* data, std::size_t size) {
  const std::string& path = temp_path();
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return path;
}

}  // namespace lockstep_fuzz
