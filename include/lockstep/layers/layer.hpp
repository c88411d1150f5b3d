// What a layer is (contract v2). A layer policy L has
// `template <class In> struct Bind`, the layer bound to the shape In of its
// input (a Shape<...>), which provides:
//   using out_shape                          the shape of its output
//   kIn, kOut                                values per sample in and out
//   kParams                                  trainable parameters (the flat buffer)
//   kState       (optional, 0)               non-trainable values: moving
//                                            statistics; saved with the model,
//                                            never given to the optimizer
//   kScratch, kScratchPerRow (optional, 0)   per-replica scratch: fixed, and per row
//   init(float* params, seed, layer_index)   Keras' initialisers
//   init_state(float* state)  (optional)     the state's initial values
//   kRowOrder    (optional)                  true: its sums over rows go through
//                                            pass.rows (the deterministic row-order
//                                            scheme may run it; see row_order_ready)
//   kMeetsFirst  (optional)                  true: in the row-order scheme its
//                                            backward meets every replica at a sum
//                                            over rows before it writes anything
//                                            but its own scratch (meets_first)
//   kName, variables(f)       (optional)     Keras' layer name ("dense") and
//                                            f(name, trainable, offset, shape)
//                                            per variable: saved weights' names
//   forward(ctx, pass, slots, x, y, rows)    y(rows, kOut) from x(rows, kIn)
//   backward(ctx, pass, slots, x, y, dy, dx, dparams, rows)
//       after forward on the same x with the same pass: given dy = dLoss/dy
//       (may be overwritten), writes all of dparams and, when dx is not null,
//       dLoss/dx.
// ctx is the backend's context (host::Context, gpu::Context): the layer
// computes through its members, so one layer runs on every backend. pass is a
// BasicPass (layers/pass.hpp): mode, global row index, random key, the sum
// over replicas. slots are the layer's own parameters, state and scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "lockstep/core/shape.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/layers/pass.hpp"
#include "lockstep/ops/activations.hpp"

namespace lockstep {

// A bound layer's memory, all in the backend's memory: its parameters (the
// model's flat buffer at the layer's offset), its non-trainable state, and scratch.
template <class T>
struct Slots {
  const T* params = nullptr;
  T* state = nullptr;
  T* scratch = nullptr;
};

template <class Act>
struct ActivationLayer;

namespace detail {
template <class L>
using bind_probe = typename L::template Bind<Shape<1>>;

template <class L, class In, bool IsActivation = is_activation_v<L>>
struct bind_layer {
  static_assert(is_detected<bind_probe, L>,
                "This type is not a lockstep layer: write Dense<Units, Activation>, an activation such as Relu, "
                "or a type with a nested template <class InShape> struct Bind (see layers/layer.hpp).");
  using type = typename L::template Bind<In>;
};
// An activation on its own (Sequential<..., Relu>) is a parameter-free layer.
template <class L, class In>
struct bind_layer<L, In, true> {
  using type = typename ActivationLayer<L>::template Bind<In>;
};

// The shapes and no-op initialiser of a layer without parameters or state
// whose output has its input's shape (activations, softmax, dropout).
template <class In>
struct ShapePreserving {
  using out_shape = In;
  static constexpr int kIn = In::kSize, kOut = In::kSize;
  static constexpr std::size_t kParams = 0;
  static void init(float*, std::uint64_t, std::uint64_t) {}
};

// The optional members of a bound layer, with their defaults.
template <class B>
using state_probe = decltype(B::kState);
template <class B>
using scratch_probe = decltype(B::kScratch);
template <class B>
using scratch_per_row_probe = decltype(B::kScratchPerRow);
template <class B>
using init_state_probe = decltype(B::init_state(static_cast<float*>(nullptr)));

struct VariableProbe {
  template <class Shape>
  void operator()(const char*, bool, std::size_t, const Shape&) const {}
};
template <class B>
using variables_probe = decltype(B::kName, B::variables(VariableProbe{}));

template <class B>
using kind_probe = decltype(B::kName);
// A bound layer's kind as Keras names it ("dense", "batch_normalization"), or "layer".
template <class B>
const char* layer_kind() {
  if constexpr (is_detected<kind_probe, B>)
    return B::kName;
  else
    return "layer";
}

template <class B>
constexpr std::size_t state_size() {
  if constexpr (is_detected<state_probe, B>)
    return B::kState;
  else
    return 0;
}
template <class B>
constexpr std::size_t scratch_size(std::size_t rows) {
  std::size_t n = 0;
  if constexpr (is_detected<scratch_probe, B>) n += B::kScratch;
  if constexpr (is_detected<scratch_per_row_probe, B>) n += B::kScratchPerRow * rows;
  return n;
}
// Whether the deterministic row-order scheme (core/determinism.hpp) can run a
// bound layer: it declares kRowOrder (its sums over rows go through the
// pass's `rows`), or it has neither parameters nor state, so nothing of it
// is summed over rows.
template <class B>
using row_order_probe = decltype(B::kRowOrder);
template <class B>
constexpr bool row_order_ready() {
  if constexpr (is_detected<row_order_probe, B>)
    return B::kRowOrder;
  else
    return B::kParams == 0 && state_size<B>() == 0;
}

// Whether a bound layer's backward, in the row-order scheme, meets every
// replica at a sum over rows before it writes over any buffer another layer
// published rows from (the gradient it writes as dx, or its dy): the layer
// above it then needs no second meeting to keep those rows until every
// replica has read them (BasicPass::below_meets_first).
template <class B>
using meets_first_probe = decltype(B::kMeetsFirst);
template <class B>
constexpr bool meets_first() {
  if constexpr (is_detected<meets_first_probe, B>)
    return B::kMeetsFirst;
  else
    return false;
}

template <class B>
void init_state(float* state) {
  if constexpr (is_detected<init_state_probe, B>) B::init_state(state);
}
}  // namespace detail

template <class L, class In>
using bind_layer_t = typename detail::bind_layer<L, In>::type;

}  // namespace lockstep
