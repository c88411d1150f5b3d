// Which CUDA devices exist and whether a strategy may place replicas on them.
// Mirrored strategies check their device list once, before anything is
// allocated, so a typo in a device index is an Error naming the index and the
// devices that do exist, not a cudaErrorInvalidDevice from deep inside a step.
// describe_placement prints where each replica runs, as TensorFlow's device
// placement log does.
#pragma once

#include <cstddef>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/cuda/check.cuh"
#include "lockstep/core/error.hpp"

namespace lockstep::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;
  std::size_t memory_bytes = 0;

  // "9.0" for an H100/H200.
  std::string compute_capability() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// Whether replicas may run on GPUs of different compute capabilities. They then
// run different kernels (and different cuBLAS algorithms), so the replicas'
// results are not bit-identical and the slowest GPU sets the step time: an
// Error by default, a warning when asked for.
using ::lockstep::Heterogeneous;  // kError or kAllow (backend/backends.hpp)

namespace detail {

// The errors cudaGetDeviceCount returns when this machine simply has no usable
// GPU (no device, no driver, or only the toolkit's stub libcuda): a CPU-only
// machine, which callers treat as "0 devices" rather than as a failure.
inline bool means_no_device(cudaError_t status) {
  return status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary;
}

// The device count, and in `why` the reason when it is 0 because of an error.
inline int device_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  (void)cudaGetLastError();  // clear it so that later, unrelated checks do not report it
  if (means_no_device(status)) {
    if (why) *why = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
    return 0;
  }
  check_cuda(status, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
  return 0;
}

// "1 CUDA device is visible (indices 0..0)", or why none is.
inline std::string visible_summary(int count, const std::string& why) {
  std::ostringstream out;
  if (count == 0) {
    out << "no CUDA device is visible";
    if (!why.empty()) out << " (" << why << ")";
    out << "; check the driver with nvidia-smi, and note that CUDA_VISIBLE_DEVICES may hide devices";
  } else {
    out << count << (count == 1 ? " CUDA device is" : " CUDA devices are") << " visible (indices 0.." << count - 1
        << ")";
  }
  return out.str();
}

inline void require_exists(const char* who, int index, int count, const std::string& why) {
  if (index >= 0 && index < count) return;
  fail(who, ": device ", index, " does not exist: ", visible_summary(count, why));
}

inline std::string describe_one(const DeviceInfo& d) {
  return ::lockstep::detail::concat("GPU ", d.index, " (", d.name, ", compute ", d.compute_capability(), ")");
}

// Throws (kError) or warns on `log` (kAllow) when `infos` mix compute
// capabilities. Separate from check_devices so that it can be tested with
// made-up devices on a machine with one kind of GPU.
inline void check_same_capability(const std::vector<DeviceInfo>& infos, Heterogeneous policy, std::ostream* log) {
  constexpr const char* kWho = "MirroredPolicy";
  bool mixed = false;
  for (const DeviceInfo& d : infos) mixed = mixed || d.major != infos[0].major || d.minor != infos[0].minor;
  if (!mixed) return;
  std::ostringstream list;
  for (std::size_t i = 0; i < infos.size(); ++i) list << (i ? ", " : "") << describe_one(infos[i]);
  const std::string what = ::lockstep::detail::concat(
      kWho, ": the devices have different compute capabilities: ", list.str(),
      "; their replicas run different kernels, so their results differ in rounding and the slowest GPU sets the "
      "step time");
  if (policy == Heterogeneous::kError)
    fail(what, ". Expected devices of one compute capability; pass Heterogeneous::kAllow to make this a warning");
  std::ostream& out = log ? *log : std::cerr;
  out << "lockstep: warning: " << what << " (allowed by Heterogeneous::kAllow)\n";
}

}  // namespace detail

// How many CUDA devices this process sees (after CUDA_VISIBLE_DEVICES). 0, not
// an Error, on a machine without a GPU or a driver.
inline int visible_devices() { return detail::device_count(nullptr); }

// {0, 1, ..., visible_devices() - 1}: the default device list of MirroredPolicy.
inline std::vector<int> all_visible_devices() {
  std::vector<int> devices(static_cast<std::size_t>(visible_devices()));
  for (std::size_t i = 0; i < devices.size(); ++i) devices[i] = static_cast<int>(i);
  return devices;
}

inline DeviceInfo device_info(int index) {
  std::string why;
  detail::require_exists("device_info", index, detail::device_count(&why), why);
  cudaDeviceProp prop{};
  LOCKSTEP_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.memory_bytes = prop.totalGlobalMem;
  return info;
}

// Checks a strategy's device list and returns the devices' descriptions, in
// the list's order (replica r runs on devices[r]). Throws lockstep::Error for
// an empty list, an index that does not exist, an index listed twice (unless
// `shared` says the collective lets replicas share a GPU, as the copy-based
// ones do), and, unless `policy` is kAllow, for devices of different compute
// capabilities; with kAllow that becomes a warning on `log` (std::cerr when null).
inline std::vector<DeviceInfo> check_devices(const std::vector<int>& devices,
                                             Heterogeneous policy = Heterogeneous::kError,
                                             std::ostream* log = nullptr, bool shared = false) {
  constexpr const char* kWho = "MirroredPolicy";
  std::string why;
  const int count = detail::device_count(&why);
  require(!devices.empty(), kWho, ": the device list is empty, expected at least one CUDA device index: ",
          detail::visible_summary(count, why), " (all_visible_devices() lists them all)");
  std::set<int> seen;
  for (int index : devices) {
    detail::require_exists(kWho, index, count, why);
    require(seen.insert(index).second || shared, kWho, ": device ", index,
            " is listed more than once, expected each device at most once (one replica per GPU; "
            "HierarchicalCopyAllReduce and ReductionToOneDevice let replicas share a GPU)");
  }

  std::vector<DeviceInfo> infos;
  infos.reserve(devices.size());
  for (int index : devices) infos.push_back(device_info(index));

  detail::check_same_capability(infos, policy, log);
  return infos;
}

// One line per replica, e.g.
//   replica 0 -> /GPU:0 NVIDIA H200 (compute 9.0, 139.8 GiB)
inline std::string describe_placement(const std::vector<DeviceInfo>& devices) {
  std::ostringstream out;
  for (std::size_t r = 0; r < devices.size(); ++r) {
    const DeviceInfo& d = devices[r];
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
    out << "replica " << r << " -> /GPU:" << d.index << " " << d.name << " (compute " << d.compute_capability()
        << ", " << gib << " GiB)\n";
  }
  return out.str();
}

}  // namespace lockstep::gpu
