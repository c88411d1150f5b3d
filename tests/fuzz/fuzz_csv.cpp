// libFuzzer target: the CSV readers (include/lockstep/data/csv.hpp), read_csv
// and read_csv_regression under a few CsvOptions. A lockstep::Error is the
// expected end of a bad file; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/data/csv.hpp"

namespace {
std::vector<lockstep::CsvOptions> option_sets() {
  std::vector<lockstep::CsvOptions> out(5);
  out[1].header = true;
  out[1].label_column = 0;
  out[2].delimiter = ';';
  out[2].feature_scale = 1.0f / 255.0f;
  out[3].delimiter = '\t';
  out[3].label_column = 2;
  out[3].target_columns = {0, 2};
  out[4].header = true;
  out[4].feature_scale = 1e30f;  // products may overflow where the fields do not
  out[4].target_columns = {1};
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<lockstep::CsvOptions> options = option_sets();
  const std::string& path = lockstep_fuzz::write_input(data, size);
  for (const lockstep::CsvOptions& o : options) {
    try {
      (void)lockstep::read_csv(path, o);
    } catch (const lockstep::Error&) {
    }
    try {
      (void)lockstep::read_csv_regression(path, o);
    } catch (const lockstep::Error&) {
    }
  }
  return 0;
}
