// The TensorBoard event file encoder: CRC-32C and TFRecord's masked CRC on
// known vectors, protobuf field encoding, whole records byte for byte against
// what Python's tensorboard package (its protobuf classes and RecordWriter)
// writes for the same events, histograms, and EventFileWriter's files and
// errors, read back by tests/observe/event_reader.hpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/observe/event_file.hpp"
#include "observe/event_reader.hpp"

using namespace lockstep;
using namespace lockstep::observe;

namespace {
std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}
std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15u]);
  }
  return out;
}
}  // namespace

TEST_CASE("CRC-32C and TFRecord's masked CRC on known vectors") {
  CHECK(crc32c(std::string("123456789")) == 0xE3069283u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);  // RFC 3720 B.4
  CHECK(crc32c(std::string()) == 0u);
  CHECK(masked_crc32c(0xE3069283u) == 0xC78AB0E5u);  // tensorboard's masked_crc32c(b"123456789")
  CHECK(masked_crc32c(0u) == 0xa282ead8u);
}

TEST_CASE("CRC-32C of bytes in pieces equals that of the whole (core/crc32c.hpp, shared with checkpoints)") {
  const std::string all = "123456789";
  for (std::size_t cut = 0; cut <= all.size(); ++cut)
    CHECK(lockstep::crc32c(all.substr(cut), lockstep::crc32c(all.substr(0, cut))) == 0xE3069283u);
}

TEST_CASE("protobuf fields: varints, keys, fixed64, fixed32, length-delimited") {
  std::string out;
  proto::put_varint(out, 300);
  CHECK(to_hex(out) == "ac02");
  out.clear();
  proto::put_int64(out, 2, -2);  // int64: two's complement, ten bytes
  CHECK(to_hex(out) == "10feffffffffffffffff01");
  out.clear();
  proto::put_double(out, 1, 1.0);
  CHECK(to_hex(out) == "09000000000000f03f");
  out.clear();
  proto::put_float(out, 2, 0.25f);
  CHECK(to_hex(out) == "150000803e");
  out.clear();
  proto::put_bytes(out, 3, "ab");
  CHECK(to_hex(out) == "1a026162");
  out.clear();
  proto::put_double_unless_zero(out, 1, 0.0);  // proto3 leaves a zero out...
  CHECK(out.empty());
  proto::put_double_unless_zero(out, 1, -0.0);  // ...but not -0.0, whose bits are not zero
  CHECK(to_hex(out) == "090000000000000080");
}

// The expected bytes below are what tensorboard 2.21's protobuf classes
// serialize (event_pb2.Event(...).SerializeToString()) and, for the whole
// record, what its summary.writer.record_writer.RecordWriter writes.
TEST_CASE("events and a whole record, byte for byte as Python's tensorboard writes them") {
  // Event(wall_time=1700000000.5, step=3, summary={value: [{tag: "epoch_loss", simple_value: 0.25}]})
  const std::string scalar = encode_scalar_event(1700000000.5, 3, "epoch_loss", 0.25f);
  CHECK(to_hex(scalar) == "0900002040fc54d94110032a130a110a0a65706f63685f6c6f7373150000803e");
  CHECK(to_hex(tfrecord(scalar)) ==
        "200000000000000029eda950"                                          // length 32, masked CRC of it
        "0900002040fc54d94110032a130a110a0a65706f63685f6c6f7373150000803e"  // the event
        "277b7e33");                                                        // masked CRC of the event
  CHECK(to_hex(encode_file_version_event(1700000000.5)) == "0900002040fc54d9411a0d627261696e2e4576656e743a32");
  // Step 0 is left out, as proto3 leaves out zeros; a simple_value of 0 is not (it is in a oneof).
  CHECK(to_hex(encode_scalar_event(1.0, 0, "a", 0.0f)) == "09000000000000f03f2a0a0a080a01611500000000");
  CHECK(to_hex(encode_scalar_event(1.0, -2, "a", 1.0f)) ==
        "09000000000000f03f10feffffffffffffffff012a0a0a080a0161150000803f");
  Histogram h;
  h.min = -1.0;
  h.max = 3.0;
  h.num = 4;
  h.sum = 4.0;
  h.sum_squares = 14.0;
  h.bucket_limit = {1.0, 3.0};
  h.bucket = {2.0, 2.0};
  CHECK(to_hex(encode_histogram_event(2.0, 1, "d/k_0/histogram", h)) ==
        "09000000000000004010012a660a640a0f642f6b5f302f686973746f6772616d2a5109000000000000f0bf1100000000000008401900"
        "00000000001040210000000000001040290000000000002c403210000000000000f03f00000000000008403a100000000000000040"
        "0000000000000040");
  // ...and the test's own reader takes them apart again.
  const testing::ReadEvent e = testing::decode_event(from_hex(to_hex(encode_histogram_event(2.0, 1, "t", h))));
  CHECK(e.step == 1);
  REQUIRE(e.values.size() == 1);
  CHECK(e.values[0].tag == "t");
  CHECK(e.values[0].has_histo);
  CHECK(e.values[0].histo.bucket_limit == h.bucket_limit);
  CHECK(e.values[0].histo.sum_squares == 14.0);
}

TEST_CASE("make_histogram: 30 equal buckets between min and max, the max in the last, non-finite values left out") {
  std::vector<float> v;
  for (int i = 0; i <= 60; ++i) v.push_back(static_cast<float>(i) / 2);  // 0, 0.5, ... 30
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(std::numeric_limits<float>::infinity());
  const Histogram h = make_histogram(v);
  CHECK(h.min == 0.0);
  CHECK(h.max == 30.0);
  CHECK(h.num == 61);
  CHECK(h.sum == doctest::Approx(915.0));
  REQUIRE(h.bucket.size() == 30);
  REQUIRE(h.bucket_limit.size() == 30);
  CHECK(h.bucket_limit[0] == 1.0);
  CHECK(h.bucket_limit[29] == 30.0);
  CHECK(h.bucket[0] == 2);   // 0, 0.5
  CHECK(h.bucket[29] == 3);  // 29, 29.5, 30
  double total = 0;
  for (double b : h.bucket) total += b;
  CHECK(total == 61);
  const Histogram same = make_histogram(std::vector<float>{2.f, 2.f, 2.f});
  CHECK(same.bucket == std::vector<double>{3});
  CHECK(same.bucket_limit == std::vector<double>{2});
  CHECK(make_histogram(std::vector<float>{}).bucket.empty());
  CHECK_THROWS_WITH_AS(make_histogram(v, 0), doctest::Contains("0 buckets, expected at least 1"), Error);
}

TEST_CASE("EventFileWriter writes Keras' file name, the version record, scalars and histograms, every CRC right") {
  testing::TempDir dir;
  const std::string logs = dir.file("run/a/train");  // created with its parents
  std::string path;
  {
    EventFileWriter w(logs);
    path = w.path();
    w.add_scalar("epoch_loss", 0, 1.5);
    w.add_scalar("epoch_loss", 1, 0.75);
    w.add_histogram("dense/kernel_0/histogram", 1, std::vector<float>{-1.f, 0.f, 1.f, 2.f});
    w.flush();
    CHECK(testing::read_records(path).size() == 4);  // flushed: all there while the writer lives
    w.add_scalar("late", 2, 3.0);
  }  // the destructor flushes the last one
  const std::string name = std::filesystem::path(path).filename().string();
  CHECK(std::filesystem::path(path).parent_path() == std::filesystem::path(logs));
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK(name.size() > 9);
  CHECK(name.substr(name.size() - 9) == ".lockstep");
  const auto events = testing::read_events(path);
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(!events[0].has_summary);
  CHECK(std::abs(events[0].wall_time - wall_time_now()) < 600);
  CHECK(events[1].step == 0);
  REQUIRE(events[1].values.size() == 1);
  CHECK(events[1].values[0].tag == "epoch_loss");
  CHECK(events[1].values[0].simple_value == 1.5f);
  CHECK(events[2].step == 1);
  CHECK(events[2].values[0].simple_value == 0.75f);
  REQUIRE(events[3].values.size() == 1);
  const testing::ReadValue& hv = events[3].values[0];
  CHECK(hv.tag == "dense/kernel_0/histogram");
  CHECK(hv.has_histo);
  CHECK(hv.histo.min == -1.0);
  CHECK(hv.histo.max == 2.0);
  CHECK(hv.histo.num == 4);
  CHECK(hv.histo.sum == 2.0);
  CHECK(hv.histo.sum_squares == 6.0);
  CHECK(hv.histo.bucket.size() == 30);
  CHECK(events[4].values[0].tag == "late");

  // A second file of the same second and process does not replace the first, and sorts after it.
  EventFileWriter again(logs);
  CHECK(again.path() != path);
  const std::vector<std::string> files = testing::event_files(logs);
  REQUIRE(files.size() == 2);
  if (again.path().size() == path.size() + 5) {  // the same second: path + ".0001"
    CHECK(files[0] == path);
    CHECK(again.path() == path + ".0001");
  }
  EventFileWriter moved = std::move(again);  // a writer moves, its file with it
  moved.add_scalar("after_move", 1, 2.0);
  moved.close();
  CHECK(testing::read_events(moved.path()).back().values.at(0).tag == "after_move");
}

TEST_CASE("EventFileWriter's errors name the path and the OS's reason") {
  testing::TempDir dir;
  testing::write_file(dir.file("plain"), std::string("x"));
  const std::string expected = "cannot create the directory '" + dir.file("plain/logs") + "': Not a directory";
  CHECK_THROWS_WITH_AS(EventFileWriter(dir.file("plain/logs")), doctest::Contains(expected.c_str()), Error);
  // A file where the directory should be (libstdc++ says "Not a directory"; the check after it, "is not a directory").
  const std::string file_there = "'" + dir.file("plain") + "'";
  CHECK_THROWS_WITH_AS(EventFileWriter(dir.file("plain")), doctest::Contains(file_there.c_str()), Error);
  CHECK_THROWS_WITH_AS(EventFileWriter(""), doctest::Contains("an empty directory name"), Error);
  // A full disk: Linux's /dev/full takes no byte ("No space left on device").
  if (std::filesystem::exists("/dev/full")) {
    RecordWriter full("/dev/full");
    CHECK_THROWS_WITH_AS(full.write(std::string(100000, 'x')),  // past stdio's buffer: written at once
                         doctest::Contains("cannot write to '/dev/full': No space left on device"), Error);
    RecordWriter small("/dev/full");
    small.write("small");  // buffered: the error comes when the buffer goes out
    CHECK_THROWS_WITH_AS(small.flush(), doctest::Contains("cannot write to '/dev/full': No space left on device"),
                         Error);
    RecordWriter closing("/dev/full");
    closing.write("small");
    CHECK_THROWS_WITH_AS(closing.close(), doctest::Contains("No space left on device"), Error);
    CHECK_NOTHROW([] {  // a destructor that cannot flush reports nothing
      RecordWriter dropped("/dev/full");
      dropped.write("small");
    }());
  }
}
