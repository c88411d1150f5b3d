// 64-byte aligned, owning float storage for one replica's parameters,
// gradients, optimizer slots and activations. Allocated once, before the step.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "lockstep/core/error.hpp"

namespace lockstep::host {

// This machine's physical memory in bytes (0 where the system does not say):
// what buffers sized from a batch are checked against before they are
// allocated, since on Linux an allocation far beyond it may still succeed
// and the process is then killed when the memory is first touched.
inline double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

// "6739195019264 bytes (6.1 TiB)": a byte count in full, then readably.
inline std::string byte_count(double bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double scaled = bytes;
  std::size_t unit = 0;
  while (scaled >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
    scaled /= 1024.0;
    ++unit;
  }
  char text[96];
  std::snprintf(text, sizeof text, "%.0f bytes (%.1f %s)", bytes, scaled, units[unit]);
  return text;
}

template <class T>
class AlignedBuffer {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line; enough for AVX-512

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t size) { resize(size); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  // Discards the contents; new storage is zero-filled.
  void resize(std::size_t size) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (size == 0) return;
    require(size <= (SIZE_MAX - kAlignment) / sizeof(T), "host buffer: ", size, " values of ", sizeof(T),
            " bytes exceed the address space");
    const std::size_t bytes = (size * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
    if (!data_) fail("host buffer: could not allocate ", bytes, " bytes");
    std::memset(static_cast<void*>(data_), 0, bytes);
    size_ = size;
  }

  void fill_zero() {
    if (size_) std::memset(static_cast<void*>(data_), 0, size_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void swap(AlignedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace lockstep::host
