// CRC-32C (Castagnoli), written once for every file that carries one: the
// TFRecord framing of TensorBoard's event files (observe/event_file.hpp) and
// the checksum of lockstep's checkpoints (io/checkpoint.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep {

namespace detail {
inline constexpr std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<std::uint32_t, 256> kCrc32cTable = crc32c_table();
}  // namespace detail

// CRC-32C of `size` bytes (reflected polynomial 0x82F63B78, one table lookup
// a byte). `previous` is the CRC of the bytes before these, so that a file
// written in pieces is checked without joining them:
// crc32c(b, crc32c(a)) == crc32c(a + b).
inline std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t previous = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = previous ^ 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = detail::kCrc32cTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}
inline std::uint32_t crc32c(const std::string& bytes, std::uint32_t previous = 0) {
  return crc32c(bytes.data(), bytes.size(), previous);
}

}  // namespace lockstep
