// libFuzzer target: the safetensors reader (include/lockstep/io/safetensors.hpp)
// and what reads through it, read_checkpoint and load_weights, for a small
// Sequential model. A lockstep::Error is the expected end of a bad file;
// anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "fuzz/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using lockstep_fuzz::Model;
  const std::string& path = lockstep_fuzz::write_input(data, size);
  try {
    const lockstep::io::SafetensorsFile file(path);
    if (file.metadata().count("crc32c")) file.check_crc32c("crc32c");
    // Every entry through read(): dtype, shape and range checks, then the copy.
    for (const auto& [name, entry] : file.entries()) {
      std::vector<unsigned char> out(entry.end - entry.begin);
      const std::string& dtype = entry.dtype;
      file.read(name, dtype, entry.shape, out.data());
    }
  } catch (const lockstep::Error&) {
  }
  try {
    (void)lockstep::read_checkpoint<Model>(path);
  } catch (const lockstep::Error&) {
  }
  try {
    Model model{1};
    lockstep::load_weights(model, path);
  } catch (const lockstep::Error&) {
  }
  return 0;
}
