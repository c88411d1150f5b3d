// Sequential<Input<N>, Layers...>: a model as a type. Shapes propagate at
// compile time (each layer binds to the width before it), and all parameters
// live in one flat buffer with compile-time offsets, so the all-reduce of the
// whole model is one call on one span.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "lockstep/backend/host/context.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/layers/input.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/layers/activation_layer.hpp"
#include "lockstep/layers/softmax.hpp"

namespace lockstep {

namespace detail {
template <class T>
struct is_input : std::false_type {};
template <int N>
struct is_input<Input<N>> : std::true_type {};

template <int In, class... Layers>
struct bind_chain {
  using type = std::tuple<>;
};
template <int In, class L, class... Rest>
struct bind_chain<In, L, Rest...> {
  using bound = bind_layer_t<L, In>;
  using type = decltype(std::tuple_cat(std::declval<std::tuple<bound>>(),
                                       std::declval<typename bind_chain<bound::kOut, Rest...>::type>()));
};

// GEMM FLOPs per sample that training performs in one bound layer with
// weights (Dense): 2 per weight forward, 2 for the weight gradient and, except
// in the first layer (no gradient is needed for the input), 2 for the input
// gradient. Element-wise work is not counted.
template <class B, bool First, class = void>
struct layer_flops {
  static constexpr double value = 0.0;
};
template <class B, bool First>
struct layer_flops<B, First, std::void_t<decltype(B::kWeights)>> {
  static constexpr double value = (First ? 4.0 : 6.0) * static_cast<double>(B::kWeights);
};

// Nothing to do when a layer's gradient is ready (the default hook of backward).
struct NoGradientHook {
  void operator()(std::size_t, std::size_t) const {}
};
}  // namespace detail

template <class First, class... Layers>
class Sequential {
  static_assert(detail::is_input<First>::value,
                "A Sequential model starts with Input<N>: write Sequential<Input<784>, Dense<256, Relu>, Dense<10>>.");
  static_assert(sizeof...(Layers) > 0, "A Sequential model needs at least one layer after Input<N>.");

 public:
  using bound_layers = typename detail::bind_chain<First::kUnits, Layers...>::type;
  static constexpr std::size_t kLayers = sizeof...(Layers);
  template <std::size_t I>
  using layer = std::tuple_element_t<I, bound_layers>;

 private:
  template <std::size_t... I>
  static constexpr std::array<std::size_t, kLayers + 1> offsets(std::index_sequence<I...>) {
    std::array<std::size_t, kLayers + 1> out{};
    const std::size_t sizes[] = {layer<I>::kParams...};
    for (std::size_t i = 0; i < kLayers; ++i) out[i + 1] = out[i] + sizes[i];
    return out;
  }
  template <std::size_t... I>
  static constexpr std::array<int, kLayers + 1> widths(std::index_sequence<I...>) {
    return {First::kUnits, layer<I>::kOut...};
  }
  template <std::size_t... I>
  static constexpr double flops(std::index_sequence<I...>) {
    return (0.0 + ... + detail::layer_flops<layer<I>, I == 0>::value);
  }
  using indices = std::make_index_sequence<kLayers>;

 public:
  // kOffsets[i] is where layer i's parameters start; kOffsets[kLayers] is the total.
  static constexpr std::array<std::size_t, kLayers + 1> kOffsets = offsets(indices{});
  // kWidths[0] is the input width, kWidths[i + 1] layer i's output width.
  static constexpr std::array<int, kLayers + 1> kWidths = widths(indices{});
  static constexpr std::size_t kParams = kOffsets[kLayers];
  static constexpr int kInputs = First::kUnits;
  static constexpr int kOutputs = kWidths[kLayers];
  static constexpr double kTrainFlopsPerSample = flops(indices{});
  // A fingerprint of the layer widths and parameter layout (FNV-1a), which
  // the processes of a multi-worker job compare at start-up.
  static constexpr std::uint64_t kLayoutHash = [] {
    std::uint64_t h = 14695981039346656037ull;
    for (int w : kWidths) h = (h ^ static_cast<std::uint64_t>(w)) * 1099511628211ull;
    for (std::size_t o : kOffsets) h = (h ^ static_cast<std::uint64_t>(o)) * 1099511628211ull;
    return h;
  }();
  static constexpr int kMaxWidth = [] {
    int m = 0;
    for (int w : kWidths) m = w > m ? w : m;
    return m;
  }();

  // The same model with a softmax on its outputs, for predictions. It has the
  // same parameter layout, so it can be built from this model's parameters.
  using with_softmax = Sequential<First, Layers..., Softmax>;

  // Parameters initialised as Keras does, from `seed` only.
  explicit Sequential(std::uint64_t seed = 0) : params_(kParams) { initialize(params_.data(), seed); }
  explicit Sequential(std::vector<float> parameters) : params_(std::move(parameters)) {
    require(params_.size() == kParams, "Sequential: ", params_.size(), " parameters given, the model has ", kParams);
  }
  // A copy is a new model: it gets its own identity (and so, in a Trainer,
  // its own optimizer state).
  Sequential(const Sequential& other) : params_(other.params_) {}
  Sequential& operator=(const Sequential& other) {
    params_ = other.params_;
    id_ = next_id();
    return *this;
  }

  // Unique per model object for the life of the process; a Trainer keeps
  // optimizer state per identity (an address could be reused).
  std::uint64_t identity() const { return id_; }

  std::vector<float>& parameters() { return params_; }
  const std::vector<float>& parameters() const { return params_; }

  static void initialize(float* params, std::uint64_t seed) {
    for_each_layer([&](auto i) { layer<i>::init(params + kOffsets[i], seed, i); });
  }

  // Activations of one replica for up to `capacity` rows, allocated once.
  // T is float for training; the gradient tests use double.
  template <class T, class Ctx = host::Context>
  class BasicWorkspace {
   public:
    using scalar = T;
    using context = Ctx;
    explicit BasicWorkspace(int capacity = 0) : capacity_(capacity) {
      for (std::size_t i = 0; i < kLayers; ++i)
        acts_[i].resize(static_cast<std::size_t>(capacity) * kWidths[i + 1]);
      grads_[0].resize(static_cast<std::size_t>(capacity) * kMaxWidth);
      grads_[1].resize(static_cast<std::size_t>(capacity) * kMaxWidth);
    }
    int capacity() const { return capacity_; }
    T* activation(std::size_t i) { return acts_[i].data(); }
    T* output() { return acts_[kLayers - 1].data(); }
    // Where the loss writes dLoss/doutput (rows, kOutputs) before backward.
    T* output_grad() { return grads_[0].data(); }
    T* grad(int which) { return grads_[which].data(); }

   private:
    int capacity_;
    std::array<typename Ctx::template buffer<T>, kLayers> acts_;
    std::array<typename Ctx::template buffer<T>, 2> grads_;
  };
  using Workspace = BasicWorkspace<float>;

  // Runs the layers on x (rows, kInputs) through ctx, the backend's context;
  // returns the outputs (rows, kOutputs) in ws. All pointers are memory of
  // ctx's backend.
  template <class Ctx, class T>
  static const T* forward(Ctx& ctx, const T* params, const T* x, int rows, BasicWorkspace<T, Ctx>& ws) {
    check_rows(rows, ws.capacity());
    for_each_layer([&](auto i) {
      const T* in = i == 0 ? x : ws.activation(i - 1);
      detail::layer_forward<layer<i>>(ctx, params + kOffsets[i], in, ws.activation(i), rows);
    });
    return ws.output();
  }
  // The same on the host, on the calling thread.
  template <class T>
  static const T* forward(const T* params, const T* x, int rows, BasicWorkspace<T>& ws) {
    return forward(host::default_context(), params, x, rows, ws);
  }

  // Backward from ws.output_grad() after forward on the same x. Writes all of
  // `grads` (kParams) and calls on_ready(offset, count) as each layer's
  // gradient is complete, last layer first, so a collective can start on it.
  template <class Ctx, class T, class OnReady = detail::NoGradientHook>
  static void backward(Ctx& ctx, const T* params, const T* x, int rows, BasicWorkspace<T, Ctx>& ws, T* grads,
                       OnReady&& on_ready = {}) {
    check_rows(rows, ws.capacity());
    int cur = 0;
    for_each_layer_reversed([&](auto i) {
      const T* in = i == 0 ? x : ws.activation(i - 1);
      T* dx = i == 0 ? nullptr : ws.grad(1 - cur);
      detail::layer_backward<layer<i>>(ctx, params + kOffsets[i], in, ws.activation(i), ws.grad(cur), dx,
                                       grads + kOffsets[i], rows);
      on_ready(kOffsets[i], layer<i>::kParams);
      cur = 1 - cur;
    });
  }
  template <class T, class OnReady = detail::NoGradientHook>
  static void backward(const T* params, const T* x, int rows, BasicWorkspace<T>& ws, T* grads,
                       OnReady&& on_ready = {}) {
    backward(host::default_context(), params, x, rows, ws, grads, std::forward<OnReady>(on_ready));
  }

 private:
  static void check_rows(int rows, int capacity) {
    require(rows >= 0 && rows <= capacity, "Sequential: ", rows, " rows, the workspace holds ", capacity);
  }
  template <class F, std::size_t... I>
  static void for_each_layer(F&& f, std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }
  template <class F>
  static void for_each_layer(F&& f) {
    for_each_layer(f, indices{});
  }
  template <class F, std::size_t... I>
  static void for_each_layer_reversed(F&& f, std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, kLayers - 1 - I>{}), ...);
  }
  template <class F>
  static void for_each_layer_reversed(F&& f) {
    for_each_layer_reversed(f, indices{});
  }

  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }

  std::vector<float> params_;
  std::uint64_t id_ = next_id();
};

namespace detail {
template <class T>
struct is_model : std::false_type {};
template <class... L>
struct is_model<Sequential<L...>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
