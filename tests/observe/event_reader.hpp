// A small reader of TensorBoard event files for the tests, written apart from
// the encoder it checks: it parses the TFRecord framing, checks both masked
// CRCs of every record, and decodes the Event fields the encoder writes
// (skipping any others, as a protobuf parser does).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/observe/event_file.hpp"

namespace lockstep::testing {

struct ReadValue {
  std::string tag;
  bool has_simple_value = false, has_histo = false;
  float simple_value = 0;
  observe::Histogram histo;
};

struct ReadEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<ReadValue> values;
};

namespace reader {

class Cursor {
 public:
  Cursor(const std::string& bytes, std::size_t begin, std::size_t end) : bytes_(bytes), at_(begin), end_(end) {}
  bool done() const { return at_ >= end_; }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      require(at_ < end_, "event reader: a varint runs past its message");
      const auto b = static_cast<unsigned char>(bytes_[at_++]);
      v |= static_cast<std::uint64_t>(b & 0x7Fu) << shift;
      if (!(b & 0x80u)) return v;
    }
    fail("event reader: a varint longer than 10 bytes");
  }
  std::uint64_t fixed(int n) {
    require(at_ + static_cast<std::size_t>(n) <= end_, "event reader: a fixed field runs past its message");
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[at_++])) << (8 * i);
    return v;
  }
  double fixed_double() {
    const std::uint64_t bits = fixed(8);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  float fixed_float() {
    const auto bits = static_cast<std::uint32_t>(fixed(4));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // A length-delimited field: the cursor over it; this cursor moves past it.
  Cursor sub() {
    const std::uint64_t n = varint();
    require(n <= end_ - at_, "event reader: a field of ", n, " bytes runs past its message");
    Cursor c(bytes_, at_, at_ + static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return c;
  }
  std::string text() {
    Cursor c = sub();
    return bytes_.substr(c.at_, c.end_ - c.at_);
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: fixed(8); break;
      case 2: sub(); break;
      case 5: fixed(4); break;
      default: fail("event reader: wire type ", wire_type, " is not one protobuf has");
    }
  }

 private:
  const std::string& bytes_;
  std::size_t at_, end_;
};

inline std::vector<double> packed_doubles(Cursor c) {
  std::vector<double> out;
  while (!c.done()) out.push_back(c.fixed_double());
  return out;
}

inline observe::Histogram histogram(Cursor c) {
  observe::Histogram h;
  while (!c.done()) {
    const std::uint64_t key = c.varint();
    const auto field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7u);
    if (field >= 1 && field <= 5 && wire == 1) {
      const double v = c.fixed_double();
      (field == 1 ? h.min : field == 2 ? h.max : field == 3 ? h.num : field == 4 ? h.sum : h.sum_squares) = v;
    } else if (field == 6 && wire == 2) {
      h.bucket_limit = packed_doubles(c.sub());
    } else if (field == 7 && wire == 2) {
      h.bucket = packed_doubles(c.sub());
    } else {
      c.skip(wire);
    }
  }
  return h;
}

inline ReadValue value(Cursor c) {
  ReadValue v;
  while (!c.done()) {
    const std::uint64_t key = c.varint();
    const auto field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7u);
    if (field == 1 && wire == 2) {
      v.tag = c.text();
    } else if (field == 2 && wire == 5) {
      v.simple_value = c.fixed_float();
      v.has_simple_value = true;
    } else if (field == 5 && wire == 2) {
      v.histo = histogram(c.sub());
      v.has_histo = true;
    } else {
      c.skip(wire);
    }
  }
  return v;
}

}  // namespace reader

// One serialized Event.
inline ReadEvent decode_event(const std::string& bytes) {
  ReadEvent e;
  reader::Cursor c(bytes, 0, bytes.size());
  while (!c.done()) {
    const std::uint64_t key = c.varint();
    const auto field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7u);
    if (field == 1 && wire == 1) {
      e.wall_time = c.fixed_double();
    } else if (field == 2 && wire == 0) {
      e.step = static_cast<std::int64_t>(c.varint());
    } else if (field == 3 && wire == 2) {
      e.file_version = c.text();
    } else if (field == 5 && wire == 2) {
      e.has_summary = true;
      reader::Cursor summary = c.sub();
      while (!summary.done()) {
        const std::uint64_t k = summary.varint();
        if (k == ((1u << 3) | 2u))
          e.values.push_back(reader::value(summary.sub()));
        else
          summary.skip(static_cast<int>(k & 7u));
      }
    } else {
      c.skip(wire);
    }
  }
  return e;
}

// The data of every record of a TFRecord file; an Error where a length or a
// CRC does not match, or the file ends inside a record.
inline std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "event reader: cannot open '", path, "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t at = 0;
  const auto u32 = [&](std::size_t p) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i)
      v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[p + i])) << (8 * i);
    return v;
  };
  while (at < bytes.size()) {
    require(bytes.size() - at >= 12, "event reader: '", path, "' ends inside a record header at byte ", at);
    std::uint64_t length = 0;
    for (std::size_t i = 0; i < 8; ++i)
      length |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    require(u32(at + 8) == observe::masked_crc32c(observe::crc32c(bytes.data() + at, 8)), "event reader: '", path,
            "': the length CRC of the record at byte ", at, " does not match");
    require(bytes.size() - at - 12 >= length + 4, "event reader: '", path, "' ends inside the record at byte ", at);
    const std::size_t n = static_cast<std::size_t>(length);
    std::string data = bytes.substr(at + 12, n);
    require(u32(at + 12 + n) == observe::masked_crc32c(observe::crc32c(data)), "event reader: '", path,
            "': the data CRC of the record at byte ", at, " does not match");
    out.push_back(std::move(data));
    at += 12 + n + 4;
  }
  return out;
}

inline std::vector<ReadEvent> read_events(const std::string& path) {
  std::vector<ReadEvent> out;
  for (const std::string& r : read_records(path)) out.push_back(decode_event(r));
  return out;
}

// The event files of `dir` (names holding "tfevents", as TensorBoard looks for them), sorted.
inline std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().find("tfevents") != std::string::npos) out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace lockstep::testing
