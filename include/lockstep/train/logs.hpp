// What the training loop reports: Logs (named values of one step or epoch,
// allocated once per fit and updated in place), TrainInfo, and History, the
// per-epoch record fit returns (Keras' History.history).
#pragma once

#include <charconv>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {
// The shortest text that reads back as `v`, as Python's repr writes floats
// (CSV logs and file names carry values the way Keras writes them).
inline std::string shortest(double v) {
  if (v != v) return "nan";
  char text[32];
  const auto r = std::to_chars(text, text + sizeof text, v);
  return std::string(text, r.ptr);
}
}  // namespace detail

class Logs {
 public:
  void add(std::string name, double value = 0.0) {
    names_.push_back(std::move(name));
    values_.push_back(value);
  }
  std::size_t size() const { return names_.size(); }
  const std::string& name(std::size_t i) const { return names_[i]; }
  double value(std::size_t i) const { return values_[i]; }
  void set(std::size_t i, double value) { values_[i] = value; }
  bool contains(const std::string& name) const {
    for (const auto& n : names_)
      if (n == name) return true;
    return false;
  }
  double operator[](const std::string& name) const {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return values_[i];
    std::string known;
    for (const auto& n : names_) known += (known.empty() ? "" : ", ") + n;
    fail("Logs: no value named '", name, "'; these logs have: ", known.empty() ? "none" : known);
  }

 private:
  std::vector<std::string> names_;
  std::vector<double> values_;
};

struct TrainInfo {
  int epochs = 0;
  std::size_t steps_per_epoch = 0;
  std::size_t batch_size = 0;
  std::size_t samples = 0;
  int replicas = 1;
};

struct History {
  // history["loss"][epoch], history["val_accuracy"][epoch], ...
  std::map<std::string, std::vector<double>> history;
  int epochs = 0;

  void record(const Logs& logs) {
    for (std::size_t i = 0; i < logs.size(); ++i) history[logs.name(i)].push_back(logs.value(i));
    ++epochs;
  }
  const std::vector<double>& operator[](const std::string& name) const {
    const auto it = history.find(name);
    if (it == history.end()) fail("History: no metric named '", name, "'");
    return it->second;
  }
};

}  // namespace lockstep
