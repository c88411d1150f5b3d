// The safetensors format (Hugging Face's): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, an
// optional "__metadata__" object of strings, then the raw little-endian data.
// Files written here load with Python's safetensors.numpy.load_file, and
// files it writes load here. Writing is atomic (a temporary file in the same
// folder, flushed and fsynced, renamed over the old one, the folder fsynced),
// so a crash or a full disk never leaves a half-written file where a good
// one was. Reading checks every length and range against the file before
// touching data: a truncated, corrupt or foreign file is a lockstep::Error
// naming the file, the tensor and what was expected. A file may carry a
// CRC-32C of all its bytes in __metadata__ (checkpoints do: crc_key below).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/atomic_file.hpp"
#include "lockstep/core/crc32c.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/input_file.hpp"
#include "lockstep/io/json.hpp"

namespace lockstep::io {

// One tensor to write: its bytes are `bytes` from `data`, in host (little-endian) order.
struct TensorView {
  std::string name;
  std::string dtype;  // "F32" or "I64"
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

namespace detail {
inline bool little_endian() {
  const std::uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}
inline std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}
inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}
inline std::string crc_text(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(crc));
  return text;
}
[[noreturn]] inline void fail_errno(const std::string& what, const std::string& path) {
  const int e = errno;
  fail(what, " '", path, "': ", std::strerror(e));
}
}  // namespace detail

// Writes `tensors` and `metadata` to `path`, atomically. With a `crc_key`,
// __metadata__[crc_key] is the CRC-32C of the whole file (8 hex digits),
// computed with those digits written as "00000000": every byte is covered,
// the header too, and Python's safetensors reads the file as before.
// SafetensorsFile::check_crc32c checks it.
inline void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata, const std::string& crc_key = {}) {
  require(detail::little_endian(), "safetensors: this machine is big-endian; the format is little-endian");
  std::map<std::string, std::string> meta = metadata;
  if (!crc_key.empty()) meta[crc_key] = "00000000";
  std::string header = "{";
  if (!meta.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : meta) {
      header += (first ? "" : ",") + json_string(k) + ":" + json_string(v);
      first = false;
    }
    header += "}";
  }
  std::size_t offset = 0;
  for (const TensorView& t : tensors) {
    require(t.bytes == 0 || t.data, "safetensors: tensor '", t.name, "' has no data");
    if (header.size() > 1) header += ",";
    header += json_string(t.name) + ":{\"dtype\":" + json_string(t.dtype) + ",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';  // the data starts 8-byte aligned, as safetensors writes it

  const std::uint64_t length = header.size();
  if (!crc_key.empty()) {  // the metadata comes first, so the first match is the placeholder
    const std::size_t digits = header.find(json_string(crc_key) + ":\"00000000\"") + json_string(crc_key).size() + 2;
    std::uint32_t crc = crc32c(header, crc32c(&length, sizeof length));
    for (const TensorView& t : tensors) crc = crc32c(t.data, t.bytes, crc);
    header.replace(digits, 8, detail::crc_text(crc));
  }
  AtomicFile file(path, "safetensors");
  file.write(&length, sizeof length);
  file.write(header);
  for (const TensorView& t : tensors) file.write(t.data, t.bytes);
  file.commit();
}

// A safetensors file read whole and checked: its header parsed, every
// tensor's byte range inside the data.
class SafetensorsFile {
 public:
  struct Entry {
    std::string dtype;
    std::vector<std::int64_t> shape;
    std::size_t begin = 0, end = 0;  // within the data
  };

  explicit SafetensorsFile(const std::string& path) : path_(path) {
    require(detail::little_endian(), "safetensors: this machine is big-endian; the format is little-endian");
    // Only a regular file: a FIFO or /dev/zero would block or never end.
    bytes_ = read_regular_file(path, "a safetensors file");
    require(bytes_.size() >= 8, path_, ": ", bytes_.size(),
            " bytes, too short for a safetensors file (an 8-byte header length, then the header)");
    std::uint64_t length = 0;
    std::memcpy(&length, bytes_.data(), 8);
    require(length >= 2 && length <= bytes_.size() - 8, path_, ": the header length is ", length, " bytes but only ",
            bytes_.size() - 8, " follow: the file is truncated or not a safetensors file");
    const Json header = parse_json(bytes_.substr(8, static_cast<std::size_t>(length)), path_ + " (header)");
    require(header.type == Json::Type::kObject, path_, ": the header is not a JSON object");
    data_at_ = 8 + static_cast<std::size_t>(length);
    const std::size_t data_size = bytes_.size() - data_at_;
    // A file cut short says so with its sizes before any tensor is looked at.
    double described = 0;
    for (const auto& [name, j] : header.members)
      if (const Json* offsets = j.find("data_offsets"); offsets && offsets->items.size() == 2)
        described = std::max(described, offsets->items[1].number);
    require(described <= static_cast<double>(data_size), path_, ": ", bytes_.size(), " bytes, but its header describes ",
            data_at_ + static_cast<std::size_t>(described), ": the file is truncated or corrupt");
    for (const auto& [name, j] : header.members) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : j.members)
          if (v.type == Json::Type::kString) metadata_[k] = v.text;
        continue;
      }
      Entry e;
      const Json* dtype = j.find("dtype");
      const Json* shape = j.find("shape");
      const Json* offsets = j.find("data_offsets");
      require(dtype && dtype->type == Json::Type::kString && shape && shape->type == Json::Type::kArray && offsets &&
                  offsets->type == Json::Type::kArray && offsets->items.size() == 2,
              path_, ": tensor '", name, "' lacks dtype, shape or data_offsets [begin, end]");
      e.dtype = dtype->text;
      // The element count must not wrap around: dimensions whose product
      // overflows could otherwise match the byte range by accident.
      std::size_t count = 1;
      bool overflow = false;
      for (const Json& d : shape->items) {
        require(d.type == Json::Type::kNumber && d.number >= 0 && d.number < 1e15 && d.number == std::floor(d.number),
                path_, ": tensor '", name, "' has a dimension that is not a count");
        const auto dim = static_cast<std::size_t>(d.number);
        e.shape.push_back(static_cast<std::int64_t>(dim));
        if (dim != 0 && count > SIZE_MAX / dim) overflow = true;
        count *= dim;
      }
      require(!overflow, path_, ": tensor '", name, "' has shape ", detail::shape_text(e.shape),
              ", more elements than memory can hold: the file is corrupt");
      const Json& first = offsets->items[0];
      const Json& last = offsets->items[1];
      const double b = first.number, en = last.number;
      require(first.type == Json::Type::kNumber && last.type == Json::Type::kNumber && b >= 0 && en >= b &&
                  en <= static_cast<double>(data_size) && b == std::floor(b) && en == std::floor(en),
              path_, ": tensor '", name, "' claims bytes [", b, ", ", en, ") of a data section of ", data_size,
              " bytes: the file is truncated or corrupt");
      e.begin = static_cast<std::size_t>(b);
      e.end = static_cast<std::size_t>(en);
      const std::size_t size = detail::dtype_size(e.dtype);
      require(size == 0 || (count <= SIZE_MAX / size && e.end - e.begin == count * size), path_, ": tensor '", name, "' has ", e.end - e.begin,
              " bytes, but ", e.dtype, " of shape ", detail::shape_text(e.shape), " needs ", count * size);
      entries_.emplace(name, std::move(e));
    }
  }

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }

  // The metadata value `key`, or an Error naming what is missing.
  const std::string& metadata(const std::string& key) const {
    const auto it = metadata_.find(key);
    require(it != metadata_.end(), path_, ": no '", key, "' in the header's __metadata__");
    return it->second;
  }

  // Checks __metadata__[key] (written by write_safetensors with crc_key =
  // key) against the CRC-32C of the file's bytes.
  void check_crc32c(const std::string& key) const {
    const std::string& recorded = metadata(key);
    require(recorded.size() == 8 && recorded.find_first_not_of("0123456789abcdef") == std::string::npos, path_,
            ": __metadata__ '", key, "' is '", recorded, "', expected the 8 hex digits of a CRC-32C");
    const std::string field = json_string(key) + ":\"" + recorded + "\"";
    const std::size_t at = bytes_.find(field, 8);
    require(at != std::string::npos && at + field.size() <= data_at_, path_, ": its '", key,
            "' is not where lockstep writes it: the header was altered");
    const std::size_t digits = at + field.size() - 9;
    std::uint32_t crc = crc32c(bytes_.data(), digits);
    crc = crc32c("00000000", 8, crc);
    crc = crc32c(bytes_.data() + digits + 8, bytes_.size() - digits - 8, crc);
    require(detail::crc_text(crc) == recorded, path_, ": bad CRC-32C: the header records ", recorded,
            ", the contents give ", detail::crc_text(crc), ": the file is corrupt");
  }

  // Copies tensor `name` into `out`, after checking its dtype and shape.
  template <class T>
  void read(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape, T* out) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) {
      std::string names;
      for (const auto& [n, e] : entries_) names += (names.empty() ? "" : ", ") + n;
      fail(path_, ": no tensor '", name, "' (this model expects it; the file has: ", names.empty() ? "none" : names,
           ")");
    }
    const Entry& e = it->second;
    require(e.dtype == dtype, path_, ": tensor '", name, "' has dtype ", e.dtype, ", expected ", dtype);
    require(e.shape == shape, path_, ": tensor '", name, "' has shape ", detail::shape_text(e.shape), ", expected ",
            detail::shape_text(shape));
    if (e.end > e.begin) std::memcpy(out, bytes_.data() + data_at_ + e.begin, e.end - e.begin);
  }

 private:
  std::string path_;
  std::string bytes_;
  std::size_t data_at_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lockstep::io
