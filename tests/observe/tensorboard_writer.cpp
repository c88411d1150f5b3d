// Writes a TensorBoard log directory for tensorboard_reader.py to read with
// TensorBoard's own EventAccumulator: a 2-epoch fit with the TensorBoard
// callback (validation, batch scalars every 2 batches, weight histograms every
// epoch), plus a JSON file of what each run must hold: every scalar's
// (step, value) and every histogram's (step, min, max, num, sum, sum_squares).
// Usage: tensorboard_writer <log_dir> <expected.json>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "lockstep/callbacks/tensorboard.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<6>, Dense<8>, BatchNormalization<>, Relu, Dense<3>>;

struct Expected {
  // run -> tag -> rows; a scalar's row is {step, value}, a histogram's {step, min, max, num, sum, sum_squares}.
  std::map<std::string, std::map<std::string, std::vector<std::vector<double>>>> scalars, histograms;
};

// What the TensorBoard callback should write, gathered from the same hooks.
struct Expect {
  Expected* out;
  std::size_t every;
  template <class View>
  void on_batch_end(std::size_t, const Logs& logs, View& view) {
    const auto done = static_cast<double>(view.run().steps_done);
    if (view.run().steps_done % every != 0) return;
    for (std::size_t i = 0; i < logs.size(); ++i)
      out->scalars["train"]["batch_" + logs.name(i)].push_back({done, static_cast<float>(logs.value(i))});
  }
  template <class View>
  void on_epoch_end(int epoch, const Logs& logs, View& view) {
    const auto step = static_cast<double>(epoch);
    for (std::size_t i = 0; i < logs.size(); ++i) {
      const std::string& name = logs.name(i);
      const bool val = name.rfind("val_", 0) == 0;
      out->scalars[val ? "validation" : "train"]["epoch_" + (val ? name.substr(4) : name)].push_back(
          {step, static_cast<float>(logs.value(i))});
    }
    const Model& model = view.model();
    for (const VariableInfo& v : Model::variables()) {
      const std::vector<float>& all = v.trainable ? model.parameters() : model.state();
      const observe::Histogram h = observe::make_histogram(all.data() + v.offset, v.size());
      out->histograms["train"][v.name + "_0/histogram"].push_back({step, h.min, h.max, h.num, h.sum, h.sum_squares});
    }
  }
};

void write_rows(std::FILE* f, const std::map<std::string, std::vector<std::vector<double>>>& tags) {
  std::fprintf(f, "{");
  const char* tag_sep = "";
  for (const auto& [tag, rows] : tags) {
    std::fprintf(f, "%s\n    \"%s\": [", tag_sep, tag.c_str());
    const char* row_sep = "";
    for (const auto& row : rows) {
      std::fprintf(f, "%s[", row_sep);
      for (std::size_t i = 0; i < row.size(); ++i) std::fprintf(f, "%s%.17g", i ? ", " : "", row[i]);
      std::fprintf(f, "]");
      row_sep = ", ";
    }
    std::fprintf(f, "]");
    tag_sep = ",";
  }
  std::fprintf(f, "}");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <log_dir> <expected.json>\n", argv[0]);
    return 2;
  }
  try {
    const Dataset data = testing::argmax_dataset(60, 6, 3, 1);
    Model model{1};
    Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
    FitOptions options = testing::quiet_fit(20, 2);
    options.validation_data = &data;
    TensorBoardOptions o;
    o.log_dir = argv[1];
    o.histogram_freq = 1;
    o.update_freq = 2;
    TensorBoard tensorboard(o);
    Expected expected;
    Expect expect{&expected, 2};
    trainer.fit(model, data, options, tensorboard, expect);

    std::FILE* f = std::fopen(argv[2], "w");
    if (!f) {
      std::fprintf(stderr, "tensorboard_writer: cannot create %s\n", argv[2]);
      return 1;
    }
    std::fprintf(f, "{\"runs\": {");
    const char* run_sep = "";
    for (const char* run : {"train", "validation"}) {
      std::fprintf(f, "%s\n  \"%s\": {\"scalars\": ", run_sep, run);
      write_rows(f, expected.scalars[run]);
      std::fprintf(f, ",\n   \"histograms\": ");
      write_rows(f, expected.histograms[run]);
      std::fprintf(f, "}");
      run_sep = ",";
    }
    std::fprintf(f, "}}\n");
    if (std::fclose(f) != 0) return 1;
    std::printf("tensorboard_writer: wrote %s and %s\n", argv[1], argv[2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
