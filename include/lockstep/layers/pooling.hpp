// Pooling layers on (H, W, C) samples, channels last, with Keras' defaults:
//   MaxPooling2D<PoolH = 2, PoolW = PoolH, Strides = Strides<PoolH, PoolW>, Padding = Valid>
//   AveragePooling2D<...the same...>   Same padding leaves the padded
//                                      positions out of each mean's count (TensorFlow)
//   GlobalAveragePooling2D             (H, W, C) -> (C), the mean over H and W
// Keras' strides=None (the pool size) is the default Strides. No parameters;
// the context's pool2d_forward/backward do the work (backward from x, y and
// dy alone, as cuDNN's does: no argmax is kept between the passes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/core/shape.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/layers/window.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep {

namespace detail {
template <class Ctx, class T>
void pool_forward(Ctx& ctx, PoolKind kind, const Window2D& g, const T* x, T* y, int rows) {
  static_assert(detail::check_windowed_context<Ctx>());
  if (rows > 0) ctx.pool2d_forward(kind, g, x, y, rows);
}
template <class Ctx, class T>
void pool_backward(Ctx& ctx, PoolKind kind, const Window2D& g, const T* x, const T* y, const T* dy, T* dx,
                   int rows) {
  if (dx && rows > 0) ctx.pool2d_backward(kind, g, x, y, dy, dx, rows);
}

// The layer of a (PoolH, PoolW) window of kind Kind.
template <PoolKind Kind, int PoolH, int PoolW, class S, class Padding>
struct Pooling2D {
  static_assert(PoolH > 0 && PoolW > 0, "A pooling layer's pool size must be positive: MaxPooling2D<2> is Keras' "
                                        "MaxPooling2D(pool_size=(2, 2)).");
  static_assert(is_strides<S>::value,
                "A pooling layer's third argument is the strides: write Strides<2, 2> (Keras' strides=(2, 2)); "
                "leave it out for Keras' default, the pool size.");
  static_assert(is_padding_v<Padding>,
                "A pooling layer's fourth argument is the padding: write Valid or Same (Keras' padding='valid' "
                "or 'same').");

  template <class In>
  struct Bind {
    static_assert(In::kRank == 3,
                  "Pooling layers take (height, width, channels) samples: start the model with Input<H, W, C>, "
                  "or put Reshape<H, W, C> before the layer.");
    static_assert(Padding::kSame || (PoolH <= In::kDims[0] && PoolW <= In::kDims[1]),
                  "Pooling with Valid padding: the pool is larger than its input (height or width), so no window "
                  "fits; use Same padding, a smaller pool, or fewer pooling layers before it.");
    static constexpr Window2D kGeometry = window_on<In, In::kDims[2], PoolH, PoolW, S, Padding>();
    // (At least 1: an impossible shape gets the sentence above, not a second error.)
    using out_shape = Shape<(kGeometry.out_h > 0 ? kGeometry.out_h : 1), (kGeometry.out_w > 0 ? kGeometry.out_w : 1),
                            In::kDims[2]>;
    static constexpr int kIn = In::kSize, kOut = out_shape::kSize;
    static constexpr const char* kName = Kind == PoolKind::kMax ? "max_pooling2d" : "average_pooling2d";
    static constexpr std::size_t kParams = 0;
    static void init(float*, std::uint64_t, std::uint64_t) {}
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
      pool_forward(ctx, Kind, kGeometry, x, y, rows);
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T>, const T* x, const T* y, T* dy, T* dx, T*, int rows) {
      pool_backward(ctx, Kind, kGeometry, x, y, dy, dx, rows);
    }
  };
};
}  // namespace detail

template <int PoolH = 2, int PoolW = PoolH, class S = Strides<PoolH, PoolW>, class Padding = Valid>
struct MaxPooling2D : detail::Pooling2D<PoolKind::kMax, PoolH, PoolW, S, Padding> {};

template <int PoolH = 2, int PoolW = PoolH, class S = Strides<PoolH, PoolW>, class Padding = Valid>
struct AveragePooling2D : detail::Pooling2D<PoolKind::kAverage, PoolH, PoolW, S, Padding> {};

// Keras' GlobalAveragePooling2D() (keepdims=False): one window over the whole
// sample, so the context's average pooling serves it too.
struct GlobalAveragePooling2D {
  template <class In>
  struct Bind {
    static_assert(In::kRank == 3,
                  "GlobalAveragePooling2D takes (height, width, channels) samples and gives (channels): start the "
                  "model with Input<H, W, C>, or put Reshape<H, W, C> before it.");
    // Strides of the whole sample too: one window, which then writes its gradient without a fill first.
    static constexpr Window2D kGeometry = window::make(In::kDims[0], In::kDims[1], In::kDims[2], In::kDims[2],
                                                       In::kDims[0], In::kDims[1], In::kDims[0], In::kDims[1], false);
    using out_shape = Shape<In::kDims[2]>;
    static constexpr int kIn = In::kSize, kOut = out_shape::kSize;
    static constexpr const char* kName = "global_average_pooling2d";
    static constexpr std::size_t kParams = 0;
    static void init(float*, std::uint64_t, std::uint64_t) {}
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T>, const T* x, T* y, int rows) {
      detail::pool_forward(ctx, PoolKind::kAverage, kGeometry, x, y, rows);
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T>, const T* x, const T* y, T* dy, T* dx, T*, int rows) {
      detail::pool_backward(ctx, PoolKind::kAverage, kGeometry, x, y, dy, dx, rows);
    }
  };
};

}  // namespace lockstep
