// Dense<Units, Activation>: y = Activation(x W + b), Keras' Dense with
// Glorot-uniform weights and zero bias. Parameters are W (In, Units) row-major
// followed by b (Units) in the model's flat buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/backend/host/launch.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/layers/activations.hpp"

namespace lockstep {

template <int Units, class Activation = Linear>
struct Dense {
  static_assert(Units > 0, "Dense<Units> needs Units > 0.");
  static_assert(is_activation_v<Activation>,
                "Dense<Units, Activation>: Activation must be an element-wise activation such as Linear, Relu, "
                "Sigmoid or Tanh. For softmax outputs train on logits (Dense<Units>) with "
                "SparseCategoricalCrossentropy and predict with Model::with_softmax.");
  using activation = Activation;

  template <int In>
  struct Bind {
    static constexpr int kIn = In, kOut = Units;
    static constexpr std::size_t kWeights = static_cast<std::size_t>(In) * Units;
    static constexpr std::size_t kParams = kWeights + Units;

    static void init(float* params, std::uint64_t seed, std::uint64_t layer_index) {
      const float limit = std::sqrt(6.0f / static_cast<float>(In + Units));
      for (std::size_t i = 0; i < kWeights; ++i) {
        const float u = Philox4x32::uniform(seed, rng_stream::kLayer + layer_index, i);
        params[i] = (2.0f * u - 1.0f) * limit;
      }
      std::memset(params + kWeights, 0, Units * sizeof(float));
    }

    template <class T>
    static void forward(const T* params, const T* x, T* y, int rows) {
      if (rows == 0) return;
      const T* w = params;
      const T* b = params + kWeights;
      for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<std::size_t>(r) * Units, b, Units * sizeof(T));
      host::gemm<T>(false, false, rows, Units, In, T(1), x, In, w, Units, T(1), y, Units);  // (rows, In) x (In, Units)
      if constexpr (!Activation::kIdentity)
        host::for_each_index(static_cast<std::size_t>(rows) * Units, kernels::ActivateInPlace<Activation, T>{y});
    }

    template <class T>
    static void backward(const T* params, const T* x, const T* y, T* dy, T* dx, T* dparams, int rows) {
      T* dw = dparams;
      T* db = dparams + kWeights;
      if (rows == 0) {
        std::memset(static_cast<void*>(dparams), 0, kParams * sizeof(T));
        return;
      }
      if constexpr (!Activation::kIdentity)
        host::for_each_index(static_cast<std::size_t>(rows) * Units, kernels::ActivationBackward<Activation, T>{y, dy, dy});
      host::gemm<T>(true, false, In, Units, rows, T(1), x, In, dy, Units, T(0), dw, Units);  // (In, rows) x (rows, Units)
      std::memcpy(db, dy, Units * sizeof(T));
      for (int r = 1; r < rows; ++r) {
        const T* row = dy + static_cast<std::size_t>(r) * Units;
        for (int j = 0; j < Units; ++j) db[j] += row[j];
      }
      if (dx) host::gemm<T>(false, true, rows, In, Units, T(1), dy, Units, params, Units, T(0), dx, In);  // (rows, Units) x (Units, In)
    }
  };
};

}  // namespace lockstep
