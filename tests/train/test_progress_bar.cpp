// The progress display in Keras' format, one line per epoch off a terminal.
#include <doctest/doctest.h>

#include <regex>
#include <sstream>

#include "test_helpers.hpp"

using namespace lockstep;

TEST_CASE("ProgressBar writes Keras' lines when output is not a terminal") {
  std::ostringstream out;
  ProgressBar bar(out, false);
  TrainInfo info;
  info.epochs = 2;
  info.steps_per_epoch = 469;
  Logs logs;
  logs.add("loss", 0.51234);
  logs.add("accuracy", 0.82011);
  bar.on_train_begin(info);
  bar.on_epoch_begin(0, info);
  for (std::size_t s = 0; s < 469; ++s) bar.on_batch_end(s, logs);
  bar.on_epoch_end(0, logs);
  const std::regex line(R"(Epoch 1/2\n469/469 \[={30}\] - \d+s \d+(us|ms|s)/step - loss: 0\.5123 - accuracy: 0\.8201\n)");
  CHECK(std::regex_match(out.str(), line));
}

TEST_CASE("the in-progress line has an arrow head and an ETA") {
  std::ostringstream out;
  ProgressBar bar(out, true);
  TrainInfo info;
  info.epochs = 1;
  info.steps_per_epoch = 10;
  bar.on_train_begin(info);
  bar.on_epoch_begin(0, info);
  Logs logs;
  logs.add("loss", 1.0);
  const std::string l = bar.line(5, logs, std::chrono::steady_clock::now());
  CHECK(std::regex_match(l, std::regex(R"( 5/10 \[={14}>\.{15}\] - ETA: \d+s - loss: 1\.0000)")));
}
