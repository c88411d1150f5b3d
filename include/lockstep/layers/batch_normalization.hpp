// BatchNormalization<Synchronized = false, Hyper = BatchNormDefaults>:
// Keras' BatchNormalization over the last (channel) axis, with its defaults:
// momentum 0.99, epsilon 1e-3, trainable gamma (ones) and beta (zeros),
// non-trainable moving mean (zeros) and moving variance (ones).
//   training   y = gamma (x - mean) / sqrt(var + epsilon) + beta with the
//              batch's mean and (biased) variance, and
//              moving = momentum * moving + (1 - momentum) * batch statistic
//   inference  the same with the moving statistics
// Synchronized = true (Keras' BatchNormalization(synchronized=True),
// PyTorch's SyncBatchNorm; alias SyncBatchNormalization): the statistics are
// those of the global batch, summed over every replica of every process
// inside forward (and backward), so N replicas train exactly as one replica
// on the whole batch. Synchronized = false (TensorFlow's default): each
// replica normalises with its own slice's statistics; the moving statistics
// follow the mean over the replicas that had rows of their slices'
// statistics (tf.distribute's ON_READ MEAN), summed inside forward so that
// every replica keeps the same values.
// Parameters: gamma (C), beta (C). State: moving_mean (C), moving_variance (C).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "lockstep/core/config.hpp"
#include "lockstep/layers/layer.hpp"
#include "lockstep/ops/activations.hpp"

namespace lockstep {

struct BatchNormDefaults {
  static constexpr double kMomentum = 0.99;
  static constexpr double kEpsilon = 1e-3;
};

namespace kernels {
// Every per-channel sum over a replica's (outer, C) values runs in two
// stages. One thread per channel walking all of `outer` leaves a GPU with C
// threads for a feature map's 128 x 26 x 26 rows (milliseconds a call);
// instead stage 1 (ChunkSums) gives each chunk of kChunk consecutive rows of
// a channel a thread, which sums them in double and rounds once, and stage 2
// adds a channel's chunks in chunk order (chunk_total). The order depends on
// `outer` alone: the same bits on every run and replica count, and the same
// kernels on the host and on a GPU. The deterministic row-order scheme takes
// a chunk per sample instead (chunk = the positions of a sample) and adds the
// chunks of every replica in row order (host::RowOrderSums::channel_sums).
inline constexpr std::size_t kChunk = 256;
LOCKSTEP_HOST_DEVICE constexpr std::size_t chunk_count(std::size_t outer, std::size_t chunk = kChunk) {
  return (outer + chunk - 1) / chunk;
}

// Stage 1: partial[(k * chunks + p) * C + c] = the sum over chunk p of
// channel c of the Term's k-th value (Term::kValues of them). A Term adds
// value k of element i (channel c) to acc[k * stride].
template <class T, class Term>
struct ChunkSums {
  Term term;
  T* partial;
  std::size_t outer;
  std::size_t channels;
  std::size_t chunk = kChunk;  // consecutive rows of `outer` per chunk
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t p = i / channels, c = i % channels;
    double acc[Term::kValues] = {};
    for (std::size_t o = p * chunk; o < chunk_end(p); ++o) term(o * channels + c, c, acc, 1);
    for (int k = 0; k < Term::kValues; ++k) partial[index(k, p, c)] = static_cast<T>(acc[k]);
  }
  // The host's loop (host::for_each_index): a chunk's rows outermost and up
  // to kBlock channels innermost, each with its own sum, so that the adds
  // vectorise across channels instead of waiting on each other down one
  // channel. Each channel still adds the chunk's rows in order: the same bits.
  void host_loop(std::size_t n) const {  // n = chunk_count(outer, chunk) * channels
    constexpr std::size_t kBlock = 64;
    for (std::size_t p = 0; p < n / channels; ++p) {
      for (std::size_t c0 = 0; c0 < channels; c0 += kBlock) {
        const std::size_t width = channels - c0 < kBlock ? channels - c0 : kBlock;
        double acc[Term::kValues * kBlock] = {};
        for (std::size_t o = p * chunk; o < chunk_end(p); ++o) {
          const std::size_t row = o * channels + c0;
          LOCKSTEP_INDEPENDENT_ITERATIONS
          for (std::size_t c = 0; c < width; ++c) term(row + c, c0 + c, acc + c, kBlock);
        }
        for (int k = 0; k < Term::kValues; ++k)
          for (std::size_t c = 0; c < width; ++c)
            partial[index(k, p, c0 + c)] = static_cast<T>(acc[static_cast<std::size_t>(k) * kBlock + c]);
      }
    }
  }

 private:
  LOCKSTEP_HOST_DEVICE std::size_t chunk_end(std::size_t p) const {
    return (p + 1) * chunk < outer ? (p + 1) * chunk : outer;
  }
  LOCKSTEP_HOST_DEVICE std::size_t index(int k, std::size_t p, std::size_t c) const {
    return (static_cast<std::size_t>(k) * chunk_count(outer, chunk) + p) * channels + c;
  }
};
// Stage 2: value k of channel c summed over the chunks, in chunk order.
template <class T>
LOCKSTEP_HOST_DEVICE double chunk_total(const T* partial, std::size_t outer, std::size_t channels, int k,
                                        std::size_t c) {
  const std::size_t chunks = chunk_count(outer);
  double s = 0;
  for (std::size_t p = 0; p < chunks; ++p) s += partial[(static_cast<std::size_t>(k) * chunks + p) * channels + c];
  return s;
}

// f.at(i, c) for every element i of (n / C, C) values, c = i % C: the host
// loop of an element-wise functor that needs its element's channel, channels
// innermost so that it vectorises (a GPU's f(i) divides i by C instead).
template <class F>
void for_each_channel(std::size_t n, std::size_t channels, const F& f) {
  for (std::size_t row = 0; row < n; row += channels) {
    LOCKSTEP_INDEPENDENT_ITERATIONS
    for (std::size_t c = 0; c < channels; ++c) f.at(row + c, c);
  }
}

// Terms: x; (x - mean)^2; dy and dy xhat (backward).
template <class T>
struct Values {
  static constexpr int kValues = 1;
  const T* x;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i, std::size_t, double* acc, std::size_t) const {
    acc[0] += x[i];
  }
};
template <class T>
struct SquaredDeviations {
  static constexpr int kValues = 1;
  const T* x;
  const T* mean;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i, std::size_t c, double* acc, std::size_t) const {
    const double d = static_cast<double>(x[i]) - static_cast<double>(mean[c]);
    acc[0] += d * d;
  }
};
// The layer's output at one value, before any fused activation: forward
// (Normalize) and the fused backward's recomputation call this one function,
// so that both round alike.
template <class T>
LOCKSTEP_HOST_DEVICE T normalized(T x, T mean, T inv_std, T gamma, T beta) {
  return gamma * ((x - mean) * inv_std) + beta;
}
// dy, the gradient of what follows the layer, as a gradient of the layer's
// own output: itself, or, where an activation Act runs fused with the layer
// (BatchNormalization then Relu), taken back through Act at the output
// forward gave, recomputed from x (the same bits): the values Act's own
// layer would have written in a pass of its own.
template <class Act, class T>
LOCKSTEP_HOST_DEVICE T output_gradient(const T* dy, const T* x, const T* mean, const T* inv_std, const T* gamma,
                                       const T* beta, std::size_t i, std::size_t c) {
  if constexpr (Act::kIdentity) {
    return (void)x, (void)mean, (void)inv_std, (void)gamma, (void)beta, (void)c, dy[i];
  } else {
    return Act::derivative_from_output(Act::forward(normalized(x[i], mean[c], inv_std[c], gamma[c], beta[c]))) *
           dy[i];
  }
}
// gamma and beta: only for an activation that follows (Act).
template <class T, class Act = Linear>
struct GradientTerms {
  static constexpr int kValues = 2;
  const T* x;
  const T* dy;
  const T* mean;
  const T* inv_std;
  const T* gamma = nullptr;
  const T* beta = nullptr;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i, std::size_t c, double* acc, std::size_t stride) const {
    const double xhat = (static_cast<double>(x[i]) - mean[c]) * inv_std[c];
    const T g = output_gradient<Act>(dy, x, mean, inv_std, gamma, beta, i, c);
    acc[0] += g;
    acc[stride] += g * xhat;
  }
};

// Synchronized, after the sums of x: sums[c] = sum x, sums[C] = outer (the count).
template <class T>
struct ChannelSums {
  const T* partial;
  T* sums;
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    sums[c] = static_cast<T>(chunk_total(partial, outer, channels, 0, c));
    if (c == 0) sums[channels] = static_cast<T>(outer);
  }
};
// mean[c] = sums[c] / count (0 where the count is 0): the summed sums'
// global mean (synchronized), or this slice's (count = outer).
template <class T>
struct ChannelMean {
  const T* sums;
  const T* count;  // one value
  T* mean;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    const double n = static_cast<double>(*count);
    mean[c] = static_cast<T>(n > 0 ? static_cast<double>(sums[c]) / n : 0.0);
  }
};
// out[c] = the chunks' total of value k.
template <class T>
struct ChannelTotal {
  const T* partial;
  T* out;
  std::size_t outer;
  std::size_t channels;
  int k;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    out[c] = static_cast<T>(chunk_total(partial, outer, channels, k, c));
  }
};
// Per replica, after the squared deviations from its mean: its variance, and
// (for the moving statistics' mean over replicas) mean * has, var * has and
// has = outer > 0.
template <class T>
struct ChannelMoments {
  const T* partial;
  const T* mean;
  T* var;
  T* shares;  // [C means][C variances][1 replica count]
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    const double q = chunk_total(partial, outer, channels, 0, c);
    const double v = outer ? q / static_cast<double>(outer) : 0.0;
    var[c] = static_cast<T>(v);
    shares[c] = mean[c];
    shares[channels + c] = static_cast<T>(v);
    if (c == 0) shares[2 * channels] = static_cast<T>(outer ? 1 : 0);
  }
};
// inv_std[c] = 1 / sqrt(var + epsilon), and the moving statistics updated
// with (mean_sum / weight, var_sum / weight) when weight > 0.
template <class T>
struct ChannelFinish {
  const T* var;  // this replica's normalising variance (may alias var_sum: read first)
  T* inv_std;
  const T* mean_sum;
  const T* var_sum;
  const T* weight;  // one value: what the sums are divided by
  T* moving_mean;
  T* moving_var;
  double momentum, epsilon;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    const double w = static_cast<double>(*weight);
    const double normalising = static_cast<double>(var[c]);
    inv_std[c] = static_cast<T>(1.0 / std::sqrt(normalising + epsilon));
    if (w > 0) {
      moving_mean[c] = static_cast<T>(momentum * moving_mean[c] + (1.0 - momentum) * (mean_sum[c] / w));
      moving_var[c] = static_cast<T>(momentum * moving_var[c] + (1.0 - momentum) * (var_sum[c] / w));
    }
  }
};
// y = Act(gamma (x - mean) inv_std + beta), element-wise over (outer, C):
// Act is the activation fused with the layer, or Linear.
template <class T, class Act = Linear>
struct Normalize {
  const T* x;
  T* y;
  const T* mean;
  const T* inv_std;
  const T* gamma;
  const T* beta;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void at(std::size_t i, std::size_t c) const {
    y[i] = Act::forward(normalized(x[i], mean[c], inv_std[c], gamma[c], beta[c]));
  }
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { at(i, i % channels); }
  void host_loop(std::size_t n) const { for_each_channel(n, channels, *this); }
};
// Inference's statistics: mean = the moving mean, inv_std from the moving variance.
template <class T>
struct MovingStatistics {
  const T* moving_mean;
  const T* moving_var;
  T* mean;
  T* inv_std;
  double epsilon;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    mean[c] = moving_mean[c];
    inv_std[c] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(moving_var[c]) + epsilon));
  }
};
// Backward, after the sums of dy and dy xhat: dbeta, dgamma (this
// replica's rows), and copies of both into `sums` for the sum over replicas.
template <class T>
struct ChannelGradSums {
  const T* partial;
  T* dgamma;
  T* dbeta;
  T* sums;  // [C dbeta][C dgamma]
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    const T db = static_cast<T>(chunk_total(partial, outer, channels, 0, c));
    const T dg = static_cast<T>(chunk_total(partial, outer, channels, 1, c));
    dbeta[c] = db;
    dgamma[c] = dg;
    sums[c] = db;
    sums[channels + c] = dg;
  }
};
// dx = gamma inv_std / N (N dy - sum dy - xhat sum dy xhat), N the count the
// statistics were taken over and the sums over the same rows; dy taken back
// through Act first where an activation is fused with the layer (beta: only then).
template <class T, class Act = Linear>
struct NormalizeBackward {
  const T* x;
  const T* dy;
  T* dx;
  const T* mean;
  const T* inv_std;
  const T* gamma;
  const T* sums;   // [C sum dy][C sum dy xhat]
  const T* count;  // one value: N
  std::size_t channels;
  const T* beta = nullptr;
  LOCKSTEP_HOST_DEVICE void at(std::size_t i, std::size_t c) const {
    const T n = *count;
    const T xhat = (x[i] - mean[c]) * inv_std[c];
    const T g = output_gradient<Act>(dy, x, mean, inv_std, gamma, beta, i, c);
    dx[i] = gamma[c] * inv_std[c] / n * (n * g - sums[c] - xhat * sums[channels + c]);
  }
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const { at(i, i % channels); }
  void host_loop(std::size_t n) const { for_each_channel(n, channels, *this); }
};
// out[c] = a[c] / *n (0 where n is 0).
template <class T>
struct DivideBy {
  const T* a;
  const T* n;
  T* out;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const { out[c] = *n > T(0) ? a[c] / *n : T(0); }
};
// *at = value, on the backend (a kernel on CUDA, so that it keeps its place in the stream).
template <class T>
struct SetValue {
  T* at;
  T value;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t) const { *at = value; }
};
}  // namespace kernels

template <bool Synchronized = false, class Hyper = BatchNormDefaults>
struct BatchNormalization {
  static constexpr bool kSynchronized = Synchronized;

  template <class In>
  struct Bind {
    using out_shape = In;
    static constexpr int kIn = In::kSize, kOut = In::kSize;
    static constexpr int kChannels = In::kLast;
    static constexpr std::size_t C = static_cast<std::size_t>(kChannels);
    static constexpr std::size_t kParams = 2 * C;  // gamma, beta
    static constexpr std::size_t kState = 2 * C;   // moving_mean, moving_variance
    // mean, inv_std (forward -> backward); sums (2C + 1); the count N for
    // backward; then the chunks' partial sums (up to 2 values x C channels x
    // chunk_count(outer) chunks), which 2C plus kScratchPerRow x rows covers:
    // chunk_count(rows x kSpatial) <= rows x kSpatial / kChunk + 1.
    static constexpr std::size_t kSpatial = static_cast<std::size_t>(kIn) / C;  // positions per sample
    // Synchronised, the row-order scheme's chunks are samples: 2 x C per row.
    static constexpr std::size_t kScratch = 2 * C + (2 * C + 1) + 1 + 2 * C;
    static constexpr std::size_t kChunkedPerRow = (2 * C * kSpatial + kernels::kChunk - 1) / kernels::kChunk;
    static constexpr std::size_t kScratchPerRow =
        Synchronized && 2 * C > kChunkedPerRow ? 2 * C : kChunkedPerRow;
    // Synchronised, the deterministic row-order scheme may run it: its sums
    // then go through pass.rows. Per-replica statistics depend on the
    // replica count by definition.
    static constexpr bool kRowOrder = Synchronized;
    // Synchronised, its backward meets at row_sums before it writes dx (dy is
    // read only).
    static constexpr bool kMeetsFirst = Synchronized;
    static constexpr const char* kName = "batch_normalization";

    template <class F>
    static void variables(F&& f) {
      const std::vector<std::int64_t> shape{kChannels};
      f("gamma", true, std::size_t{0}, shape);
      f("beta", true, C, shape);
      f("moving_mean", false, std::size_t{0}, shape);
      f("moving_variance", false, C, shape);
    }

    static void init(float* params, std::uint64_t, std::uint64_t) {
      for (std::size_t c = 0; c < C; ++c) {
        params[c] = 1.0f;
        params[C + c] = 0.0f;
      }
    }
    static void init_state(float* state) {
      for (std::size_t c = 0; c < C; ++c) {
        state[c] = 0.0f;
        state[C + c] = 1.0f;
      }
    }

    // Sequential runs an activation layer Act that follows this one inside
    // it where kFuses<Act> (forward_activated, backward_activated): forward
    // writes Act's output, backward takes the gradient of Act's output and
    // recomputes Act's input from x, which saves the activation layer's pass
    // over the whole feature map each way and one more read of it in backward
    // (BatchNormalization then Relu, the usual order in a convnet). The
    // results are the bits of the two layers run one after the other. Relu
    // only: recomputing an exp or a tanh per value twice in backward costs
    // more than the passes it saves.
    template <class Act>
    static constexpr bool kFuses = std::is_same_v<Act, Relu>;

    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P& pass, Slots<T> s, const T* x, T* y, int rows) {
      forward_activated<Linear>(ctx, pass, s, x, y, rows);
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P& pass, Slots<T> s, const T* x, const T*, T* dy, T* dx, T* dparams,
                         int rows) {
      backward_activated<Linear>(ctx, pass, s, x, dy, dx, dparams, rows);
    }

    // y = Act(this layer's output).
    template <class Act, class Ctx, class P, class T>
    static void forward_activated(Ctx& ctx, const P& pass, Slots<T> s, const T* x, T* y, int rows) {
      const std::size_t outer = static_cast<std::size_t>(rows) * kSpatial;
      const T* gamma = s.params;
      const T* beta = s.params + C;
      T* moving_mean = s.state;
      T* moving_var = s.state + C;
      T* mean = s.scratch;
      T* inv_std = mean + C;
      T* sums = inv_std + C;
      T* count = sums + 2 * C + 1;
      T* partial = count + 1;
      if (!pass.training()) {
        ctx.for_each_index(C, kernels::MovingStatistics<T>{moving_mean, moving_var, mean, inv_std, Hyper::kEpsilon});
      } else if (in_row_order(pass)) {
        // The same two sums, each over the global batch's samples in row order.
        sum_samples(ctx, kernels::Values<T>{x}, partial, outer);
        const std::size_t samples = row_sums(pass, ctx, partial, rows, 1, sums);
        ctx.for_each_index(1, SetCount<T>{count, static_cast<T>(samples * kSpatial)});
        ctx.for_each_index(C, kernels::ChannelMean<T>{sums, count, mean});
        T* centred = sums + C + 1;
        sum_samples(ctx, kernels::SquaredDeviations<T>{x, mean}, partial, outer);
        row_sums(pass, ctx, partial, rows, 1, centred);
        ctx.for_each_index(C, DivideBy<T>{centred, count, sums});
        ctx.for_each_index(C, kernels::ChannelFinish<T>{sums, inv_std, mean, sums, one(ctx, sums), moving_mean,
                                                        moving_var, Hyper::kMomentum, Hyper::kEpsilon});
      } else if constexpr (Synchronized) {
        // The global mean, then the global sum of squared deviations from it:
        // two small sums over replicas, exact where the one-pass formula cancels.
        sum_chunks(ctx, kernels::Values<T>{x}, partial, outer);
        ctx.for_each_index(C, kernels::ChannelSums<T>{partial, sums, outer, C});
        pass.sum(sums, C + 1);
        ctx.copy(count, sums + C, 1);
        ctx.for_each_index(C, kernels::ChannelMean<T>{sums, count, mean});
        T* centred = sums + C + 1;  // C values after the count
        sum_chunks(ctx, kernels::SquaredDeviations<T>{x, mean}, partial, outer);
        ctx.for_each_index(C, kernels::ChannelTotal<T>{partial, centred, outer, C, 0});
        pass.sum(centred, C);
        // var = centred / N, kept in `sums` (its C sums are no longer needed); every replica agrees.
        ctx.for_each_index(C, DivideBy<T>{centred, count, sums});
        ctx.for_each_index(C, kernels::ChannelFinish<T>{sums, inv_std, mean, sums, one(ctx, sums), moving_mean,
                                                        moving_var, Hyper::kMomentum, Hyper::kEpsilon});
      } else {
        // This slice's mean and variance; then shares: [C means][C
        // variances][replicas with rows], summed over replicas.
        ctx.for_each_index(1, SetCount<T>{count, static_cast<T>(outer)});
        sum_chunks(ctx, kernels::Values<T>{x}, partial, outer);
        ctx.for_each_index(C, kernels::ChannelTotal<T>{partial, sums, outer, C, 0});
        ctx.for_each_index(C, kernels::ChannelMean<T>{sums, count, mean});
        sum_chunks(ctx, kernels::SquaredDeviations<T>{x, mean}, partial, outer);
        ctx.for_each_index(C, kernels::ChannelMoments<T>{partial, mean, inv_std, sums, outer, C});
        pass.sum(sums, 2 * C + 1);
        // inv_std holds this slice's variance until ChannelFinish turns it into 1 / sqrt(var + eps).
        ctx.for_each_index(C, kernels::ChannelFinish<T>{inv_std, inv_std, sums, sums + C, sums + 2 * C, moving_mean,
                                                        moving_var, Hyper::kMomentum, Hyper::kEpsilon});
      }
      ctx.for_each_index(outer * C, kernels::Normalize<T, Act>{x, y, mean, inv_std, gamma, beta, C});
    }

    // After forward_activated<Act> on the same x: dy is the gradient of Act's output.
    template <class Act, class Ctx, class P, class T>
    static void backward_activated(Ctx& ctx, const P& pass, Slots<T> s, const T* x, const T* dy, T* dx,
                                   T* dparams, int rows) {
      const std::size_t outer = static_cast<std::size_t>(rows) * kSpatial;
      const T* gamma = s.params;
      const T* beta = s.params + C;
      T* mean = s.scratch;
      T* inv_std = mean + C;
      T* sums = inv_std + C;
      T* count = sums + 2 * C + 1;
      T* partial = count + 1;
      if (in_row_order(pass)) {
        // sums = [C sum dy][C sum dy xhat] over the global batch, on every
        // replica; the gradients (dgamma, dbeta) are replica 0's to give.
        sum_samples(ctx, kernels::GradientTerms<T, Act>{x, dy, mean, inv_std, gamma, beta}, partial, outer);
        row_sums(pass, ctx, partial, rows, 2, sums);
        give(pass, sums + C, dparams);
        give(pass, sums, dparams + C);
      } else {
        sum_chunks(ctx, kernels::GradientTerms<T, Act>{x, dy, mean, inv_std, gamma, beta}, partial, outer);
        ctx.for_each_index(C, kernels::ChannelGradSums<T>{partial, dparams, dparams + C, sums, outer, C});
        if (Synchronized && dx) pass.sum(sums, 2 * C);
      }
      if (!dx) return;
      ctx.for_each_index(outer * C, kernels::NormalizeBackward<T, Act>{x, dy, dx, mean, inv_std, gamma, sums, count,
                                                                        C, beta});
    }

   private:
    // Stage 1 of a per-channel sum (kernels::ChunkSums): a thread per chunk and channel.
    template <class Ctx, class T, class Term>
    static void sum_chunks(Ctx& ctx, const Term& term, T* partial, std::size_t outer) {
      ctx.for_each_index(kernels::chunk_count(outer) * C, kernels::ChunkSums<T, Term>{term, partial, outer, C});
    }
    // The row-order scheme's stage 1: a chunk per sample (its kSpatial positions).
    template <class Ctx, class T, class Term>
    static void sum_samples(Ctx& ctx, const Term& term, T* partial, std::size_t outer) {
      ctx.for_each_index(kernels::chunk_count(outer, kSpatial) * C,
                         kernels::ChunkSums<T, Term>{term, partial, outer, C, kSpatial});
    }
    // Whether this pass takes its sums over rows in the deterministic
    // row-order scheme (a pass whose `rows` may span replicas, and does).
    template <class P>
    static bool in_row_order(const P& pass) {
      if constexpr (Synchronized && std::decay_t<decltype(pass.rows)>::kSpansReplicas)
        return pass.rows.global();
      else
        return (void)pass, false;
    }
    // Stage 2 in row order: out[k * C + c] for k < values, summed over every
    // replica's samples; the global batch's sample count.
    template <class P, class Ctx, class T>
    static std::size_t row_sums(const P& pass, Ctx& ctx, const T* partial, int rows, int values, T* out) {
      if constexpr (std::decay_t<decltype(pass.rows)>::kSpansReplicas)
        return pass.rows.channel_sums(ctx, partial, rows, values, static_cast<int>(C), out);
      else
        return (void)pass, (void)ctx, (void)partial, (void)values, (void)out, static_cast<std::size_t>(rows);
    }
    // A row-order sum that every replica holds, as this replica's C gradients.
    template <class P, class T>
    static void give(const P& pass, const T* from, T* to) {
      if constexpr (std::decay_t<decltype(pass.rows)>::kSpansReplicas)
        pass.rows.give(from, to, C);
      else
        (void)pass, (void)from, (void)to;
    }
    template <class T>
    using DivideBy = kernels::DivideBy<T>;
    template <class T>
    using SetCount = kernels::SetValue<T>;
    // A pointer to the value 1 for ChannelFinish's weight (the synchronised
    // statistics are already means), in the last slot of `sums`, whose
    // centred sum DivideBy has consumed by then.
    template <class Ctx, class T>
    static const T* one(Ctx& ctx, T* sums) {
      ctx.for_each_index(1, SetCount<T>{sums + 2 * C, T(1)});
      return sums + 2 * C;
    }
  };
};

using SyncBatchNormalization = BatchNormalization<true>;

}  // namespace lockstep
