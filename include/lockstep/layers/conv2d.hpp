// Conv2D<Filters, KernelH, KernelW = KernelH, Strides = Strides<1, 1>,
//        Padding = Valid, Activation = Linear, UseBias = true>:
// Keras' Conv2D(filters, kernel_size=(KernelH, KernelW), strides, padding,
// activation, use_bias) on (H, W, C) samples, channels last. Parameters are
// the kernel (KH, KW, Cin, Filters) row-major, Keras' layout and Glorot-
// uniform initialiser (fan_in = KH KW Cin, fan_out = KH KW Filters), then the
// bias (Filters), zeros. The output shape is computed at compile time:
// Valid gives floor((in - k) / s) + 1 per axis, Same gives ceil(in / s).
// The convolution runs through the context (conv2d_forward/backward): the
// host's im2col + GEMM or oneDNN, cuDNN on GPUs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/core/rng.hpp"
#include "lockstep/core/shape.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/layers/window.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep {

template <int Filters, int KernelH, int KernelW = KernelH, class S = Strides<1, 1>, class Padding = Valid,
          class Activation = Linear, bool UseBias = true>
struct Conv2D {
  static_assert(Filters > 0 && KernelH > 0 && KernelW > 0,
                "Conv2D<Filters, KernelH, KernelW>: the filter count and kernel sizes must be positive, as Keras' "
                "Conv2D(32, (3, 3)) is Conv2D<32, 3, 3>.");
  static_assert(detail::is_strides<S>::value,
                "Conv2D's fourth argument is the strides: write Strides<1, 1> (Keras' strides=(1, 1)); the "
                "argument order is Conv2D<Filters, KernelH, KernelW, Strides, Padding, Activation, UseBias>.");
  static_assert(detail::is_padding_v<Padding>,
                "Conv2D's fifth argument is the padding: write Valid or Same (Keras' padding='valid' or 'same').");
  static_assert(is_activation_v<Activation>,
                "Conv2D's sixth argument is the activation: Linear, Relu, Sigmoid or Tanh (as Dense's).");
  using activation = Activation;

  template <class In>
  struct Bind {
    static_assert(In::kRank == 3,
                  "Conv2D takes (height, width, channels) samples: start the model with Input<H, W, C> (for "
                  "28x28 grey images, Input<28, 28, 1>), or put Reshape<H, W, C> before it.");
    static_assert(Padding::kSame || (KernelH <= In::kDims[0] && KernelW <= In::kDims[1]),
                  "Conv2D with Valid padding: the kernel is larger than its input (height or width), so no "
                  "output position fits; use Same padding, a smaller kernel, or fewer pooling layers before it.");
    static constexpr Window2D kGeometry = detail::window_on<In, Filters, KernelH, KernelW, S, Padding>();
    static constexpr int kCin = In::kDims[2];
    // (At least 1: an impossible shape gets the sentence above, not a second error.)
    using out_shape = Shape<(kGeometry.out_h > 0 ? kGeometry.out_h : 1), (kGeometry.out_w > 0 ? kGeometry.out_w : 1),
                            Filters>;
    static constexpr int kIn = In::kSize, kOut = out_shape::kSize;
    static constexpr const char* kName = "conv2d";
    static constexpr std::size_t kKernel = kGeometry.kernel_size();
    static constexpr std::size_t kParams = kKernel + (UseBias ? std::size_t{Filters} : 0);
    // Multiply-adds of one sample's forward: the model's FLOP count.
    static constexpr std::size_t kMacsPerSample = kKernel * static_cast<std::size_t>(kGeometry.out_h) *
                                                   static_cast<std::size_t>(kGeometry.out_w);

    template <class F>
    static void variables(F&& f) {
      f("kernel", true, std::size_t{0}, std::vector<std::int64_t>{KernelH, KernelW, kCin, Filters});
      if (UseBias) f("bias", true, kKernel, std::vector<std::int64_t>{Filters});
    }

    static void init(float* params, std::uint64_t seed, std::uint64_t layer_index) {
      const double receptive = static_cast<double>(KernelH) * KernelW;
      const float limit = static_cast<float>(std::sqrt(6.0 / (receptive * kCin + receptive * Filters)));
      for (std::size_t i = 0; i < kKernel; ++i) {
        const float u = Philox4x32::uniform(seed, rng_stream::kLayer + layer_index, i);
        params[i] = (2.0f * u - 1.0f) * limit;
      }
      for (std::size_t i = kKernel; i < kParams; ++i) params[i] = 0.0f;
    }

    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T> s, const T* x, T* y, int rows) {
      static_assert(detail::check_windowed_context<Ctx>());
      if (rows == 0) return;
      ctx.template conv2d_forward<Activation>(kGeometry, x, s.params, UseBias ? s.params + kKernel : nullptr, y,
                                              rows);
    }

    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P&, Slots<T> s, const T* x, const T* y, T* dy, T* dx, T* dparams, int rows) {
      if (rows == 0) {  // the contexts are never asked for an empty batch (cuDNN has no empty tensors)
        ctx.zero(dparams, kParams);
        return;
      }
      T* dbias = UseBias ? dparams + kKernel : nullptr;
      if constexpr (detail::is_detected<detail::conv2d_activation_probe, Ctx, Activation, T>) {
        // The context applies the activation's derivative inside its own loops.
        ctx.template conv2d_activation_backward<Activation>(kGeometry, x, y, s.params, dy, dx, dparams, dbias, rows);
      } else {
        if constexpr (!Activation::kIdentity)
          ctx.for_each_index(static_cast<std::size_t>(rows) * kOut,
                             kernels::ActivationBackward<Activation, T>{y, dy, dy});
        ctx.conv2d_backward(kGeometry, x, s.params, dy, dx, dparams, dbias, rows);
      }
    }
  };
};

}  // namespace lockstep
