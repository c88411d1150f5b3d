// A float's or double's bits as an unsigned integer of its size, and back,
// written once for every place that needs them: TensorBoard's event files
// (observe/event_file.hpp) write a value's bits, and the host's max pooling
// backward (backend/host/pool.hpp) compares and selects on them.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace lockstep {

template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

template <class T>
BitsOf<T> bits_of(T value) {
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "bits_of: T must be float or double");
  BitsOf<T> bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

template <class T>
T from_bits(BitsOf<T> bits) {
  static_assert(std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "from_bits: T must be float or double");
  T value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace lockstep
