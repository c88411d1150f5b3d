// Flatten: Keras' Flatten, (H, W, C) per sample to one vector of H * W * C
// values in the same (row-major, channels last) order: a copy, no parameters
// (Reshape's layer with one axis, layers/reshape.hpp).
#pragma once

#include "lockstep/core/shape.hpp"
#include "lockstep/layers/reshape.hpp"

namespace lockstep {

struct Flatten {
  template <class In>
  struct Bind : detail::SameValues<In, Shape<In::kSize>> {
    static constexpr const char* kName = "flatten";
  };
};

}  // namespace lockstep
