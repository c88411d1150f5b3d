// summary(model, out): Keras' model.summary() table: each layer's name and
// type, its output shape (None for the batch axis) and its parameter count,
// then the total, trainable and non-trainable counts (moving statistics are
// non-trainable, as in Keras).
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>
#include <type_traits>
#include <utility>

#include "lockstep/core/traits.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/model/sequential.hpp"

namespace lockstep {

namespace detail {
// Keras' class name from its layer name: batch_normalization -> BatchNormalization,
// conv2d -> Conv2D (a letter after a digit is upper case too).
inline std::string class_name(const std::string& name) {
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
    upper = std::isdigit(static_cast<unsigned char>(c)) != 0;
  }
  return out;
}
inline std::string bytes_text(std::size_t values) {
  char text[32];
  const double bytes = static_cast<double>(values) * 4.0;
  if (bytes >= 1024.0 * 1024.0)
    std::snprintf(text, sizeof text, "%.2f MB", bytes / (1024.0 * 1024.0));
  else if (bytes >= 1024.0)
    std::snprintf(text, sizeof text, "%.2f KB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.2f Byte", bytes);
  return text;
}
template <class S, std::size_t... I>
std::string shape_of(std::index_sequence<I...>) {
  std::string out = "(None";
  ((out += ", " + std::to_string(S::kDims[I])), ...);
  return out + ")";
}
inline std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
// s cut to width - 1 (Keras cuts long cells) and padded to width.
inline std::string cell(std::string s, std::size_t width) {
  if (s.size() >= width) s.resize(width - 1);
  return pad(std::move(s), width);
}
}  // namespace detail

template <class Model>
void summary(const Model&, std::ostream& out, const std::string& name = "sequential") {
  constexpr std::size_t kName = 29, kShape = 26, kLine = 65;
  const std::string rule(kLine, '_'), thick(kLine, '=');
  out << "Model: \"" << name << "\"\n" << rule << '\n';
  out << ' ' << detail::pad("Layer (type)", kName - 1) << detail::pad("Output Shape", kShape) << "Param #\n";
  out << thick << '\n';
  const std::vector<std::string> names = Model::layer_names();
  Model::for_each_layer([&](auto i) {
    using B = typename Model::template layer<decltype(i)::value>;
    const std::size_t params = B::kParams + detail::state_size<B>();
    using S = typename B::out_shape;
    out << ' ' << detail::cell(names[i] + " (" + detail::class_name(detail::layer_kind<B>()) + ")", kName - 1)
        << detail::cell(detail::shape_of<S>(std::make_index_sequence<S::kRank>{}), kShape) << params << '\n';
    out << std::string(kLine, ' ') << '\n';  // Keras leaves a blank row after each layer
  });
  out << thick << '\n';
  out << "Total params: " << Model::kParams + Model::kState << " ("
      << detail::bytes_text(Model::kParams + Model::kState) << ")\n";
  out << "Trainable params: " << Model::kParams << " (" << detail::bytes_text(Model::kParams)
      << ")\n";
  out << "Non-trainable params: " << Model::kState << " (" << detail::bytes_text(Model::kState)
      << ")\n";
  out << rule << '\n';
}

}  // namespace lockstep
