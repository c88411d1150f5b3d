// Reshape<Dims...>: Keras' Reshape(target_shape), the same values of a sample
// in the same (row-major, channels last) order under another shape: a copy,
// no parameters. One dimension may be -1, inferred from the others as Keras
// does (Reshape<-1, 1> on 784 values gives (784, 1)). Flatten is the same
// layer with one axis (layers/flatten.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/core/shape.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

namespace detail {
// A parameter-free layer whose output holds its input's values unchanged
// under the shape Out.
template <class In, class Out>
struct SameValues {
  static_assert(In::kSize == Out::kSize, "A reshaping layer must keep every value of the sample.");
  using out_shape = Out;
  static constexpr int kIn = In::kSize, kOut = Out::kSize;
  static constexpr std::size_t kParams = 0;
  static void init(float*, std::uint64_t, std::uint64_t) {}
  template <class Ctx, class P, class T>
  static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
    ctx.copy(y, x, static_cast<std::size_t>(rows) * kIn);
  }
  template <class Ctx, class P, class T>
  static void backward(Ctx& ctx, const P&, Slots<T>, const T*, const T*, T* dy, T* dx, T*, int rows) {
    if (dx) ctx.copy(dx, dy, static_cast<std::size_t>(rows) * kIn);
  }
};

// Reshape's target with its -1 (if any) replaced by what makes `size` values.
template <int Size, int... Dims>
struct reshape_target {
  static constexpr int kInferred = (0 + ... + (Dims == -1 ? 1 : 0));
  static constexpr int kKnown = (1 * ... * (Dims == -1 ? 1 : Dims));
  static_assert(kInferred <= 1, "Reshape<Dims...>: at most one dimension may be -1 (inferred), as in Keras.");
  static_assert(((Dims > 0 || Dims == -1) && ...),
                "Reshape<Dims...>: every dimension must be positive, or -1 for the one to infer.");
  static_assert(kInferred == 1 ? (kKnown > 0 && Size % kKnown == 0) : kKnown == Size,
                "Reshape<Dims...>: the target shape must hold exactly the input's values: the product of Dims "
                "must equal the input's size (a -1 must divide it evenly), as Keras' Reshape requires.");
  using type = Shape<(Dims == -1 ? (kKnown > 0 ? Size / kKnown : 1) : Dims)...>;
};
}  // namespace detail

template <int... Dims>
struct Reshape {
  static_assert(sizeof...(Dims) > 0, "Reshape<Dims...> needs the target shape: Reshape<28, 28, 1>.");
  template <class In>
  struct Bind : detail::SameValues<In, typename detail::reshape_target<In::kSize, Dims...>::type> {
    static constexpr const char* kName = "reshape";
  };
};

}  // namespace lockstep
