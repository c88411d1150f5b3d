// The sharding loader's plan: a seeded shuffle per epoch, global batches cut
// from it, and each global batch split into per-replica slices. A short last
// batch is split too (a slice may be empty) and the loss is weighted by the
// real sample count, so every step equals the single-device step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/data/dataset.hpp"

namespace lockstep {

class Loader {
 public:
  Loader(std::size_t samples, std::size_t global_batch, bool shuffle, bool drop_remainder, std::uint64_t seed)
      : samples_(samples), batch_(global_batch), shuffle_(shuffle), drop_remainder_(drop_remainder), seed_(seed) {
    require(global_batch >= 1, "batch size ", global_batch, ", expected at least 1");
    require(samples >= 1, "the data set is empty, expected at least 1 sample");
    require(samples <= UINT32_MAX, "the data set has ", samples, " samples, at most ", UINT32_MAX, " are supported");
    require(!drop_remainder || samples >= global_batch, "drop_remainder with ", samples,
            " samples and batch size ", global_batch, " leaves no batch; expected at least one full batch");
    order_.resize(samples);
    std::iota(order_.begin(), order_.end(), 0u);
  }

  // Written so that no batch size, however large, wraps around (to 0 steps).
  std::size_t steps() const { return samples_ / batch_ + (!drop_remainder_ && samples_ % batch_ != 0 ? 1 : 0); }
  std::size_t batch_size() const { return batch_; }

  // The order of epoch `epoch`: a Fisher-Yates shuffle driven by
  // Philox(seed, epoch), so it repeats for a seed and differs between epochs.
  void begin_epoch(std::uint64_t epoch) {
    std::iota(order_.begin(), order_.end(), 0u);
    if (!shuffle_) return;
    for (std::size_t i = samples_ - 1; i > 0; --i) {
      const std::uint64_t r = Philox4x32::bits64(seed_, rng_stream::kShuffle + epoch, i);
      const std::size_t j = static_cast<std::size_t>((r >> 32) * (i + 1) >> 32);  // uniform in [0, i]
      std::swap(order_[i], order_[j]);
    }
  }

  // The sample indices of global batch `step`.
  std::pair<const std::uint32_t*, std::size_t> batch(std::size_t step) const {
    const std::size_t first = step * batch_;
    const std::size_t count = std::min(batch_, samples_ - first);
    return {order_.data() + first, count};
  }

  // Replica r's rows [first, last) of a global batch of `count` samples.
  static std::pair<std::size_t, std::size_t> replica_slice(std::size_t count, int replica, int replicas) {
    const std::size_t r = static_cast<std::size_t>(replica), n = static_cast<std::size_t>(replicas);
    return {count * r / n, count * (r + 1) / n};
  }

  // For inference over `samples` in batches of `batch`: calls f(first, rows)
  // with replica `index` of `total`'s rows of each batch (unshuffled).
  template <class F>
  static void for_each_slice(std::size_t samples, std::size_t batch, int index, int total, F&& f) {
    for (std::size_t start = 0; start < samples;) {
      const std::size_t count = std::min(batch, samples - start);
      const auto [lo, hi] = replica_slice(count, index, total);
      f(start + lo, static_cast<int>(hi - lo));
      start += count;  // not `batch`, which may wrap around past the end
    }
  }

  // The most rows a replica gets in any step over `samples` samples. A batch
  // size beyond the data set is one batch of all of it (as in Keras and
  // PyTorch's DataLoader), so buffers are sized for the rows that exist.
  static std::size_t slice_capacity(std::size_t global_batch, std::size_t samples, int replicas) {
    const std::size_t rows = std::max<std::size_t>(1, std::min(global_batch, samples));
    const std::size_t n = static_cast<std::size_t>(replicas);
    return rows / n + (rows % n != 0 ? 1 : 0);
  }

  const std::vector<std::uint32_t>& order() const { return order_; }

 private:
  std::size_t samples_, batch_;
  bool shuffle_, drop_remainder_;
  std::uint64_t seed_;
  std::vector<std::uint32_t> order_;
};

// Copies the samples `indices[0..count)` into x (count, features) and labels.
template <class Label>
void gather(const BasicDataset<Label>& data, const std::uint32_t* indices, std::size_t count, float* x, Label* labels) {
  const std::size_t f = data.feature_count(), w = data.label_width();
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(x + i * f, data.features(indices[i]), f * sizeof(float));
    std::memcpy(labels + i * w, data.labels(indices[i]), w * sizeof(Label));
  }
}

}  // namespace lockstep
