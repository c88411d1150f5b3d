// finish_output: whether everything a program printed reached stdout. A
// full disk or a closed pipe makes printf and std::cout fail silently, and a
// result that was never written must not end in exit status 0: programs end
// with `return lockstep::finish_output("name", status);` (the example, the
// benchmarks), which flushes both, says on stderr what failed, and turns a
// status of 0 into 1.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace lockstep {

inline int finish_output(const char* program, int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout;
  if (!failed) return status;
  const int err = errno;
  std::fprintf(stderr, "%s: the output could not be written to stdout%s%s\n", program, err ? ": " : "",
               err ? std::strerror(err) : "");
  return status != 0 ? status : 1;
}

}  // namespace lockstep
