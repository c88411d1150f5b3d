// TensorBoard event files, written without TensorFlow or protobuf: the
// TFRecord framing (with its masked CRC-32C), the few protocol buffer
// messages TensorBoard reads for scalars and histograms, encoded by hand,
// and EventFileWriter, which writes them to events.out.tfevents.* files.
//
// The messages and their field numbers are those of tensorboard/compat/proto
// (event.proto, summary.proto, histogram.proto):
//   Event          wall_time = 1 (double), step = 2 (int64),
//                  file_version = 3 (string), summary = 5 (Summary)
//   Summary        value = 1 (repeated Summary.Value)
//   Summary.Value  tag = 1 (string), simple_value = 2 (float),
//                  histo = 5 (HistogramProto)
//   HistogramProto min = 1, max = 2, num = 3, sum = 4, sum_squares = 5
//                  (doubles), bucket_limit = 6, bucket = 7 (packed doubles)
// Fields are written in field-number order and, as proto3 serializers do,
// plain fields holding zero are left out (members of a oneof never are), so
// the bytes are those Python's protobuf writes for the same message.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "lockstep/core/bits.hpp"
#include "lockstep/core/crc32c.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep::observe {

// ---- CRC-32C (Castagnoli), as TFRecord checks its records: core/crc32c.hpp ----

using lockstep::crc32c;

// TFRecord's masked CRC: a CRC stored next to the data it covers is rotated and
// offset, so that a CRC of bytes that themselves hold CRCs stays well mixed.
inline std::uint32_t masked_crc32c(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---- Protocol buffer encoding: wire types 0 (varint), 1 (fixed64), 2 (length-delimited), 5 (fixed32) ----

namespace proto {

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline void put_fixed32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}
inline void put_fixed64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}
inline void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}

// Fields, written whatever their value (a oneof member, or a caller that checked).
inline void put_int64(std::string& out, int field, std::int64_t v) {
  put_key(out, field, 0);
  put_varint(out, static_cast<std::uint64_t>(v));  // negative: ten bytes, as proto3 writes int64
}
inline void put_double(std::string& out, int field, double v) {
  put_key(out, field, 1);
  put_fixed64(out, bits_of(v));
}
inline void put_float(std::string& out, int field, float v) {
  put_key(out, field, 5);
  put_fixed32(out, bits_of(v));
}
inline void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}
// A packed repeated double: one length-delimited field of fixed64 values; none when empty.
inline void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  if (values.empty()) return;
  put_key(out, field, 2);
  put_varint(out, values.size() * 8);
  for (double v : values) put_fixed64(out, bits_of(v));
}
// proto3 leaves out a plain field that holds its default (all bits zero: -0.0 is written).
inline void put_double_unless_zero(std::string& out, int field, double v) {
  if (bits_of(v) != 0) put_double(out, field, v);
}

}  // namespace proto

// ---- The messages ----

// tensorboard.HistogramProto. bucket[i] counts the values in
// (bucket_limit[i-1], bucket_limit[i]] (from -DBL_MAX for i = 0).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

// The histogram of `values` in `buckets` equal buckets between their min and
// max (TensorFlow 2's tf.summary.histogram takes 30); all values alike make
// one bucket. Non-finite values (a diverged run's NaN weights) are left out,
// since no bucket holds them: num counts the finite values only.
inline Histogram make_histogram(const float* values, std::size_t count, int buckets = 30) {
  require(buckets >= 1, "make_histogram: ", buckets, " buckets, expected at least 1");
  Histogram h;
  bool any = false;
  for (std::size_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(values[i]);
    if (!std::isfinite(v)) continue;
    h.min = any ? std::min(h.min, v) : v;
    h.max = any ? std::max(h.max, v) : v;
    any = true;
    h.num += 1;
    h.sum += v;
    h.sum_squares += v * v;
  }
  if (!any) return h;
  const std::size_t n = h.max > h.min ? static_cast<std::size_t>(buckets) : 1;
  const double width = (h.max - h.min) / static_cast<double>(n);
  h.bucket.assign(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) h.bucket_limit.push_back(h.min + width * static_cast<double>(i + 1));
  h.bucket_limit.back() = h.max;  // exactly, whatever the rounding of the sums above
  for (std::size_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(values[i]);
    if (!std::isfinite(v)) continue;
    std::size_t b = n == 1 ? 0 : static_cast<std::size_t>((v - h.min) / width);
    if (b >= n) b = n - 1;  // the max itself belongs to the last bucket
    h.bucket[b] += 1;
  }
  return h;
}
inline Histogram make_histogram(const std::vector<float>& values, int buckets = 30) {
  return make_histogram(values.data(), values.size(), buckets);
}

namespace proto {
inline std::string encode(const Histogram& h) {
  std::string out;
  put_double_unless_zero(out, 1, h.min);
  put_double_unless_zero(out, 2, h.max);
  put_double_unless_zero(out, 3, h.num);
  put_double_unless_zero(out, 4, h.sum);
  put_double_unless_zero(out, 5, h.sum_squares);
  put_packed_doubles(out, 6, h.bucket_limit);
  put_packed_doubles(out, 7, h.bucket);
  return out;
}
}  // namespace proto

// A serialized tensorboard.Event holding the file's version (the first record of every file).
inline std::string encode_file_version_event(double wall_time, const std::string& version = "brain.Event:2") {
  std::string out;
  proto::put_double_unless_zero(out, 1, wall_time);
  proto::put_bytes(out, 3, version);
  return out;
}

namespace proto {
inline std::string summary_event(double wall_time, std::int64_t step, const std::string& value) {
  std::string summary;
  proto::put_bytes(summary, 1, value);
  std::string out;
  proto::put_double_unless_zero(out, 1, wall_time);
  if (step != 0) proto::put_int64(out, 2, step);
  proto::put_bytes(out, 5, summary);
  return out;
}
}  // namespace proto

// A serialized tensorboard.Event of one Summary.Value with simple_value: a scalar.
inline std::string encode_scalar_event(double wall_time, std::int64_t step, const std::string& tag, float value) {
  std::string v;
  if (!tag.empty()) proto::put_bytes(v, 1, tag);
  proto::put_float(v, 2, value);
  return proto::summary_event(wall_time, step, v);
}

// A serialized tensorboard.Event of one Summary.Value with histo.
inline std::string encode_histogram_event(double wall_time, std::int64_t step, const std::string& tag,
                                          const Histogram& h) {
  std::string v;
  if (!tag.empty()) proto::put_bytes(v, 1, tag);
  proto::put_bytes(v, 5, proto::encode(h));
  return proto::summary_event(wall_time, step, v);
}

// One TFRecord: the data's length (uint64, little-endian), the masked CRC-32C
// of those 8 bytes, the data, the masked CRC-32C of the data (each uint32 LE).
inline std::string tfrecord(const std::string& data) {
  std::string out;
  proto::put_fixed64(out, data.size());
  proto::put_fixed32(out, masked_crc32c(crc32c(out.data(), 8)));
  out += data;
  proto::put_fixed32(out, masked_crc32c(crc32c(data)));
  return out;
}

// ---- Files ----

// Appends TFRecords to one file; an Error names the file and the OS's reason.
// Records are buffered: flush() (and the destructor) put them in the file.
class RecordWriter {
 public:
  // Creates (or truncates) `path`; `exclusive`: an Error if it exists already.
  explicit RecordWriter(std::string path, bool exclusive = false) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), exclusive ? "wbx" : "wb");
    if (!file_) fail("event file: cannot create '", path_, "': ", std::strerror(errno));
  }
  ~RecordWriter() {
    if (file_) std::fclose(file_);  // flushes; a destructor reports nothing (call close() to hear of errors)
  }
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  RecordWriter(RecordWriter&& other) noexcept
      : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}
  RecordWriter& operator=(RecordWriter&& other) noexcept {
    if (this != &other) {
      if (file_) std::fclose(file_);
      path_ = std::move(other.path_);
      file_ = std::exchange(other.file_, nullptr);
    }
    return *this;
  }

  void write(const std::string& data) {
    require(file_ != nullptr, "event file: '", path_, "' is closed, expected it open to write a record");
    const std::string record = tfrecord(data);
    errno = 0;
    if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
      fail("event file: cannot write to '", path_, "': ", reason());
  }
  void flush() {
    if (!file_) return;
    errno = 0;
    if (std::fflush(file_) != 0) fail("event file: cannot write to '", path_, "': ", reason());
  }
  // Flushes and closes the file; an Error if its last bytes could not be written.
  void close() {
    if (!file_) return;
    std::FILE* f = file_;
    file_ = nullptr;
    errno = 0;
    const bool flushed = std::fflush(f) == 0;
    const int flush_errno = errno;
    const bool closed = std::fclose(f) == 0;
    if (!flushed || !closed) {
      if (!flushed) errno = flush_errno;
      fail("event file: cannot write to '", path_, "': ", reason());
    }
  }
  const std::string& path() const { return path_; }

 private:
  static const char* reason() { return errno != 0 ? std::strerror(errno) : "the write came up short"; }
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Seconds since the Unix epoch, as Event.wall_time holds them.
inline double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// An event file in `dir` (created, with its parents, as Keras creates its log
// directories): events.out.tfevents.<unix seconds>.<hostname>.<pid>.lockstep,
// TensorBoard's naming (it reads every file whose name holds "tfevents"). A
// second file of the same second and process in one directory is not put in
// place of the first: it gets ".0001" (then ".0002"...) after ".lockstep".
// Its first record is the Event file_version "brain.Event:2".
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& dir) : writer_(create(dir)) {
    writer_.write(encode_file_version_event(wall_time_now()));
    writer_.flush();  // a reader sees a valid file from the start
  }

  void add_scalar(const std::string& tag, std::int64_t step, double value) {
    writer_.write(encode_scalar_event(wall_time_now(), step, tag, static_cast<float>(value)));
  }
  // The histogram of `values`: 30 equal buckets between their min and max.
  void add_histogram(const std::string& tag, std::int64_t step, const float* values, std::size_t count) {
    writer_.write(encode_histogram_event(wall_time_now(), step, tag, make_histogram(values, count)));
  }
  void add_histogram(const std::string& tag, std::int64_t step, const std::vector<float>& values) {
    add_histogram(tag, step, values.data(), values.size());
  }
  // An already serialized Event.
  void add_event(const std::string& event) { writer_.write(event); }

  void flush() { writer_.flush(); }
  void close() { writer_.close(); }
  const std::string& path() const { return writer_.path(); }

 private:
  static RecordWriter create(const std::string& dir) {
    require(!dir.empty(), "EventFileWriter: an empty directory name, expected the directory to write events to");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail("EventFileWriter: cannot create the directory '", dir, "': ", ec.message());
    require(std::filesystem::is_directory(dir, ec), "EventFileWriter: '", dir,
            "' exists and is not a directory, expected a directory to write events to");
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
    const long long seconds = static_cast<long long>(std::time(nullptr));
    const std::string stem = (std::filesystem::path(dir) / "events.out.tfevents.").string() + std::to_string(seconds) +
                             "." + host + "." + std::to_string(static_cast<long long>(getpid()));
    const std::string first = stem + ".lockstep";
    if (!std::filesystem::exists(first, ec)) return RecordWriter(first, true);
    // Later files sort after the first, as TensorBoard reads a run's files in name order.
    for (int n = 1;; ++n) {
      char suffix[16];
      std::snprintf(suffix, sizeof suffix, ".%04d", n);
      const std::string path = first + suffix;
      if (n < 9999 && std::filesystem::exists(path, ec)) continue;
      return RecordWriter(path, true);
    }
  }

  RecordWriter writer_;
};

}  // namespace lockstep::observe
