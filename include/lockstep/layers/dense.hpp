// Dense<Units, Activation>: y = Activation(x W + b), Keras' Dense with
// Glorot-uniform weights and zero bias. Parameters are W (In, Units) row-major
// followed by b (Units) in the model's flat buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <vector>

#include "lockstep/core/rng.hpp"
#include "lockstep/core/shape.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/ops/activations.hpp"

namespace lockstep {

template <int Units, class Activation = Linear>
struct Dense {
  static_assert(Units > 0, "Dense<Units> needs Units > 0.");
  static_assert(is_activation_v<Activation>,
                "Dense<Units, Activation>: Activation must be an element-wise activation such as Linear, Relu, "
                "Sigmoid or Tanh. For softmax outputs train on logits (Dense<Units>) with "
                "SparseCategoricalCrossentropy and predict with Model::with_softmax.");
  using activation = Activation;

  template <class InShape>
  struct Bind {
    static_assert(InShape::kRank == 1,
                  "Dense<Units> takes a flat vector per sample: put Flatten before it (Keras' Dense on a "
                  "higher-rank input acts on the last axis only; lockstep asks for the Flatten explicitly).");
    static constexpr int In = InShape::kSize;
    using out_shape = Shape<Units>;
    static constexpr int kIn = In, kOut = Units;
    static constexpr const char* kName = "dense";  // Keras' layer name, for saved weights
    static constexpr std::size_t kWeights = static_cast<std::size_t>(In) * Units;
    static constexpr std::size_t kParams = kWeights + Units;
    // Its sums over rows go through the pass (pass.rows): the deterministic
    // row-order scheme may run it (core/determinism.hpp).
    static constexpr bool kRowOrder = true;
    // Backward meets at weight_gradients before the dx GEMM; its activation's
    // backward before that writes its own dy, which no layer above published.
    static constexpr bool kMeetsFirst = true;

    // f(name, trainable, offset, shape) for each variable, Keras' names and
    // shapes; offsets into the layer's parameters (trainable) or state.
    template <class F>
    static void variables(F&& f) {
      f("kernel", true, std::size_t{0}, std::vector<std::int64_t>{In, Units});
      f("bias", true, kWeights, std::vector<std::int64_t>{Units});
    }

    static void init(float* params, std::uint64_t seed, std::uint64_t layer_index) {
      const float limit = std::sqrt(6.0f / static_cast<float>(In + Units));
      for (std::size_t i = 0; i < kWeights; ++i) {
        const float u = Philox4x32::uniform(seed, rng_stream::kLayer + layer_index, i);
        params[i] = (2.0f * u - 1.0f) * limit;
      }
      std::memset(params + kWeights, 0, Units * sizeof(float));
    }

    // y = Act(x W + b): one fused call (cuBLASLt's bias and ReLU epilogues on CUDA).
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P&, Slots<T> s, const T* x, T* y, int rows) {
      if (rows == 0) return;
      const T* params = s.params;
      ctx.template affine<Activation>(x, params, params + kWeights, y, rows, In, Units);
    }

    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P& pass, Slots<T> s, const T* x, const T* y, T* dy, T* dx, T* dparams, int rows) {
      const T* params = s.params;
      T* dw = dparams;
      T* db = dparams + kWeights;
      if constexpr (!Activation::kIdentity)
        if (rows > 0)
          ctx.for_each_index(static_cast<std::size_t>(rows) * Units,
                             kernels::ActivationBackward<Activation, T>{y, dy, dy});
      // (In, rows) x (rows, Units); dy's column sums. Nothing writes over x or
      // dy before every replica has read them where this is the first layer
      // (dx null) or the layer below meets the replicas first.
      pass.rows.weight_gradients(ctx, x, In, dy, Units, rows, dw, db, dx != nullptr && !pass.below_meets_first);
      if (dx && rows > 0)
        ctx.gemm(false, true, rows, In, Units, T(1), dy, Units, params, Units, T(0), dx, In);  // (rows, Units) x (Units, In)
    }
  };
};

}  // namespace lockstep
