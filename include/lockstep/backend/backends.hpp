// Backend tags. A backend owns memory, streams, GEMM and element-wise launches;
// strategies pick one through their collective (HostAllReduce -> Host).
#pragma once

namespace lockstep {

// CPU threads in shared memory: include/lockstep/backend/host/.
struct Host {
  static constexpr const char* kName = "host";
};

// CUDA devices: include/lockstep/backend/cuda/ (declared here so that policy
// types naming it are valid in a host-only build).
struct Cuda;

}  // namespace lockstep
