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
#include <vector>

#include "lockstep/core/config.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

struct BatchNormDefaults {
  static constexpr double kMomentum = 0.99;
  static constexpr double kEpsilon = 1e-3;
};

namespace kernels {
// The batch statistics of channel c of one replica's (outer, C) values.
// Synchronized, first pass: sums[c] = sum x, sums[C] = outer (the count).
template <class T>
struct ChannelSums {
  const T* x;
  T* sums;
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    double s = 0;
    for (std::size_t o = 0; o < outer; ++o) s += x[o * channels + c];
    sums[c] = static_cast<T>(s);
    if (c == 0) sums[channels] = static_cast<T>(outer);
  }
};
// Synchronized, second pass: mean[c] from the summed sums; centred[c] = sum (x - mean)^2.
template <class T>
struct ChannelCentred {
  const T* x;
  const T* sums;  // summed over replicas: C sums, then the count
  T* mean;
  T* centred;
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    const double count = static_cast<double>(sums[channels]);
    const double m = count > 0 ? static_cast<double>(sums[c]) / count : 0.0;
    double q = 0;
    for (std::size_t o = 0; o < outer; ++o) {
      const double d = static_cast<double>(x[o * channels + c]) - m;
      q += d * d;
    }
    mean[c] = static_cast<T>(m);
    centred[c] = static_cast<T>(q);
  }
};
// Per replica: this slice's mean and variance, and (for the moving
// statistics' mean over replicas) mean * has, var * has and has = outer > 0.
template <class T>
struct ChannelMoments {
  const T* x;
  T* mean;
  T* var;
  T* shares;  // [C means][C variances][1 replica count]
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    double s = 0;
    for (std::size_t o = 0; o < outer; ++o) s += x[o * channels + c];
    const double m = outer ? s / static_cast<double>(outer) : 0.0;
    double q = 0;
    for (std::size_t o = 0; o < outer; ++o) {
      const double d = static_cast<double>(x[o * channels + c]) - m;
      q += d * d;
    }
    const double v = outer ? q / static_cast<double>(outer) : 0.0;
    mean[c] = static_cast<T>(m);
    var[c] = static_cast<T>(v);
    shares[c] = static_cast<T>(m);
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
// y = gamma (x - mean) inv_std + beta, element-wise over (outer, C).
template <class T>
struct Normalize {
  const T* x;
  T* y;
  const T* mean;
  const T* inv_std;
  const T* gamma;
  const T* beta;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % channels;
    y[i] = gamma[c] * ((x[i] - mean[c]) * inv_std[c]) + beta[c];
  }
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
// Backward, per channel: dbeta = sum dy, dgamma = sum dy xhat (this replica's
// rows); copies of both into `sums` for the sum over replicas.
template <class T>
struct ChannelGradSums {
  const T* x;
  const T* dy;
  const T* mean;
  const T* inv_std;
  T* dgamma;
  T* dbeta;
  T* sums;  // [C dbeta][C dgamma]
  std::size_t outer;
  std::size_t channels;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t c) const {
    double db = 0, dg = 0;
    for (std::size_t o = 0; o < outer; ++o) {
      const std::size_t i = o * channels + c;
      const double xhat = (static_cast<double>(x[i]) - mean[c]) * inv_std[c];
      db += dy[i];
      dg += dy[i] * xhat;
    }
    dbeta[c] = static_cast<T>(db);
    dgamma[c] = static_cast<T>(dg);
    sums[c] = static_cast<T>(db);
    sums[channels + c] = static_cast<T>(dg);
  }
};
// dx = gamma inv_std / N (N dy - sum dy - xhat sum dy xhat), N the count the
// statistics were taken over and the sums over the same rows.
template <class T>
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
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % channels;
    const T n = *count;
    const T xhat = (x[i] - mean[c]) * inv_std[c];
    dx[i] = gamma[c] * inv_std[c] / n * (n * dy[i] - sums[c] - xhat * sums[channels + c]);
  }
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
    // mean, inv_std (forward -> backward); sums (2C + 1); the count N for backward.
    static constexpr std::size_t kScratch = 2 * C + (2 * C + 1) + 1;
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

    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P& pass, Slots<T> s, const T* x, T* y, int rows) {
      const std::size_t outer = static_cast<std::size_t>(rows) * (kIn / C);
      const T* gamma = s.params;
      const T* beta = s.params + C;
      T* moving_mean = s.state;
      T* moving_var = s.state + C;
      T* mean = s.scratch;
      T* inv_std = mean + C;
      T* sums = inv_std + C;
      T* count = sums + 2 * C + 1;
      if (!pass.training()) {
        ctx.for_each_index(C, kernels::MovingStatistics<T>{moving_mean, moving_var, mean, inv_std, Hyper::kEpsilon});
      } else if constexpr (Synchronized) {
        // The global mean, then the global sum of squared deviations from it:
        // two small sums over replicas, exact where the one-pass formula cancels.
        ctx.for_each_index(C, kernels::ChannelSums<T>{x, sums, outer, C});
        pass.sum(sums, C + 1);
        ctx.copy(count, sums + C, 1);
        T* centred = sums + C + 1;  // C values after the count
        ctx.for_each_index(C, kernels::ChannelCentred<T>{x, sums, mean, centred, outer, C});
        pass.sum(centred, C);
        // var = centred / N, kept in `sums` (its C sums are no longer needed); every replica agrees.
        ctx.for_each_index(C, DivideBy<T>{centred, count, sums});
        ctx.for_each_index(C, kernels::ChannelFinish<T>{sums, inv_std, mean, sums, one(ctx, sums), moving_mean,
                                                        moving_var, Hyper::kMomentum, Hyper::kEpsilon});
      } else {
        // shares: [C means][C variances][replicas with rows], summed over replicas.
        ctx.for_each_index(C, kernels::ChannelMoments<T>{x, mean, inv_std, sums, outer, C});
        pass.sum(sums, 2 * C + 1);
        // inv_std holds this slice's variance until ChannelFinish turns it into 1 / sqrt(var + eps).
        ctx.for_each_index(C, kernels::ChannelFinish<T>{inv_std, inv_std, sums, sums + C, sums + 2 * C, moving_mean,
                                                        moving_var, Hyper::kMomentum, Hyper::kEpsilon});
        ctx.for_each_index(1, SetCount<T>{count, static_cast<T>(outer)});
      }
      ctx.for_each_index(outer * C, kernels::Normalize<T>{x, y, mean, inv_std, gamma, beta, C});
    }

    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P& pass, Slots<T> s, const T* x, const T*, T* dy, T* dx, T* dparams,
                         int rows) {
      const std::size_t outer = static_cast<std::size_t>(rows) * (kIn / C);
      const T* gamma = s.params;
      T* mean = s.scratch;
      T* inv_std = mean + C;
      T* sums = inv_std + C;
      T* count = sums + 2 * C + 1;
      ctx.for_each_index(C, kernels::ChannelGradSums<T>{x, dy, mean, inv_std, dparams, dparams + C, sums, outer, C});
      if (!dx) return;
      if constexpr (Synchronized) pass.sum(sums, 2 * C);
      ctx.for_each_index(outer * C,
                         kernels::NormalizeBackward<T>{x, dy, dx, mean, inv_std, gamma, sums, count, C});
    }

   private:
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
