// Sequential<Input<Dims...>, Layers...>: a model as a type. Shapes propagate
// at compile time (each layer binds to the shape before it), all trainable
// parameters live in one flat buffer with compile-time offsets (so the
// all-reduce of the whole model is one call on one span), and the layers'
// non-trainable state (moving statistics) in a second flat buffer that no
// optimizer sees.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/backend/host/context.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/shape.hpp"
#include "lockstep/layers/activation_layer.hpp"
#include "lockstep/layers/input.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/layers/pass.hpp"
#include "lockstep/layers/softmax.hpp"
#include "lockstep/observe/tracer.hpp"

namespace lockstep {

// One variable of a model as Keras names it: "dense/kernel", "dense_1/bias",
// "batch_normalization/moving_mean"; where it lives in parameters() (trainable)
// or state(), and its shape.
struct VariableInfo {
  std::string name;
  bool trainable = true;
  std::size_t offset = 0;
  std::vector<std::int64_t> shape;
  std::size_t size() const {
    std::size_t n = 1;
    for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
    return n;
  }
};

namespace detail {
template <class T>
struct is_input : std::false_type {};
template <int... N>
struct is_input<Input<N...>> : std::true_type {};

template <class In, class... Layers>
struct bind_chain {
  using type = std::tuple<>;
};
template <class In, class L, class... Rest>
struct bind_chain<In, L, Rest...> {
  using bound = bind_layer_t<L, In>;
  static_assert(detail::is_shape<typename bound::out_shape>::value && bound::out_shape::kSize == bound::kOut,
                "A layer's Bind must say its out_shape, a Shape<...> of kOut values.");
  using type = decltype(std::tuple_cat(std::declval<std::tuple<bound>>(),
                                       std::declval<typename bind_chain<typename bound::out_shape, Rest...>::type>()));
};

// GEMM FLOPs per sample that training performs in one bound layer with
// weights: 2 per multiply-add forward (a Dense weight, kWeights; a
// convolution's kMacsPerSample), 2 for the weight gradient and, except in the
// first layer (no gradient is needed for the input), 2 for the input
// gradient. Element-wise work is not counted.
template <class B>
using macs_probe = decltype(B::kMacsPerSample);
template <class B>
using weights_probe = decltype(B::kWeights);
template <class B, bool First>
struct layer_flops {
  static constexpr double macs() {
    if constexpr (is_detected<macs_probe, B>)
      return static_cast<double>(B::kMacsPerSample);
    else if constexpr (is_detected<weights_probe, B>)
      return static_cast<double>(B::kWeights);
    else
      return 0.0;
  }
  static constexpr double value = (First ? 4.0 : 6.0) * macs();
};

// Fusion of a layer with the activation layer after it (BatchNormalization
// then Relu): the activation's policy where B2 is an activation layer
// (ActivationLayer<Act>::Bind names it `activation`), void otherwise; and
// whether bound layer B runs it inside itself (B::kFuses<Act>, with
// B::forward_activated and B::backward_activated).
template <class B2, class = void>
struct activation_of {
  using type = void;
};
template <class B2>
struct activation_of<B2, std::void_t<typename B2::activation>> {
  using type = typename B2::activation;
};
template <class B, class Act, class = void>
struct fuses_activation : std::false_type {};
template <class B, class Act>
struct fuses_activation<B, Act, std::enable_if_t<B::template kFuses<Act>>> : std::true_type {};

// Nothing to do when a layer's gradient is ready (the default hook of backward).
struct NoGradientHook {
  void operator()(std::size_t, std::size_t) const {}
};
}  // namespace detail

template <class First, class... Layers>
class Sequential {
  static_assert(detail::is_input<First>::value,
                "A Sequential model starts with Input<N> (or Input<H, W, C>): write Sequential<Input<784>, Dense<256, Relu>, Dense<10>>.");
  static_assert(sizeof...(Layers) > 0, "A Sequential model needs at least one layer after Input<N>.");

 public:
  using input_shape = typename First::shape;
  using bound_layers = typename detail::bind_chain<input_shape, Layers...>::type;
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
  static constexpr std::array<std::size_t, kLayers + 1> state_offsets(std::index_sequence<I...>) {
    std::array<std::size_t, kLayers + 1> out{};
    const std::size_t sizes[] = {detail::state_size<layer<I>>()...};
    for (std::size_t i = 0; i < kLayers; ++i) out[i + 1] = out[i] + sizes[i];
    return out;
  }
  template <std::size_t... I>
  static constexpr std::array<int, kLayers + 1> widths(std::index_sequence<I...>) {
    return {First::kUnits, layer<I>::kOut...};
  }
  // The activation policy of layer I + 1 where it is an activation layer, else void.
  template <std::size_t I>
  using next_activation = typename detail::activation_of<layer<I + 1>>::type;

 public:
  // Whether layer I runs the activation layer after it inside itself
  // (detail::fuses_activation: BatchNormalization then Relu). Forward then
  // writes the activation's output, not its own, and backward takes the
  // gradient of the activation's output; the activation layer runs nothing
  // and its own output is never stored. Parameters, state, names and
  // results are those of the two layers run one after the other.
  template <std::size_t I>
  static constexpr bool fuses_next() {
    if constexpr (I + 1 >= kLayers) {
      return false;
    } else {
      using Act = next_activation<I>;
      if constexpr (std::is_void_v<Act>)
        return false;
      else
        return detail::fuses_activation<layer<I>, Act>::value;
    }
  }
  template <std::size_t I>
  static constexpr bool fused_into_previous() {
    if constexpr (I == 0)
      return false;
    else
      return fuses_next<I - 1>();
  }
  // Whether the layer whose backward runs after layer I's (the one below,
  // past an activation fused into the layer before it) meets every replica
  // first (detail::meets_first): backward's pass.below_meets_first.
  template <std::size_t I>
  static constexpr bool below_meets_first() {
    if constexpr (I == 0)
      return false;
    else if constexpr (fused_into_previous<I - 1>())
      return below_meets_first<I - 1>();
    else
      return detail::meets_first<layer<I - 1>>();
  }

 private:
  // The values per row of layer I's output that a workspace stores: none
  // where the activation layer after it is fused (its output is stored instead).
  template <std::size_t... I>
  static constexpr std::array<int, kLayers> stored_widths(std::index_sequence<I...>) {
    return {(fuses_next<I>() ? 0 : layer<I>::kOut)...};
  }
  template <std::size_t... I>
  static constexpr double flops(std::index_sequence<I...>) {
    return (0.0 + ... + detail::layer_flops<layer<I>, I == 0>::value);
  }
  template <std::size_t... I>
  static constexpr std::size_t first_without_row_order(std::index_sequence<I...>) {
    const bool ready[] = {detail::row_order_ready<layer<I>>()...};
    for (std::size_t i = 0; i < kLayers; ++i)
      if (!ready[i]) return i;
    return kLayers;
  }
  using indices = std::make_index_sequence<kLayers>;

 public:
  // The first layer the deterministic row-order scheme cannot run
  // (detail::row_order_ready), or kLayers when it runs them all.
  static constexpr std::size_t kFirstWithoutRowOrder = first_without_row_order(indices{});
  // kOffsets[i] is where layer i's parameters start; kOffsets[kLayers] is the total.
  static constexpr std::array<std::size_t, kLayers + 1> kOffsets = offsets(indices{});
  // kWidths[0] is the input width, kWidths[i + 1] layer i's output width.
  static constexpr std::array<int, kLayers + 1> kWidths = widths(indices{});
  static constexpr std::size_t kParams = kOffsets[kLayers];
  // kStateOffsets[i] is where layer i's non-trainable state starts; kState is the total.
  static constexpr std::array<std::size_t, kLayers + 1> kStateOffsets = state_offsets(indices{});
  static constexpr std::size_t kState = kStateOffsets[kLayers];
  static constexpr int kInputs = First::kUnits;
  static constexpr int kOutputs = kWidths[kLayers];
  static constexpr double kTrainFlopsPerSample = flops(indices{});
  // A fingerprint of the layer widths and parameter layout (FNV-1a), which
  // the processes of a multi-worker job compare at start-up.
  static constexpr std::uint64_t kLayoutHash = [] {
    // Typed constants: g++ 12 misreads (h ^ uint64_t(int)) * 1...ull as a sign change.
    constexpr std::uint64_t kBasis = 14695981039346656037u, kPrime = 1099511628211u;
    std::uint64_t h = kBasis;
    for (int w : kWidths) h = (h ^ static_cast<std::uint64_t>(w)) * kPrime;
    for (std::size_t o : kOffsets) h = (h ^ static_cast<std::uint64_t>(o)) * kPrime;
    for (std::size_t o : kStateOffsets) h = (h ^ static_cast<std::uint64_t>(o)) * kPrime;
    for (int d : input_shape::kDims) h = (h ^ static_cast<std::uint64_t>(d)) * kPrime;
    return h;
  }();
  // kStoredWidths[i]: the values per row of layer i's output a workspace
  // holds (kWidths[i + 1], or 0 where fuses_next<i>()).
  static constexpr std::array<int, kLayers> kStoredWidths = stored_widths(indices{});
  static constexpr int kMaxWidth = [] {
    int m = 0;
    for (int w : kWidths) m = w > m ? w : m;
    return m;
  }();

  // The same model with a softmax on its outputs, for predictions. It has the
  // same parameter layout, so it can be built from this model's parameters.
  using with_softmax = Sequential<First, Layers..., Softmax>;

  // Parameters initialised as Keras does, from `seed` only; state at its initial values.
  explicit Sequential(std::uint64_t seed = 0) : params_(kParams), state_(kState) {
    initialize(params_.data(), seed);
    initialize_state(state_.data());
  }
  explicit Sequential(std::vector<float> parameters) : params_(std::move(parameters)), state_(kState) {
    require(params_.size() == kParams, "Sequential: ", params_.size(), " parameters given, the model has ", kParams);
    initialize_state(state_.data());
  }
  // A copy is a new model: it gets its own identity (and so, in a Trainer,
  // its own optimizer state).
  Sequential(const Sequential& other) : params_(other.params_), state_(other.state_) {}
  Sequential& operator=(const Sequential& other) {
    params_ = other.params_;
    state_ = other.state_;
    id_ = next_id();
    return *this;
  }

  // Unique per model object for the life of the process; a Trainer keeps
  // optimizer state per identity (an address could be reused).
  std::uint64_t identity() const { return id_; }

  // The trainable parameters (kParams) and the non-trainable state (kState).
  std::vector<float>& parameters() { return params_; }
  const std::vector<float>& parameters() const { return params_; }
  std::vector<float>& state() { return state_; }
  const std::vector<float>& state() const { return state_; }

  static void initialize(float* params, std::uint64_t seed) {
    for_each_layer([&](auto i) { layer<i>::init(params + kOffsets[i], seed, i); });
  }
  // Each layer's name as Keras gives it: a kind's first instance is "dense",
  // the next "dense_1", and so on.
  static std::vector<std::string> layer_names() {
    std::vector<std::string> out;
    std::map<std::string, int> seen;
    for_each_layer([&](auto i) {
      const std::string kind = detail::layer_kind<layer<i>>();
      const int n = seen[kind]++;
      out.push_back(n == 0 ? kind : kind + "_" + std::to_string(n));
    });
    return out;
  }

  // Layer i's name as a C string that lives as long as the program (the
  // profiler's span names). The first call makes them all: a profiled
  // executor calls it before its first step.
  static const char* layer_name(std::size_t i) {
    static const std::vector<std::string> names = layer_names();
    return names[i].c_str();
  }

  // Every variable, in layer order, named "<layer name>/<variable>" as Keras
  // names them ("dense_1/kernel", "batch_normalization/moving_mean").
  static std::vector<VariableInfo> variables() {
    std::vector<VariableInfo> out;
    const std::vector<std::string> names = layer_names();
    for_each_layer([&](auto i) {
      using B = layer<i>;
      if constexpr (detail::is_detected<detail::variables_probe, B>) {
        B::variables([&](const char* name, bool trainable, std::size_t offset, const std::vector<std::int64_t>& shape) {
          out.push_back({names[i] + "/" + name, trainable, (trainable ? kOffsets[i] : kStateOffsets[i]) + offset, shape});
        });
      }
    });
    return out;
  }

  static void initialize_state(float* state) {
    for_each_layer([&](auto i) { detail::init_state<layer<i>>(state + kStateOffsets[i]); });
  }

  // Activations and layer scratch of one replica for up to `capacity` rows,
  // allocated once in the memory of Ctx's backend. T is float for training;
  // the gradient tests use double.
  template <class T, class Ctx = host::Context>
  class BasicWorkspace {
   public:
    using scalar = T;
    using context = Ctx;
    explicit BasicWorkspace(int capacity = 0) : capacity_(capacity) {
      const std::size_t rows = static_cast<std::size_t>(capacity);
      for (std::size_t i = 0; i < kLayers; ++i) acts_[i].resize(rows * static_cast<std::size_t>(kStoredWidths[i]));
      grads_[0].resize(rows * kMaxWidth);
      grads_[1].resize(rows * kMaxWidth);
      const std::array<std::size_t, kLayers + 1> at = scratch_offsets(rows, indices{});
      scratch_at_ = at;
      scratch_.resize(at[kLayers]);
    }
    // The values a workspace of `rows` rows holds, as a double so that an
    // absurd row count is measured rather than wrapped (the host executor
    // checks a batch's buffers against memory before making them).
    static double values(double rows) {
      const std::size_t fixed = scratch_offsets(0, indices{})[kLayers];
      const std::size_t per_row_scratch = scratch_offsets(1, indices{})[kLayers] - fixed;
      double per_row = 2.0 * kMaxWidth + static_cast<double>(per_row_scratch);
      for (std::size_t i = 0; i < kLayers; ++i) per_row += kStoredWidths[i];
      return rows * per_row + static_cast<double>(fixed);
    }
    int capacity() const { return capacity_; }
    T* activation(std::size_t i) { return acts_[i].data(); }
    T* output() { return acts_[kLayers - 1].data(); }
    // Where the loss writes dLoss/doutput (rows, kOutputs) before backward.
    T* output_grad() { return grads_[0].data(); }
    T* grad(int which) { return grads_[static_cast<std::size_t>(which)].data(); }
    T* scratch(std::size_t layer) { return scratch_.data() + scratch_at_[layer]; }

   private:
    template <std::size_t... I>
    static std::array<std::size_t, kLayers + 1> scratch_offsets(std::size_t rows, std::index_sequence<I...>) {
      std::array<std::size_t, kLayers + 1> out{};
      const std::size_t sizes[] = {detail::scratch_size<layer<I>>(rows)...};
      for (std::size_t i = 0; i < kLayers; ++i) out[i + 1] = out[i] + sizes[i];
      return out;
    }
    int capacity_;
    std::array<typename Ctx::template buffer<T>, kLayers> acts_;
    std::array<typename Ctx::template buffer<T>, 2> grads_;
    typename Ctx::template buffer<T> scratch_;
    std::array<std::size_t, kLayers + 1> scratch_at_{};
  };
  using Workspace = BasicWorkspace<float>;

  // Runs the layers on x (rows, kInputs) through ctx, the backend's context,
  // in pass's mode; returns the outputs (rows, kOutputs) in ws. params
  // (kParams), state (kState) and x are memory of ctx's backend; a training
  // pass may update the state (moving statistics).
  template <class Ctx, class P, class T>
  static const T* forward(Ctx& ctx, const P& pass, const T* params, T* state, const T* x, int rows,
                          BasicWorkspace<T, Ctx>& ws) {
    check_rows(rows, ws.capacity());
    for_each_layer([&](auto i) {
      if constexpr (!fused_into_previous<i>()) {
        const T* in = i == 0 ? x : ws.activation(i - 1);
        const auto span = layer_scope(pass, observe::Phase::kForward, i);
        if constexpr (fuses_next<i>())
          layer<i>::template forward_activated<next_activation<i>>(ctx, pass.for_layer(i), slots<i>(params, state, ws),
                                                                   in, ws.activation(i + 1), rows);
        else
          layer<i>::forward(ctx, pass.for_layer(i), slots<i>(params, state, ws), in, ws.activation(i), rows);
      }
    });
    return ws.output();
  }

  // Backward from ws.output_grad() after a forward on the same x with the
  // same pass. Writes all of `grads` (kParams) and calls on_ready(offset,
  // count) as each layer's gradient is complete, last layer first, so a
  // collective can start on it.
  template <class Ctx, class P, class T, class OnReady = detail::NoGradientHook>
  static void backward(Ctx& ctx, const P& pass, const T* params, T* state, const T* x, int rows,
                       BasicWorkspace<T, Ctx>& ws, T* grads, OnReady&& on_ready = {}) {
    check_rows(rows, ws.capacity());
    int cur = 0;
    for_each_layer_reversed([&](auto i) {
      if constexpr (fused_into_previous<i>()) {
        // The layer before takes the gradient of this one's output as it is.
        on_ready(kOffsets[i], layer<i>::kParams);
        return;
      }
      const T* in = i == 0 ? x : ws.activation(i - 1);
      T* dx = i == 0 ? nullptr : ws.grad(1 - cur);
      {
        const auto span = layer_scope(pass, observe::Phase::kBackward, i);
        const auto layer_pass = pass.for_layer(i, below_meets_first<i>());
        if constexpr (fuses_next<i>())
          layer<i>::template backward_activated<next_activation<i>>(
              ctx, layer_pass, slots<i>(params, state, ws), in, ws.grad(cur), dx, grads + kOffsets[i], rows);
        else
          layer<i>::backward(ctx, layer_pass, slots<i>(params, state, ws), in, ws.activation(i),
                             ws.grad(cur), dx, grads + kOffsets[i], rows);
      }
      on_ready(kOffsets[i], layer<i>::kParams);
      cur = 1 - cur;
    });
  }

 private:
  // Layer i's span on the pass's track, named as Keras names the layer; in
  // an unprofiled pass, nothing (observe/tracer.hpp).
  template <class P>
  static auto layer_scope(const P& pass, observe::Phase phase, std::size_t i) {
    if constexpr (P::kTraced) {
      return observe::scope(pass, phase, pass.track() ? layer_name(i) : nullptr);
    } else {
      return (void)pass, (void)phase, (void)i, observe::NoScope{};
    }
  }
  template <std::size_t I, class T, class Ctx>
  static Slots<T> slots(const T* params, T* state, BasicWorkspace<T, Ctx>& ws) {
    return {params + kOffsets[I], state ? state + kStateOffsets[I] : nullptr, ws.scratch(I)};
  }
  static void check_rows(int rows, int capacity) {
    require(rows >= 0 && rows <= capacity, "Sequential: ", rows, " rows, the workspace holds ", capacity);
  }
  template <class F, std::size_t... I>
  static void for_each_layer(F&& f, std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }

 public:
  // f(i) for each layer index i, as a std::integral_constant (layer<i> is its type).
  template <class F>
  static void for_each_layer(F&& f) {
    for_each_layer(f, indices{});
  }

 private:
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
  std::vector<float> state_;
  std::uint64_t id_ = next_id();
};

namespace detail {
template <class B, class = void>
struct is_softmax : std::false_type {};
template <class B>
struct is_softmax<B, std::enable_if_t<B::kIsSoftmax>> : std::true_type {};
template <class M>
struct ends_with_softmax : is_softmax<typename M::template layer<M::kLayers - 1>> {};

template <class T>
struct is_model : std::false_type {};
template <class... L>
struct is_model<Sequential<L...>> : std::true_type {};
}  // namespace detail

}  // namespace lockstep
