// Reader for the IDX format of MNIST and Fashion-MNIST, from plain or gzip files,
// and loaders that turn an image/label pair of IDX files into a Dataset.
#pragma once

// LOCKSTEP_HAVE_ZLIB: 1 reads gzip-compressed files through zlib; 0 reads plain
// IDX files only, and a gzip file is then an Error that says so. CMake defines
// it (1 where it found zlib, which lockstep::lockstep then links); without
// CMake it is 1 where <zlib.h> can be included (then link -lz).
#ifndef LOCKSTEP_HAVE_ZLIB
#if defined(__has_include)
#if __has_include(<zlib.h>)
#define LOCKSTEP_HAVE_ZLIB 1
#endif
#endif
#endif
#ifndef LOCKSTEP_HAVE_ZLIB
#define LOCKSTEP_HAVE_ZLIB 0
#endif

#if LOCKSTEP_HAVE_ZLIB
#include <zlib.h>
#endif

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/core/input_file.hpp"
#include "lockstep/data/dataset.hpp"

namespace lockstep {

// Where Debian's fashion-mnist data package installs the four files.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// The folder the example and the tests read Fashion-MNIST from by default:
// $FASHION_MNIST_DIR where it is set and not empty (scripts/gpu-check.sh reads
// the same variable), else Debian's folder, so that other systems need no rebuild.
inline std::string fashion_mnist_dir() {
  const char* dir = std::getenv("FASHION_MNIST_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string(kDebianFashionMnistDir);
}

// An IDX tensor: its dimensions (outermost first) and its bytes, row-major.
struct IdxArray {
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> data;
};

namespace detail {

inline constexpr std::uint8_t kIdxUnsignedByte = 0x08;

inline std::string idx_hex(std::uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*X", digits, static_cast<unsigned>(value));
  return text;
}

inline std::string idx_shape(const std::vector<std::size_t>& dims) {
  std::string out;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(dims[i]);
  }
  return out;
}

#if LOCKSTEP_HAVE_ZLIB

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// gzread stops short only at end of file or on an error, so this returns the
// bytes it got and leaves the distinction to gzerror.
inline std::size_t gz_read_fully(gzFile file, const std::string& path, std::uint8_t* dst,
                                 std::size_t count) {
  // gzread takes an unsigned count and returns int, so big reads go in slices.
  constexpr std::size_t kSlice = std::size_t{1} << 30;
  std::size_t got = 0;
  while (got < count) {
    const std::size_t want = count - got < kSlice ? count - got : kSlice;
    errno = 0;
    const int n = gzread(file, dst + got, static_cast<unsigned>(want));
    if (n < 0) {
      int code = Z_OK;
      const char* message = gzerror(file, &code);
      if (code == Z_ERRNO) fail(path, ": read failed: ", std::strerror(errno));
      fail(path, ": read failed: ", message ? message : "unknown zlib error");
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

inline GzHandle gz_open_for_read(const std::string& path) {
  // Only a regular file: a FIFO or /dev/zero would block or never end.
  const int fd = open_regular_file(path, "an IDX file");
  errno = 0;
  GzHandle file(gzdopen(fd, "rb"));
  if (!file) {
    const int err = errno;
    ::close(fd);
    fail(path, ": file cannot be opened: ", err ? std::strerror(err) : "out of memory");
  }
  // Fewer, larger read() calls than zlib's 8 KiB default; the big win is that
  // gz_read_fully asks for whole slices, so zlib inflates straight into them.
  gzbuffer(file.get(), 1u << 20);
  return file;
}

// The bytes of one file, inflated on the fly where it is gzip-compressed (zlib
// reads a plain file as it is).
class IdxSource {
 public:
  explicit IdxSource(const std::string& path) : path_(path), file_(gz_open_for_read(path)) {}

  std::size_t read(std::uint8_t* dst, std::size_t count) {
    return gz_read_fully(file_.get(), path_, dst, count);
  }

  // Said after "truncated: ..." where the file ended early.
  const char* truncation_note() {
    int code = Z_OK;
    gzerror(file_.get(), &code);
    return code == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
  }

 private:
  std::string path_;
  GzHandle file_;
};

#else  // !LOCKSTEP_HAVE_ZLIB

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

// The bytes of one plain file. A build without zlib cannot inflate, so a file
// that starts with gzip's magic bytes (0x1f 0x8b) is refused with a sentence
// that says how to go on, whatever its name.
class IdxSource {
 public:
  explicit IdxSource(const std::string& path) : path_(path) {
    // Only a regular file: a FIFO or /dev/zero would block or never end.
    const int fd = open_regular_file(path, "an IDX file");
    errno = 0;
    file_.reset(::fdopen(fd, "rb"));
    if (!file_) {
      const int err = errno;
      ::close(fd);
      fail(path, ": file cannot be opened: ", err ? std::strerror(err) : "unknown error");
    }
    // Looked at through a small buffer rather than by seeking back, so that a
    // pipe reads as well as a file.
    peeked_ = read_file(peek_, sizeof peek_);
    if (peeked_ >= 2 && peek_[0] == 0x1f && peek_[1] == 0x8b) {
      fail(path, ": gzip-compressed, and this build of lockstep reads only plain IDX files (it was built "
                 "without zlib: LOCKSTEP_HAVE_ZLIB=0); decompress it (gunzip -k ", path,
           ") or rebuild with zlib (Debian: zlib1g-dev)");
    }
  }

  std::size_t read(std::uint8_t* dst, std::size_t count) {
    std::size_t got = 0;
    while (peek_at_ < peeked_ && got < count) dst[got++] = peek_[peek_at_++];
    return got + (got < count ? read_file(dst + got, count - got) : 0);
  }

  const char* truncation_note() { return ""; }

 private:
  std::size_t read_file(std::uint8_t* dst, std::size_t count) {
    errno = 0;
    const std::size_t n = std::fread(dst, 1, count, file_.get());
    if (n < count && std::ferror(file_.get())) {
      fail(path_, ": read failed: ", errno ? std::strerror(errno) : "unknown error");
    }
    return n;
  }

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::uint8_t peek_[2] = {0, 0};
  std::size_t peeked_ = 0;
  std::size_t peek_at_ = 0;
};

#endif  // LOCKSTEP_HAVE_ZLIB

// Reads an IDX file whose number of dimensions is `expected_ndim` (any when 0);
// `kind` names what that file is ("an image file") for the error message.
inline IdxArray read_idx_checked(const std::string& path, std::size_t expected_ndim,
                                 const char* kind) {
  IdxSource file(path);

  std::uint8_t magic[4];
  const std::size_t magic_got = file.read(magic, 4);
  require(magic_got == 4, path, ": truncated: an IDX header needs at least 4 bytes, found ",
          magic_got);
  const std::uint32_t magic_value = (std::uint32_t{magic[0]} << 24) |
                                    (std::uint32_t{magic[1]} << 16) |
                                    (std::uint32_t{magic[2]} << 8) | std::uint32_t{magic[3]};
  require(magic[0] == 0 && magic[1] == 0, path, ": not an IDX file: magic ",
          idx_hex(magic_value, 8), ", expected the first two bytes to be 0x00 0x00");
  require(magic[2] == kIdxUnsignedByte, path, ": IDX type byte ", idx_hex(magic[2], 2),
          ", expected ", idx_hex(kIdxUnsignedByte, 2),
          " (unsigned byte, the only element type supported)");
  const std::size_t ndim = magic[3];
  require(ndim > 0, path, ": IDX magic ", idx_hex(magic_value, 8),
          " declares 0 dimensions, expected at least 1");
  if (expected_ndim != 0) {
    const std::uint32_t expected_magic =
        (std::uint32_t{kIdxUnsignedByte} << 8) | static_cast<std::uint32_t>(expected_ndim);
    require(ndim == expected_ndim, path, ": IDX magic ", idx_hex(magic_value, 8), ", expected ",
            idx_hex(expected_magic, 8), " (", kind, ")");
  }

  const std::size_t header_bytes = 4 + 4 * ndim;
  std::uint8_t dim_bytes[4 * 255];
  const std::size_t dims_got = file.read(dim_bytes, 4 * ndim);
  require(dims_got == 4 * ndim, path, ": truncated: the ", ndim, "-dimensional IDX header needs ",
          header_bytes, " bytes, found ", 4 + dims_got);

  IdxArray array;
  array.dims.resize(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    const std::uint8_t* b = dim_bytes + 4 * i;
    array.dims[i] = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) |
                    (std::size_t{b[2]} << 8) | std::size_t{b[3]};
  }
  std::size_t total = 1;
  bool overflow = false;
  for (const std::size_t d : array.dims) {
    if (d != 0 && total > SIZE_MAX / d) overflow = true;
    total *= d;
  }
  // A corrupt header must not turn into an absurd allocation attempt.
  require(!overflow, path, ": corrupt IDX header: dimensions ", idx_shape(array.dims),
          " exceed the addressable size");

  // The buffer grows as bytes arrive rather than trusting the header up front,
  // so a corrupt header declaring terabytes ends as "truncated", not bad_alloc.
  // It starts small: a 20-byte file whose header declares gigabytes costs a
  // 64 KiB buffer, not 16 MiB (the IDX fuzzer ran 2.5x faster), and doubling
  // to Fashion-MNIST's 47 MB costs a dozen reallocations.
  std::size_t data_got = 0;
  std::size_t capacity = total < (std::size_t{64} << 10) ? total : (std::size_t{64} << 10);
  while (true) {
    array.data.resize(capacity);
    const std::size_t n =
        file.read(array.data.data() + data_got, capacity - data_got);
    data_got += n;
    if (data_got < capacity || capacity == total) break;
    capacity = total - capacity > capacity ? 2 * capacity : total;
  }
  array.data.resize(data_got);
  if (data_got != total) {
    fail(path, ": truncated: the header declares ", idx_shape(array.dims), " so ",
         header_bytes + total, " bytes are expected, found ", header_bytes + data_got,
         file.truncation_note());
  }

  // Extra bytes mean the header and the payload disagree, so neither can be trusted.
  std::uint8_t scratch[1 << 16];
  std::size_t extra = 0;
  for (std::size_t n; (n = file.read(scratch, sizeof scratch)) > 0;) {
    extra += n;
    if (n < sizeof scratch) break;
  }
  require(extra == 0, path, ": corrupt IDX file: ", extra,
          " bytes of trailing data beyond the ", header_bytes + total,
          " bytes its header declares (", idx_shape(array.dims), ")");
  return array;
}

inline std::vector<Dataset::label_type> idx_labels_to_int(const std::vector<std::uint8_t>& raw) {
  return std::vector<Dataset::label_type>(raw.begin(), raw.end());
}

}  // namespace detail

// Reads any unsigned-byte IDX file; gzip-compressed files are inflated on the fly
// (with zlib; without it they are an Error).
inline IdxArray read_idx(const std::string& path) {
  return detail::read_idx_checked(path, 0, "any IDX file");
}

// Reads a (count, rows, cols) image file; returns the pixels and sets rows, cols.
inline std::vector<std::uint8_t> read_idx_images(const std::string& path, std::size_t& rows,
                                                 std::size_t& cols) {
  IdxArray array = detail::read_idx_checked(path, 3, "an image file");
  require(array.dims[1] > 0 && array.dims[2] > 0, path, ": IDX image shape ",
          detail::idx_shape(array.dims), " has empty images, expected rows and cols >= 1");
  rows = array.dims[1];
  cols = array.dims[2];
  return std::move(array.data);
}

// Reads a one-dimensional label file.
inline std::vector<std::uint8_t> read_idx_labels(const std::string& path) {
  return std::move(detail::read_idx_checked(path, 1, "a label file").data);
}

// Images become rows of rows*cols features in [0, 1] (pixel / 255).
inline Dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  // Labels first: the file is tiny, so a wrong path fails before the big read.
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_path);
  std::size_t rows = 0;
  std::size_t cols = 0;
  const std::vector<std::uint8_t> pixels = read_idx_images(images_path, rows, cols);
  const std::size_t feature_count = rows * cols;
  const std::size_t images = pixels.size() / feature_count;
  require(images == labels.size(), images_path, " holds ", images, " images but ", labels_path,
          " holds ", labels.size(), " labels; expected one label per image");

  float scale[256];
  for (int i = 0; i < 256; ++i) scale[i] = static_cast<float>(i) / 255.0f;
  std::vector<float> features(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) features[i] = scale[pixels[i]];
  return Dataset(std::move(features), feature_count, detail::idx_labels_to_int(labels));
}

// split is "train" (60000 samples) or "test" (10000, the t10k files). Each file
// is looked for gzipped first, then uncompressed; in a build without zlib,
// uncompressed first (a .gz file alone is then an Error that says so).
inline Dataset load_fashion_mnist(const std::string& dir, const std::string& split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    fail("load_fashion_mnist: unknown split \"", split, "\", expected \"train\" or \"test\"");
  }
  const auto locate = [&](const char* stem) {
    const std::filesystem::path base = std::filesystem::path(dir) / (prefix + stem);
    std::filesystem::path gz = base;
    gz += ".gz";
    std::error_code ec;
    if (LOCKSTEP_HAVE_ZLIB && std::filesystem::exists(gz, ec)) return gz.string();
    if (std::filesystem::exists(base, ec)) return base.string();
    if (std::filesystem::exists(gz, ec)) return gz.string();
    fail("load_fashion_mnist: neither ", gz.string(), " nor ", base.string(),
         " exists (is the Fashion-MNIST data in ", dir, "?)");
  };
  const std::string images = locate("-images-idx3-ubyte");
  const std::string labels = locate("-labels-idx1-ubyte");
  return load_idx(images, labels);
}

}  // namespace lockstep
