// A helper of the Python round-trip test (tests/io/python_roundtrip.sh):
//   weights_tool write PATH          saves a fixed model: parameter i = i / 8, state j = 1 + j
//   weights_tool check PATH SCALE    loads PATH and checks every value is SCALE times those
// It exits 0 when the check holds, 1 with the first difference otherwise.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "lockstep/lockstep.hpp"

using Model = lockstep::Sequential<lockstep::Input<3>, lockstep::Dense<2>, lockstep::BatchNormalization<>>;

int main(int argc, char** argv) {
  try {
    if (argc < 3) return 2;
    const std::string mode = argv[1], path = argv[2];
    Model model{0};
    if (mode == "write") {
      for (std::size_t i = 0; i < model.parameters().size(); ++i) model.parameters()[i] = static_cast<float>(i) / 8.0f;
      for (std::size_t j = 0; j < model.state().size(); ++j) model.state()[j] = 1.0f + static_cast<float>(j);
      lockstep::save_weights(model, path);
      return 0;
    }
    const float scale = argc > 3 ? std::strtof(argv[3], nullptr) : 1.0f;
    lockstep::load_weights(model, path);
    for (std::size_t i = 0; i < model.parameters().size(); ++i)
      if (model.parameters()[i] != scale * static_cast<float>(i) / 8.0f) {
        std::fprintf(stderr, "parameter %zu is %g, expected %g\n", i, model.parameters()[i],
                     scale * static_cast<float>(i) / 8.0f);
        return 1;
      }
    for (std::size_t j = 0; j < model.state().size(); ++j)
      if (model.state()[j] != scale * (1.0f + static_cast<float>(j))) {
        std::fprintf(stderr, "state %zu is %g, expected %g\n", j, model.state()[j], scale * (1.0f + static_cast<float>(j)));
        return 1;
      }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
