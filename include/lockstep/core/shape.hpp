// Shape<Dims...>: the compile-time shape of one sample (batch axis left out),
// channels last as in Keras: Shape<784> for a flat vector, Shape<28, 28, 1>
// for an image. Layers bind to the shape before them and say the shape after.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

namespace lockstep {

template <int... Dims>
struct Shape {
  static_assert(sizeof...(Dims) > 0, "Shape<Dims...> needs at least one dimension.");
  static_assert(((Dims > 0) && ...), "Shape<Dims...>: every dimension must be positive.");
  static constexpr int kRank = static_cast<int>(sizeof...(Dims));
  static constexpr int kSize = (1 * ... * Dims);  // values per sample
  static constexpr std::array<int, sizeof...(Dims)> kDims = {Dims...};
  static constexpr int kLast = kDims[sizeof...(Dims) - 1];  // the channel (feature) axis
};

namespace detail {
template <class S>
struct is_shape : std::false_type {};
template <int... D>
struct is_shape<Shape<D...>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
