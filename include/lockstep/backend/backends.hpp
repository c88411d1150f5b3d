// Backend tags. A backend owns memory, streams, GEMM and element-wise launches;
// strategies pick one through their collective (HostAllReduce -> Host).
#pragma once

#include <thread>

namespace lockstep {

// CPU threads in shared memory: include/lockstep/backend/host/.
struct Host {
  static constexpr const char* kName = "host";
  // The hardware threads this machine offers (at least 1): the default
  // replica count of host strategies and the cores the BLAS may share out.
  static int hardware_threads() {
    const unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
  }
};

// CUDA devices: include/lockstep/backend/cuda/ (declared here so that policy
// types naming it are valid in a host-only build).
struct Cuda;

}  // namespace lockstep
