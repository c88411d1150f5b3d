// Input<Dims...>: the first element of a Sequential model, the shape of one
// sample (Keras' Input(shape=...)): Input<784>, or Input<28, 28, 1> for an
// image, channels last. Every later layer infers its shape from it at compile time.
#pragma once

#include "lockstep/core/shape.hpp"

namespace lockstep {

template <int... Dims>
struct Input {
  static_assert(sizeof...(Dims) > 0 && ((Dims > 0) && ...),
                "Input<Dims...> needs positive dimensions: Input<784> for 784 features, Input<28, 28, 1> for an image.");
  using shape = Shape<Dims...>;
  static constexpr int kUnits = shape::kSize;
};

}  // namespace lockstep
