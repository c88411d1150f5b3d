// The IDX reader of a build without zlib (LOCKSTEP_HAVE_ZLIB=0, as on a node
// without zlib's headers; tests/CMakeLists.txt compiles this file so and does
// not link zlib): plain IDX files load, a gzip-compressed one is an Error that
// says the build has no zlib and how to go on.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/data/idx.hpp"
#include "data/temp_dir.hpp"

static_assert(LOCKSTEP_HAVE_ZLIB == 0, "this test is compiled with LOCKSTEP_HAVE_ZLIB=0");
#ifdef ZLIB_H
#error "idx.hpp included <zlib.h> although LOCKSTEP_HAVE_ZLIB=0"
#endif

namespace {

using Bytes = std::vector<std::uint8_t>;
using lockstep::testing::TempDir;

void write_plain(const std::string& path, const Bytes& bytes) { lockstep::testing::write_file(path, bytes); }

// A (2, 1, 2) image file of pixels 0, 51, 102, 255.
const Bytes kImages = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 51, 102, 255};
const Bytes kLabels = {0, 0, 8, 1, 0, 0, 0, 2, 3, 9};
// kImages through gzip (Python's gzip.compress(..., mtime=0)): made once,
// since this build has no zlib to compress with.
const Bytes kImagesGz = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x63, 0x60,
                         0xe0, 0x60, 0x66, 0x60, 0x60, 0x60, 0x02, 0x62, 0x46, 0x30, 0x6d, 0x9c,
                         0xf6, 0x1f, 0x00, 0x08, 0xe4, 0x71, 0x7e, 0x14, 0x00, 0x00, 0x00};

}  // namespace

TEST_CASE("plain IDX files load without zlib") {
  TempDir dir;
  const std::string images = dir.file("i.idx");
  const std::string labels = dir.file("l.idx");
  write_plain(images, kImages);
  write_plain(labels, kLabels);

  const lockstep::IdxArray array = lockstep::read_idx(images);
  CHECK(array.dims == std::vector<std::size_t>{2, 1, 2});
  CHECK(array.data == Bytes{0, 51, 102, 255});

  const lockstep::Dataset data = lockstep::load_idx(images, labels);
  REQUIRE(data.size() == 2);
  CHECK(data.feature_count() == 2);
  CHECK(data.label(0) == 3);
  CHECK(data.label(1) == 9);
  CHECK(data.features(0)[1] == 51.0f / 255.0f);
  CHECK(data.features(1)[1] == 1.0f);
}

TEST_CASE("the plain reader keeps its checks: truncated, trailing bytes, missing file") {
  TempDir dir;
  const std::string shorter = dir.file("short.idx");
  write_plain(shorter, Bytes(kImages.begin(), kImages.end() - 1));
  CHECK_THROWS_WITH_AS(lockstep::read_idx(shorter), doctest::Contains((shorter + ": truncated").c_str()),
                       lockstep::Error);
  const std::string longer = dir.file("long.idx");
  Bytes extra = kImages;
  extra.push_back(7);
  write_plain(longer, extra);
  CHECK_THROWS_WITH_AS(lockstep::read_idx(longer), doctest::Contains("1 bytes of trailing data"), lockstep::Error);
  const std::string one_byte = dir.file("one.idx");
  write_plain(one_byte, {0x1f});
  CHECK_THROWS_WITH_AS(lockstep::read_idx(one_byte),
                       doctest::Contains("an IDX header needs at least 4 bytes, found 1"), lockstep::Error);
  const std::string missing = dir.file("missing.idx");
  CHECK_THROWS_WITH_AS(lockstep::read_idx(missing), doctest::Contains((missing + ": file does not exist").c_str()),
                       lockstep::Error);
}

TEST_CASE("a gzip file without zlib is an Error that says so - whatever its name") {
  TempDir dir;
  for (const char* name : {"i.idx.gz", "i.idx"}) {
    CAPTURE(name);
    const std::string path = dir.file(name);
    write_plain(path, kImagesGz);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path),
                         doctest::Contains((path + ": gzip-compressed, and this build of lockstep reads only plain "
                                                   "IDX files (it was built without zlib: LOCKSTEP_HAVE_ZLIB=0)")
                                               .c_str()),
                         lockstep::Error);
    CHECK_THROWS_WITH_AS(lockstep::read_idx(path), doctest::Contains("gunzip -k"), lockstep::Error);
  }
}

TEST_CASE("load_fashion_mnist without zlib reads the uncompressed files - and names a lone .gz") {
  TempDir dir;
  write_plain(dir.file("t10k-images-idx3-ubyte"), kImages);
  write_plain(dir.file("t10k-labels-idx1-ubyte"), kLabels);
  // A .gz twin that this build cannot read: the plain file must be taken.
  write_plain(dir.file("t10k-images-idx3-ubyte.gz"), kImagesGz);
  const lockstep::Dataset test = lockstep::load_fashion_mnist(dir.str(), "test");
  REQUIRE(test.size() == 2);
  CHECK(test.label(1) == 9);
  CHECK(test.features(0)[2] == 102.0f / 255.0f);

  // Only the .gz files: the Error names the file and the missing zlib.
  write_plain(dir.file("train-images-idx3-ubyte.gz"), kImagesGz);
  write_plain(dir.file("train-labels-idx1-ubyte"), kLabels);
  CHECK_THROWS_WITH_AS(lockstep::load_fashion_mnist(dir.str(), "train"),
                       doctest::Contains((dir.file("train-images-idx3-ubyte.gz") + ": gzip-compressed").c_str()),
                       lockstep::Error);
}
