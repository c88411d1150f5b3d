// Tests for the IDX reader and the (Fashion-)MNIST loaders in lockstep/data/idx.hpp.
#include <doctest/doctest.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "lockstep/data/idx.hpp"
#include "data/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

using lockstep::testing::TempDir;

void write_plain(const std::string& path, const Bytes& bytes) { lockstep::testing::write_file(path, bytes); }

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  if (!bytes.empty()) {
    REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) ==
            static_cast<int>(bytes.size()));
  }
  REQUIRE(gzclose(file) == Z_OK);
}

void write_file(const std::string& path, const Bytes& bytes, bool gz) {
  if (gz) {
    write_gz(path, bytes);
  } else {
    write_plain(path, bytes);
  }
}

// An IDX file: magic 0x00 0x00 type ndim, big-endian dims, then the payload.
Bytes idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (const std::uint32_t d : dims) {
    out.push_back(static_cast<std::uint8_t>(d >> 24));
    out.push_back(static_cast<std::uint8_t>(d >> 16));
    out.push_back(static_cast<std::uint8_t>(d >> 8));
    out.push_back(static_cast<std::uint8_t>(d));
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Bytes iota_bytes(std::size_t count, std::uint8_t start = 0) {
  Bytes out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<std::uint8_t>(start + i * 37);
  return out;
}

}  // namespace

TEST_CASE("read_idx returns the dims and bytes of plain and gzip files") {
  TempDir dir;
  const Bytes payload = iota_bytes(2 * 3 * 4);
  for (const bool gz : {false, true}) {
    CAPTURE(gz);
    const std::string path = dir.file(gz ? "a.idx.gz" : "a.idx");
    write_file(path, idx_bytes(0x08, {2, 3, 4}, payload), gz);
    const lockstep::IdxArray array = lockstep::read_idx(path);
    CHECK(array.dims == std::vector<std::size_t>{2, 3, 4});
    CHECK(array.data == payload);
  }
}

TEST_CASE("read_idx accepts an empty tensor") {
  TempDir dir;
  const std::string path = dir.file("empty.idx");
  write_plain(path, idx_bytes(0x08, {0, 28, 28}, {}));
  const lockstep::IdxArray array = lockstep::read_idx(path);
  CHECK(array.dims == std::vector<std::size_t>{0, 28, 28});
  CHECK(array.data.empty());
}

TEST_CASE("read_idx_images and read_idx_labels report the shape") {
  TempDir dir;
  const std::string images = dir.file("images.idx3");
  const std::string labels = dir.file("labels.idx1");
  write_plain(images, idx_bytes(0x08, {5, 2, 3}, iota_bytes(30)));
  write_gz(labels, idx_bytes(0x08, {5}, {1, 2, 3, 4, 5}));
  std::size_t rows = 0;
  std::size_t cols = 0;
  CHECK(lockstep::read_idx_images(images, rows, cols) == iota_bytes(30));
  CHECK(rows == 2);
  CHECK(cols == 3);
  CHECK(lockstep::read_idx_labels(labels) == Bytes{1, 2, 3, 4, 5});
}

TEST_CASE("load_idx scales pixels by 1/255 and keeps labels - plain and gzip") {
  TempDir dir;
  const Bytes pixels = {0, 255, 128, 1, 7, 8, 9, 10, 200, 100, 50, 25};  // 3 images of 2x2
  const Bytes labels = {9, 0, 4};
  for (const bool gz : {false, true}) {
    CAPTURE(gz);
    const std::string images_path = dir.file(gz ? "i.gz" : "i");
    const std::string labels_path = dir.file(gz ? "l.gz" : "l");
    write_file(images_path, idx_bytes(0x08, {3, 2, 2}, pixels), gz);
    write_file(labels_path, idx_bytes(0x08, {3}, labels), gz);

    const lockstep::Dataset data = lockstep::load_idx(images_path, labels_path);
    REQUIRE(data.size() == 3);
    CHECK(data.feature_count() == 4);
    CHECK(data.label_width() == 1);
    for (std::size_t s = 0; s < 3; ++s) {
      CHECK(data.label(s) == labels[s]);
      for (std::size_t f = 0; f < 4; ++f) {
        CHECK(data.features(s)[f] == static_cast<float>(pixels[s * 4 + f]) / 255.0f);
      }
    }
    CHECK(data.features(0)[0] == 0.0f);
    CHECK(data.features(0)[1] == 1.0f);
  }
}

TEST_CASE("a label file where an image file is expected names both magics") {
  TempDir dir;
  const std::string labels = dir.file("labels");
  const std::string images = dir.file("images");
  write_plain(labels, idx_bytes(0x08, {2}, {1, 2}));
  write_plain(images, idx_bytes(0x08, {2, 1, 1}, {1, 2}));
  std::size_t rows = 0;
  std::size_t cols = 0;
  CHECK_THROWS_WITH_AS(lockstep::read_idx_images(labels, rows, cols),
                       doctest::Contains("IDX magic 0x00000801, expected 0x00000803 (an image file)"),
                       lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::read_idx_labels(images),
                       doctest::Contains("IDX magic 0x00000803, expected 0x00000801 (a label file)"),
                       lockstep::Error);
  // Swapped arguments to load_idx are caught the same way.
  CHECK_THROWS_WITH_AS(lockstep::load_idx(labels, images),
                       doctest::Contains("expected 0x00000801"), lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::read_idx_images(labels, rows, cols),
                       doctest::Contains(labels.c_str()), lockstep::Error);
}

TEST_CASE("a non-byte element type is rejected with the type found") {
  TempDir dir;
  const std::string path = dir.file("floats");
  write_plain(path, idx_bytes(0x0D, {1}, {0, 0, 0, 0}));
  CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains("IDX type byte 0x0D, expected 0x08"),
                       lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains(path.c_str()), lockstep::Error);
}

TEST_CASE("a file that is not IDX at all is rejected") {
  TempDir dir;
  const std::string path = dir.file("text");
  write_plain(path, {'h', 'e', 'l', 'l', 'o', '\n'});
  CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains("not an IDX file"),
                       lockstep::Error);
}

TEST_CASE("a truncated file names the bytes expected and found") {
  TempDir dir;
  for (const bool gz : {false, true}) {
    CAPTURE(gz);
    const std::string path = dir.file(gz ? "short.gz" : "short");
    // Header says 2x2x2 = 8 payload bytes after a 16-byte header; only 5 are there.
    write_file(path, idx_bytes(0x08, {2, 2, 2}, iota_bytes(5)), gz);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path),
                         doctest::Contains("truncated: the header declares 2x2x2 so 24 bytes are "
                                           "expected, found 21"),
                         lockstep::Error);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains(path.c_str()), lockstep::Error);
  }

  SUBCASE("inside the header") {
    const std::string path = dir.file("short_header");
    Bytes bytes = idx_bytes(0x08, {2, 2, 2}, {});
    bytes.resize(10);
    write_plain(path, bytes);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path),
                         doctest::Contains("needs 16 bytes, found 10"), lockstep::Error);
  }

  SUBCASE("a gzip stream cut short") {
    const std::string path = dir.file("cut.gz");
    write_gz(path, idx_bytes(0x08, {64, 64}, iota_bytes(64 * 64)));
    fs::resize_file(path, fs::file_size(path) / 2);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains("truncated"), lockstep::Error);
  }
}

TEST_CASE("trailing bytes beyond the declared size mean a corrupt file") {
  TempDir dir;
  for (const bool gz : {false, true}) {
    CAPTURE(gz);
    const std::string path = dir.file(gz ? "long.gz" : "long");
    write_file(path, idx_bytes(0x08, {2, 2}, iota_bytes(7)), gz);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path),
                         doctest::Contains("corrupt IDX file: 3 bytes of trailing data beyond the "
                                           "16 bytes its header declares (2x2)"),
                         lockstep::Error);
  }
}

TEST_CASE("image and label counts that differ name both files and counts") {
  TempDir dir;
  const std::string images = dir.file("images");
  const std::string labels = dir.file("labels");
  write_plain(images, idx_bytes(0x08, {3, 2, 2}, iota_bytes(12)));
  write_plain(labels, idx_bytes(0x08, {2}, {1, 2}));
  CHECK_THROWS_WITH_AS(lockstep::load_idx(images, labels),
                       doctest::Contains((images + " holds 3 images but " + labels +
                                          " holds 2 labels")
                                             .c_str()),
                       lockstep::Error);
}

TEST_CASE("a missing file names the path") {
  TempDir dir;
  const std::string path = dir.file("no-such-file.gz");
  CHECK_THROWS_WITH_AS(lockstep::read_idx(path),
                       doctest::Contains((path + ": file does not exist").c_str()), lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::load_idx(path, path), doctest::Contains(path.c_str()),
                       lockstep::Error);
}

TEST_CASE("a directory in place of a file is an Error - not a crash") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(lockstep::read_idx(dir.str()), doctest::Contains(dir.str().c_str()),
                       lockstep::Error);
}

TEST_CASE("load_fashion_mnist prefers .gz - falls back to uncompressed - and checks the split") {
  TempDir dir;
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {2, 1, 2}, {0, 51, 102, 255}));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {2}, {3, 9}));
  // A broken uncompressed twin proves the .gz one is read first.
  write_plain(dir.file("t10k-images-idx3-ubyte"), {1, 2, 3});

  const lockstep::Dataset test = lockstep::load_fashion_mnist(dir.str(), "test");
  REQUIRE(test.size() == 2);
  CHECK(test.feature_count() == 2);
  CHECK(test.label(0) == 3);
  CHECK(test.label(1) == 9);
  CHECK(test.features(0)[1] == 51.0f / 255.0f);
  CHECK(test.features(1)[1] == 1.0f);

  CHECK_THROWS_WITH_AS(lockstep::load_fashion_mnist(dir.str(), "train"),
                       doctest::Contains("train-images-idx3-ubyte"), lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::load_fashion_mnist(dir.str(), "validation"),
                       doctest::Contains("unknown split \"validation\", expected \"train\" or \"test\""),
                       lockstep::Error);
}

TEST_CASE("real Fashion-MNIST loads with the published shape" *
          doctest::skip(!fs::exists(lockstep::fashion_mnist_dir()))) {
  const lockstep::Dataset train = lockstep::load_fashion_mnist(lockstep::fashion_mnist_dir(), "train");
  const lockstep::Dataset test = lockstep::load_fashion_mnist(lockstep::fashion_mnist_dir(), "test");
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.feature_count() == 784);
  CHECK(test.feature_count() == 784);
  CHECK(train.label(0) == 9);  // the first training image is an ankle boot

  for (const lockstep::Dataset* data : {&train, &test}) {
    std::vector<std::size_t> per_class(10, 0);
    bool labels_in_range = true;
    for (const std::int32_t label : data->label_data()) {
      labels_in_range = labels_in_range && label >= 0 && label <= 9;
      if (label >= 0 && label <= 9) ++per_class[static_cast<std::size_t>(label)];
    }
    CHECK(labels_in_range);
    // Fashion-MNIST is exactly balanced: 6000 / 1000 samples per class.
    for (const std::size_t n : per_class) CHECK(n == data->size() / 10);

    float lo = 1.0f;
    float hi = 0.0f;
    for (const float v : data->feature_data()) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    CHECK(lo == 0.0f);
    CHECK(hi == 1.0f);
  }
}
