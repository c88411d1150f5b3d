// RAII device and pinned host memory. A DeviceBuffer belongs to the device
// that was current when it was allocated, and frees there; a PinnedBuffer is
// page-locked host memory, the source of asynchronous host-to-device copies.
// Both have the host::AlignedBuffer interface (resize, data, size), so the
// model's workspace and the optimizer states are written once for both.
#pragma once

#include <cstddef>
#include <cstring>
#include <utility>

#include "lockstep/backend/cuda/check.cuh"

namespace lockstep::gpu {

namespace detail {
struct DeviceMemory {
  static void* allocate(std::size_t bytes, int& device) {
    LOCKSTEP_CUDA_CHECK(cudaGetDevice(&device));
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error so later calls work
      fail("device buffer: could not allocate ", bytes, " bytes on GPU ", device, ": ", cudaGetErrorString(status));
    }
    // cudaMemset runs on the default stream, which the replicas' non-blocking
    // streams do not wait for: finish it here, so no later copy races with it.
    LOCKSTEP_CUDA_CHECK(cudaMemset(p, 0, bytes));
    LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    return p;
  }
  static void release(void* p, int device) noexcept {
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return;
    if (current != device) cudaSetDevice(device);
    cudaFree(p);
    if (current != device) cudaSetDevice(current);
  }
};
struct PinnedMemory {
  static void* allocate(std::size_t bytes, int&) {
    void* p = nullptr;
    const cudaError_t status = cudaMallocHost(&p, bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      fail("pinned host buffer: could not allocate ", bytes, " bytes: ", cudaGetErrorString(status));
    }
    std::memset(p, 0, bytes);
    return p;
  }
  static void release(void* p, int) noexcept { cudaFreeHost(p); }
};

template <class T, class Memory>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t size) { resize(size); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~Buffer() { reset(); }

  // Discards the contents; new storage is zero-filled.
  void resize(std::size_t size) {
    reset();
    if (size == 0) return;
    data_ = static_cast<T*>(Memory::allocate(size * sizeof(T), device_));
    size_ = size;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  int device() const { return device_; }

 private:
  void reset() noexcept {
    if (data_) Memory::release(data_, device_);
    data_ = nullptr;
    size_ = 0;
  }
  void swap(Buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(device_, other.device_);
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = -1;
};
}  // namespace detail

// Memory on the current device.
template <class T>
using DeviceBuffer = detail::Buffer<T, detail::DeviceMemory>;
// Page-locked host memory, readable by every device's copy engines.
template <class T>
using PinnedBuffer = detail::Buffer<T, detail::PinnedMemory>;

}  // namespace lockstep::gpu
