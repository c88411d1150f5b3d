// Backend tags (core: every room may name them). A backend owns memory, streams, GEMM and element-wise launches;
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

// CUDA devices: include/lockstep/backend/cuda/, brought by <lockstep/cuda.hpp>
// and compiled by nvcc. The tag is defined here so that policy types naming
// it are valid in a host-only build.
struct Cuda {
  static constexpr const char* kName = "cuda";
};

// What a strategy does when its GPUs differ in compute capability: refuse
// (the default: their kernels and speeds differ, so replicas would not run in
// step), or allow it with a warning.
enum class Heterogeneous { kError, kAllow };

}  // namespace lockstep
