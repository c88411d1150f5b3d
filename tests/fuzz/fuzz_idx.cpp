// libFuzzer target: the IDX reader (include/lockstep/data/idx.hpp) on any
// bytes, plain or gzip (zlib tells them apart by content). A lockstep::Error
// is the expected end of a bad file; any other exception escapes and
// libFuzzer reports it, as it does a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_input.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/data/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = lockstep_fuzz::write_input(data, size);
  try {
    const lockstep::IdxArray array = lockstep::read_idx(path);
    // The typed readers add their own checks for the shapes they accept.
    if (array.dims.size() == 3) {
      std::size_t rows = 0, cols = 0;
      (void)lockstep::read_idx_images(path, rows, cols);
    } else if (array.dims.size() == 1) {
      (void)lockstep::read_idx_labels(path);
      // The file as both halves of a dataset: one label per "image" is checked.
      try {
        (void)lockstep::load_idx(path, path);
      } catch (const lockstep::Error&) {
      }
    }
  } catch (const lockstep::Error&) {
  }
  return 0;
}
