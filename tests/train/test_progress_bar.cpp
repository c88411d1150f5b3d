// The progress display in Keras' format, one line per epoch off a terminal.
#include <doctest/doctest.h>

#include <cctype>
#include <sstream>
#include <string>

#include "test_helpers.hpp"

using namespace lockstep;

namespace {
// Whether `text` is `pattern`, where '#' stands for one or more digits and
// '@' for a time unit (us, ms or s). Not std::regex: with g++ 12 and the
// sanitizers, <regex>'s own code trips -Wmaybe-uninitialized under -Werror.
bool like(const std::string& text, const std::string& pattern) {
  std::size_t t = 0;
  for (const char p : pattern) {
    if (p == '#') {
      const std::size_t start = t;
      while (t < text.size() && std::isdigit(static_cast<unsigned char>(text[t]))) ++t;
      if (t == start) return false;
    } else if (p == '@') {
      if (text.compare(t, 2, "us") == 0 || text.compare(t, 2, "ms") == 0) t += 2;
      else if (text.compare(t, 1, "s") == 0) t += 1;
      else return false;
    } else if (t < text.size() && text[t] == p) {
      ++t;
    } else {
      return false;
    }
  }
  return t == text.size();
}
}  // namespace

TEST_CASE("the pattern matcher of these tests") {
  CHECK(like("12s 3ms/step", "#s #@/step"));
  CHECK(like("1s 40us/step", "#s #@/step"));
  CHECK(like("1s 2s/step", "#s #@/step"));
  CHECK_FALSE(like("s 3ms/step", "#s #@/step"));
  CHECK_FALSE(like("1s 3ns/step", "#s #@/step"));
  CHECK_FALSE(like("1s 3ms/step!", "#s #@/step"));
}

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
  CHECK(like(out.str(), "Epoch 1/2\n469/469 [" + std::string(30, '=') +
                            "] - #s #@/step - loss: 0.5123 - accuracy: 0.8201\n"));
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
  CHECK(like(l, " 5/10 [" + std::string(14, '=') + ">" + std::string(15, '.') + "] - ETA: #s - loss: 1.0000"));
}
